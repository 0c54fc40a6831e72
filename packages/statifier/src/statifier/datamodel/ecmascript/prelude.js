// Hardening and host bridge of one sandbox context (see ADR 10).
//
// Evaluated once per context, before any chart code. It removes every way to observe the
// clock, randomness or garbage collection, defines the SCXML system variables and In(),
// freezes every built-in object so that one chart cannot change what the next one sees,
// and returns the host-only functions. Chart code cannot reach them: they live in this
// closure, and the function returned (which hands them out by name) is held by Python alone.
(function (global) {
  "use strict";
  const parseJSON = JSON.parse;
  const stringify = JSON.stringify;
  const indirectEval = eval;
  const makeFunction = Function;
  const functionSource = Function.prototype.toString;
  const ownKeys = Reflect.ownKeys;
  const defineProperty = Object.defineProperty;
  const freezeObject = Object.freeze;
  const getPrototypeOf = Object.getPrototypeOf;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const hasOwn = Object.prototype.hasOwnProperty;
  const sliceString = String.prototype.slice;
  const indexOfString = String.prototype.indexOf;
  const isWellFormed = String.prototype.isWellFormed;
  const StringObject = String;

  // Every string handed to Python goes through here. One built by concatenation may be a
  // rope inside the engine, which the binding cannot convert: it is made flat. The binding
  // converts through a C string in UTF-8, so a NUL would cut a string short and a lone
  // surrogate (half an emoji, as slice() leaves it) would fail: such a string goes boxed,
  // and Python reads it through its JSON form, as it reads strings inside objects.
  function flat(value) {
    if (typeof value !== "string") return value;
    if (indexOfString.call(value, "\0") !== -1 || !isWellFormed.call(value)) {
      return new StringObject(value);
    }
    return sliceString.call(value, 0);
  }

  for (const name of [
    "Date", "performance", "WeakRef", "FinalizationRegistry", "queueMicrotask",
    "SharedArrayBuffer", "Atomics",
  ]) {
    delete global[name];
  }
  defineProperty(Math, "random", {
    value: function random() {
      throw new TypeError("Math.random is not available: chart code must be deterministic");
    },
  });

  const system = { __proto__: null };
  for (const name of ["_sessionid", "_name", "_ioprocessors", "_event"]) {
    defineProperty(global, name, {
      get() { return system[name]; },
      set(_value) { throw new TypeError("cannot assign to the system variable " + name); },
      enumerable: false,
      configurable: false,
    });
  }
  // In() answers from what the host hands over before each call: the answers for the state
  // ids the source names literally, and the whole active configuration when it has it.
  let inAnswers = { __proto__: null };
  let activeIds = null;
  defineProperty(global, "In", {
    value: function In(stateId) {
      const id = String(stateId);
      if (id in inAnswers) return inAnswers[id];
      if (activeIds !== null) return activeIds.has(id);
      throw new TypeError("In() needs its state id written as a string literal here");
    },
    writable: false, enumerable: false, configurable: false,
  });

  const seen = new Set();
  function deepFreeze(value) {
    if (value === null || (typeof value !== "object" && typeof value !== "function")) return;
    if (seen.has(value)) return;
    seen.add(value);
    for (const key of ownKeys(value)) {
      const descriptor = getOwnPropertyDescriptor(value, key);
      if (hasOwn.call(descriptor, "value")) deepFreeze(descriptor.value);
      else { deepFreeze(descriptor.get); deepFreeze(descriptor.set); }
    }
    deepFreeze(getPrototypeOf(value));
    freezeObject(value);
  }
  const baseline = new Set(ownKeys(global));
  for (const key of baseline) {
    const descriptor = getOwnPropertyDescriptor(global, key);
    if (hasOwn.call(descriptor, "value") && descriptor.value !== global) deepFreeze(descriptor.value);
    if (descriptor.configurable) {
      if (hasOwn.call(descriptor, "value")) descriptor.writable = false;
      descriptor.configurable = false;
      defineProperty(global, key, descriptor);
    }
  }
  deepFreeze(getPrototypeOf(global));

  // Stored form of one variable (ADR 10): JSON text; undefined and null are "null"; a
  // function is {"$function": source}; anything JSON cannot hold throws (a cycle, a BigInt).
  function store(value) {
    if (value === undefined || value === null) return "null";
    if (typeof value === "function") {
      const source = functionSource.call(value);
      if (/\[native code\]\s*\}$/.test(source)) return "null";
      return stringify({ $function: source });
    }
    if (typeof value === "symbol") throw new TypeError("a symbol cannot be stored in the datamodel");
    const text = stringify(value);
    return text === undefined ? "null" : text;
  }

  function revive(text) {
    const value = parseJSON(text);
    if (value === null) return undefined;
    if (typeof value === "object" && !Array.isArray(value)) {
      const keys = ownKeys(value);
      if (keys.length === 1 && keys[0] === "$function" && typeof value.$function === "string") {
        try {
          return indirectEval("(" + value.$function + "\n)");
        } catch (error) {
          return undefined;
        }
      }
    }
    return value;
  }

  function deepFreezeData(value) {
    if (value !== null && typeof value === "object") {
      for (const key of ownKeys(value)) deepFreezeData(value[key]);
      freezeObject(value);
    }
    return value;
  }

  const shadow = new Map();

  function userKeys() {
    return ownKeys(global).filter((key) => !baseline.has(key));
  }

  function changes() {
    const parts = [];
    const present = new Set();
    for (const key of userKeys()) {
      if (typeof key !== "string") {
        delete global[key];
        continue;
      }
      present.add(key);
      const text = store(global[key]);
      if (shadow.get(key) !== text) parts.push(stringify(key) + ":" + text);
    }
    for (const key of shadow.keys()) {
      if (!present.has(key)) parts.push(stringify(key) + ":null");
    }
    return parts.length === 0 ? "" : flat("{" + parts.join(",") + "}");
  }

  function install(name, text) {
    global[name] = revive(text);
    shadow.set(name, text);
  }

  const api = freezeObject({
    install,
    remove(name) {
      delete global[name];
      shadow.delete(name);
    },
    setSystem(name, text) {
      if (name === "_event") {
        const event = parseJSON(text);
        if (event !== null) {
          for (const key of ownKeys(event)) {
            if (event[key] === null) event[key] = undefined;
          }
        }
        system[name] = event === null ? undefined : deepFreezeData(event);
      } else {
        const value = parseJSON(text);
        system[name] = value === null ? undefined : deepFreezeData(value);
      }
    },
    setIn(answersText, activeText) {
      inAnswers = { __proto__: null, ...parseJSON(answersText) };
      const active = parseJSON(activeText);
      activeIds = active === null ? null : new Set(active);
    },
    changes,
    accept(text) {
      const changed = parseJSON(text);
      for (const key of ownKeys(changed)) install(key, stringify(changed[key]));
    },
    revert() {
      for (const key of userKeys()) {
        if (typeof key !== "string" || !shadow.has(key)) delete global[key];
      }
      for (const [key, text] of shadow) {
        if (!hasOwn.call(global, key) || store(global[key]) !== text) global[key] = revive(text);
      }
    },
    exportValue(value) {
      return store(value);
    },
    assignWith(assign, text, topLevel) {
      assign(topLevel ? revive(text) : parseJSON(text));
    },
    // For a location that can change nothing but its root variable: assign, then return
    // the root's new stored form, installed as the engine's value, or "" if it is unchanged.
    assignRoot(assign, text, topLevel, root) {
      assign(topLevel ? revive(text) : parseJSON(text));
      const stored = store(global[root]);
      if (shadow.get(root) === stored) return "";
      install(root, stored);
      return stored;
    },
    compileExpression(source) {
      // A trailing semicolon is tolerated: charts write expr="new Foo();".
      const body = source.replace(/[\s;]+$/, "");
      // The parenthesised form first: its syntax errors name the chart's own tokens. The
      // bracketed one then refuses what only parses by closing the parenthesis, "a), (b".
      const evaluate = makeFunction("return (" + body + "\n);");
      makeFunction("return [" + body + "\n];");
      return function expression() { return flat(evaluate()); };
    },
    compileLocation(source) {
      makeFunction("return (" + source + "\n);");
      makeFunction("return [" + source + "\n];");
      return makeFunction("__statifier_value", "(" + source + "\n) = __statifier_value;");
    },
    checkScript(source) {
      makeFunction(source);
      return true;
    },
    runScript(source) {
      indirectEval(source);
    },
  });
  return function pick(name) { return api[name]; };
})

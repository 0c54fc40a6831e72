// Hardening, variable store and host bridge of one chart instance's context (ADR 22).
//
// Evaluated once per context (one context per chart instance), before any chart code. It
// removes every way to observe the clock, randomness or garbage collection, defines the
// SCXML system variables and In(), freezes every built-in object (what a chart changed
// there would not survive its position), and returns the host-only functions. Chart code
// cannot reach them: they live in this closure, and the function returned (which hands
// them out by name) is held by Python alone.
//
// The chart's variables are the global object's own properties beyond the built-in ones.
// They live here between calls; encode() writes them out in the stored form: JSON where
// plain data is itself and anything else is a tag, an object whose one key starts with a
// single "$" ({"$ref": 3}, {"$function": "function (x) {...}"}); a data key that starts
// with "$" gets one more. Only decode() reads tags, and the only text it ever compiles is
// one of the chart's own function literals: no data becomes code.
(function (global) {
  "use strict";
  const parseJSON = JSON.parse;
  const stringify = JSON.stringify;
  const indirectEval = eval;
  const makeFunction = Function;
  const apply = Reflect.apply;
  const functionSource = Function.prototype.toString;
  const ownKeys = Reflect.ownKeys;
  const defineProperty = Object.defineProperty;
  const freezeObject = Object.freeze;
  const isFrozen = Object.isFrozen;
  const createObject = Object.create;
  const getPrototypeOf = Object.getPrototypeOf;
  const setPrototypeOf = Object.setPrototypeOf;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const isArray = Array.isArray;
  const isInteger = Number.isInteger;
  const log2 = Math.log2;
  const floor = Math.floor;
  const StringObject = String;
  const MapClass = Map;
  const SetClass = Set;
  const RegExpClass = RegExp;
  const BigIntFunction = BigInt;
  const mapSize = getOwnPropertyDescriptor(Map.prototype, "size").get;
  const setSize = getOwnPropertyDescriptor(Set.prototype, "size").get;
  const mapEntries = Map.prototype.entries;
  const setValues = Set.prototype.values;
  const mapSet = Map.prototype.set;
  const setAdd = Set.prototype.add;
  const mapClear = Map.prototype.clear;
  const setClear = Set.prototype.clear;
  const regexpSource = getOwnPropertyDescriptor(RegExp.prototype, "source").get;
  const regexpFlags = getOwnPropertyDescriptor(RegExp.prototype, "flags").get;
  const ObjectPrototype = Object.prototype;
  const GeneratorPrototype = getPrototypeOf(function* () {}).prototype;
  const AsyncGeneratorPrototype = getPrototypeOf(async function* () {}).prototype;
  const NON_ASCII = /[^\x00-\x7f]/;
  const SURROGATE_PAIR = /[\ud800-\udbff][\udc00-\udfff]/g;
  const TRAILING = /[\s;]+$/;
  const INLINE_DEPTH = 48;
  const IMPLICIT_KEYS = new Set(["valueOf", "toString", "join"]);
  const HEAP = "#objects";
  const REFERENCE_COST = 64;

  // Every string handed to Python goes through here. One built by concatenation may be a
  // rope inside the engine, which the binding cannot convert: it is made flat. The binding
  // converts through a C string in UTF-8, so a NUL would cut a string short and a lone
  // surrogate would fail: such a string goes boxed, and Python reads its JSON form.
  function flat(value) {
    if (value.indexOf("\0") !== -1 || !value.isWellFormed()) return new StringObject(value);
    return value.slice(0);
  }

  // -- hardening -------------------------------------------------------------------------

  for (const name of [
    "Date", "performance", "WeakRef", "FinalizationRegistry", "queueMicrotask",
    "SharedArrayBuffer", "Atomics", "Proxy",
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
  // In() answers from what the host hands over with each call: the answers for the state
  // ids the source names literally, and the whole active configuration when it has it.
  let inAnswers = null;
  let activeIds = null;
  defineProperty(global, "In", {
    value: function In(stateId) {
      const id = StringObject(stateId);
      if (inAnswers !== null && id in inAnswers) return inAnswers[id];
      if (activeIds !== null) return activeIds.has(id);
      throw new TypeError("In() needs its state id written as a string literal here");
    },
    writable: false, enumerable: false, configurable: false,
  });
  function setIn(answers) {
    if (answers === null) {
      inAnswers = null;
      activeIds = null;
      return;
    }
    const parsed = parseJSON(answers);
    inAnswers = { __proto__: null, ...parsed[0] };
    activeIds = parsed[1] === null ? null : new SetClass(parsed[1]);
  }

  const builtins = new SetClass();
  function deepFreeze(value) {
    if (value === null || (typeof value !== "object" && typeof value !== "function")) return;
    if (builtins.has(value)) return;
    builtins.add(value);
    for (const key of ownKeys(value)) {
      const descriptor = getOwnPropertyDescriptor(value, key);
      if ("value" in descriptor) deepFreeze(descriptor.value);
      else { deepFreeze(descriptor.get); deepFreeze(descriptor.set); }
    }
    deepFreeze(getPrototypeOf(value));
    freezeObject(value);
  }
  const baseline = new SetClass(ownKeys(global));
  for (const key of baseline) {
    const descriptor = getOwnPropertyDescriptor(global, key);
    if ("value" in descriptor && descriptor.value !== global) deepFreeze(descriptor.value);
    if (descriptor.configurable) {
      if ("value" in descriptor) descriptor.writable = false;
      descriptor.configurable = false;
      defineProperty(global, key, descriptor);
    }
  }
  deepFreeze(getPrototypeOf(global));
  // Intrinsics no global names, reachable through syntax (a generator, an iterator).
  for (const intrinsic of [
    getPrototypeOf(function* () {}), getPrototypeOf(async function () {}),
    getPrototypeOf(async function* () {}), getPrototypeOf([][Symbol.iterator]()),
    getPrototypeOf(new MapClass()[Symbol.iterator]()),
    getPrototypeOf(new SetClass()[Symbol.iterator]()),
    getPrototypeOf(""[Symbol.iterator]()), getPrototypeOf(/x/[Symbol.matchAll]("")),
  ]) {
    deepFreeze(intrinsic);
  }
  builtins.add(global);

  // Paths of the built-in objects ("Math.max", "Array.prototype"), made on first need.
  let builtinPaths = null;
  let builtinByPath = null;
  function pathsOfBuiltins() {
    if (builtinPaths !== null) return;
    builtinPaths = new MapClass();
    builtinByPath = new MapClass();
    const queue = [];
    for (const key of baseline) {
      if (typeof key !== "string") continue;
      const descriptor = getOwnPropertyDescriptor(global, key);
      if ("value" in descriptor) queue.push([descriptor.value, key]);
    }
    for (let i = 0; i < queue.length; i++) {
      const [value, path] = queue[i];
      if (!isObject(value) || value === global || builtinPaths.has(value)) continue;
      builtinPaths.set(value, path);
      builtinByPath.set(path, value);
      for (const key of ownKeys(value)) {
        if (typeof key !== "string") continue;
        const descriptor = getOwnPropertyDescriptor(value, key);
        if ("value" in descriptor) queue.push([descriptor.value, path + "." + key]);
      }
    }
  }

  function isObject(value) {
    return value !== null && (typeof value === "object" || typeof value === "function");
  }
  function isMap(value) {
    try { apply(mapSize, value, []); return true; } catch (_error) { return false; }
  }
  function isSet(value) {
    try { apply(setSize, value, []); return true; } catch (_error) { return false; }
  }
  function isRegExp(value) {
    try { apply(regexpSource, value, []); return true; } catch (_error) { return false; }
  }
  // A generator object runs chart code when a spread or a for-of reads it.
  function isGenerator(value) {
    for (let proto = getPrototypeOf(value); proto !== null; proto = getPrototypeOf(proto)) {
      if (proto === GeneratorPrototype || proto === AsyncGeneratorPrototype) return true;
    }
    return false;
  }
  function collectionItems(value) {
    const items = [];
    if (isMap(value)) {
      for (const [key, item] of apply(mapEntries, value, [])) items.push(key, item);
    } else if (isSet(value)) {
      for (const item of apply(setValues, value, [])) items.push(item);
    }
    return items;
  }

  // -- the chart's variables -------------------------------------------------------------

  function userKeys() {
    const keys = [];
    for (const key of ownKeys(global)) {
      if (typeof key === "string" && !baseline.has(key)) keys.push(key);
    }
    return keys;
  }
  function rootValue(key) {
    const descriptor = getOwnPropertyDescriptor(global, key);
    return descriptor !== undefined && "value" in descriptor ? descriptor.value : undefined;
  }
  function variableName(name) {
    const first = name.charCodeAt(0);
    return name.length > 0 && first !== 95 && first !== 35; // not "_...", not "#..."
  }

  // Objects the system variables hold, by path: a variable holding one is stored as
  // {"$system": path} (it stays the very object after a position round trip).
  let systemPaths = null;
  function systemPathOf(value) {
    if (systemPaths === null) {
      systemPaths = new MapClass();
      for (const name of ["_ioprocessors", "_event"]) {
        const queue = [[system[name], [name]]];
        for (let i = 0; i < queue.length; i++) {
          const [item, path] = queue[i];
          if (!isObject(item) || systemPaths.has(item)) continue;
          systemPaths.set(item, path);
          for (const key of ownKeys(item)) {
            if (typeof key === "string") queue.push([item[key], [...path, key]]);
          }
        }
      }
    }
    return systemPaths.get(value);
  }

  const state = {
    cap: 16 * 1024 * 1024,
    size: 0,          // the stored size of the variables at the last encode()
    bound: 0,         // an upper bound of it now: writes since add what they may add
    inert: true,      // no function the engine calls implicitly is reachable (see walk)
    dirty: true,      // something may have changed since the last encode()
    holdsEvent: false,  // a variable holds part of _event (stored as {"$system": path})
    known: new MapClass(),  // the objects the last encode() saw
    texts: new MapClass(),  // each variable's stored text at the last encode()
    revivable: new MapClass(),  // the chart's function literals: text -> how to rebuild
  };

  // Walks the variables: counts references to each object (one referred to twice is
  // stored once) and finds whether chart code can run without a call in the source: an
  // accessor, a function under a key the engine calls implicitly or under a symbol, a
  // generator. Until such a thing is gone again, every call is treated as writing.
  function walk() {
    const counts = new MapClass();
    let inert = true;
    const stack = [];
    for (const key of userKeys()) {
      const descriptor = getOwnPropertyDescriptor(global, key);
      if (!("value" in descriptor)) { inert = false; continue; }
      if (typeof descriptor.value === "function" && IMPLICIT_KEYS.has(key)) inert = false;
      stack.push(descriptor.value);
    }
    while (stack.length > 0) {
      const value = stack.pop();
      if (!isObject(value) || builtins.has(value) || systemPathOf(value) !== undefined) continue;
      const seen = counts.get(value);
      if (seen !== undefined) { counts.set(value, seen + 1); continue; }
      counts.set(value, 1);
      for (const key of ownKeys(value)) {
        const descriptor = getOwnPropertyDescriptor(value, key);
        if (!("value" in descriptor)) { inert = false; continue; }
        const item = descriptor.value;
        if (typeof key !== "string") {
          if (typeof item === "function") inert = false;
          continue;
        }
        if (typeof item === "function" && IMPLICIT_KEYS.has(key)) inert = false;
        if (descriptor.enumerable || (key === "prototype" && typeof value === "function")) {
          stack.push(item);
        }
      }
      const proto = getPrototypeOf(value);
      if (proto !== null && !builtins.has(proto)) stack.push(proto);
      if (isGenerator(value)) inert = false;
      for (const item of collectionItems(value)) stack.push(item);
    }
    return { counts, inert };
  }

  function tag(name, value) {
    const result = createObject(null);
    result[name] = value;
    return result;
  }
  const UNDEFINED_TAG = "{\"$undefined\":true}";
  function numberTag(value) {
    return tag("$number", value !== value ? "NaN" : value === Infinity ? "Infinity"
      : value === -Infinity ? "-Infinity" : "-0");
  }
  function escapeKey(key) {
    return key.charCodeAt(0) === 36 ? "$" + key : key;
  }

  // The stored form of every variable (see the top of this file). Returns the JSON text of
  // {name: stored value, ..., "#objects": [stored objects]}, the size Python measures it
  // at, and the variables whose stored text changed since the last encode().
  function encode() {
    const { counts, inert } = walk();
    const ids = new MapClass();
    const pending = [];
    let eventHeld = 0;
    let holdsEvent = false;

    function encodeValue(value, depth, top) {
      switch (typeof value) {
        case "string": case "boolean": return value;
        case "number":
          if (value !== value || value === Infinity || value === -Infinity ||
              (value === 0 && 1 / value < 0)) return numberTag(value);
          return value;
        case "undefined": return top ? null : tag("$undefined", true);
        case "bigint": return tag("$bigint", StringObject(value));
        case "symbol": return tag("$undefined", true);
      }
      if (value === null) return top ? tag("$null", true) : null;
      if (builtins.has(value)) {
        pathsOfBuiltins();
        const path = builtinPaths.get(value);
        return path === undefined ? tag("$undefined", true) : tag("$builtin", path);
      }
      const path = systemPathOf(value);
      if (path !== undefined) {
        // The event changes with the next one: what a variable holds of it then becomes
        // data of its own, so it counts at its full size now.
        if (path[0] === "_event") {
          eventHeld += measureNew(value, Infinity, true);
          holdsEvent = true;
        }
        return tag("$system", path);
      }
      if (counts.get(value) > 1 || depth >= INLINE_DEPTH) {
        let id = ids.get(value);
        if (id === undefined) {
          id = pending.length;
          ids.set(value, id);
          pending.push(value);
        }
        return tag("$ref", id);
      }
      return encodeObject(value, depth);
    }

    function encodeObject(value, depth) {
      if (isArray(value)) {
        const length = value.length;
        const out = [];
        for (let i = 0; i < length; i++) {
          const descriptor = getOwnPropertyDescriptor(value, i);
          out.push(descriptor !== undefined && "value" in descriptor
            ? encodeValue(descriptor.value, depth + 1, false) : tag("$undefined", true));
        }
        return out;
      }
      const out = createObject(null);
      if (typeof value === "function") {
        const text = apply(functionSource, value, []);
        const how = state.revivable.get(text);
        out.$function = how === "expression" || how === "method" ? text : null;
        const descriptor = getOwnPropertyDescriptor(value, "prototype");
        if (descriptor !== undefined && "value" in descriptor && isObject(descriptor.value) &&
            (counts.get(descriptor.value) > 1 || hasEnumerable(descriptor.value))) {
          out.$prototype = encodeValue(descriptor.value, depth + 1, false);
        }
      } else {
        const proto = getPrototypeOf(value);
        if (proto === MapClass.prototype && isMap(value)) {
          const entries = [];
          for (const [key, item] of apply(mapEntries, value, [])) {
            entries.push([encodeValue(key, depth + 2, false), encodeValue(item, depth + 2, false)]);
          }
          out.$map = entries;
          return out;
        }
        if (proto === SetClass.prototype && isSet(value)) {
          const items = [];
          for (const item of apply(setValues, value, [])) {
            items.push(encodeValue(item, depth + 2, false));
          }
          out.$set = items;
          return out;
        }
        if (proto === RegExpClass.prototype && isRegExp(value)) {
          out.$regexp = [apply(regexpSource, value, []), apply(regexpFlags, value, [])];
          return out;
        }
        if (proto !== ObjectPrototype) {
          out.$proto = proto === null ? null : encodeValue(proto, depth + 1, false);
        }
      }
      for (const key of ownKeys(value)) {
        if (typeof key !== "string") continue;
        const descriptor = getOwnPropertyDescriptor(value, key);
        if (!descriptor.enumerable || !("value" in descriptor)) continue;
        out[escapeKey(key)] = encodeValue(descriptor.value, depth + 1, false);
      }
      return out;
    }

    const parts = [];
    const texts = new MapClass();
    let size = 0;
    for (const name of userKeys()) {
      const stored = encodeValue(rootValue(name), 0, true);
      const text = stringify(stored);
      texts.set(name, text);
      parts.push(stringify(name) + ":" + text);
      size += measure(stored);
    }
    // Objects stored once, in the order they were first met (object i is {"$ref": i}),
    // written one at a time: no second copy of the whole datamodel is ever built.
    const heapTexts = [];
    for (let i = 0; i < pending.length; i++) {
      const stored = encodeObject(pending[i], 0);
      heapTexts.push(stringify(stored));
      size += measure(stored) + 1;
    }
    if (heapTexts.length > 0) {
      const text = "[" + heapTexts.join(",") + "]";
      texts.set(HEAP, text);
      parts.push(stringify(HEAP) + ":" + text);
      size += HEAP.length + 6;
    }
    size += eventHeld;
    const changed = [];
    for (const [name, text] of texts) {
      if (state.texts.get(name) !== text) changed.push(name);
    }
    for (const name of state.texts.keys()) {
      if (!texts.has(name)) changed.push(name);
    }
    state.size = size;
    state.bound = size;
    state.holdsEvent = holdsEvent;
    state.inert = inert;
    state.dirty = false;
    state.known = counts;
    state.texts = texts;
    return { text: flat("{" + parts.join(",") + "}"), size, changed };
  }

  function hasEnumerable(value) {
    for (const key of ownKeys(value)) {
      if (getOwnPropertyDescriptor(value, key).enumerable) return true;
    }
    return false;
  }

  // The size Python's statifier.values.measure gives a stored value: its JSON text length
  // (an integer by its bits, a float as 24), non-ASCII characters counted as the \uXXXX
  // escapes a position writes.
  function measure(stored) {
    let total = 0;
    const stack = [stored];
    while (stack.length > 0) {
      const item = stack.pop();
      switch (typeof item) {
        case "string": total += textSize(item); break;
        case "boolean": total += 5; break;
        case "number": total += numberSize(item); break;
        default:
          if (item === null) { total += 5; break; }
          if (isArray(item)) {
            total += 2 + item.length;
            for (let i = 0; i < item.length; i++) stack.push(item[i]);
          } else {
            const keys = ownKeys(item);
            total += 2 + 4 * keys.length;
            for (const key of keys) { total += textSize(key); stack.push(item[key]); }
          }
      }
    }
    return total;
  }
  function textSize(text) {
    if (!NON_ASCII.test(text)) return text.length + 2;
    // Python counts code points: a surrogate pair is one (and makes every one count 12).
    const pairs = (text.length - text.replace(SURROGATE_PAIR, "").length) / 2;
    return (pairs > 0 ? 12 : 6) * (text.length - pairs) + 2;
  }
  function numberSize(value) {
    if (isInteger(value) && value < 1e21 && value > -1e21) {
      const magnitude = value < 0 ? -value : value;
      const bits = magnitude === 0 ? 0 : floor(log2(magnitude)) + 2;
      return ((bits * 77) >> 8) + 2;
    }
    return 24;
  }

  // An upper bound of what storing ``value`` adds to the stored size: an object the last
  // encode() saw costs a reference (it is stored once); anything new is walked (with
  // ``whole``, everything is). Throws a RangeError past ``room``. Also says whether the
  // value is inert (see walk()).
  let addedInert = true;
  function measureNew(value, room, whole) {
    let total = 0;
    let inert = true;
    const seen = new SetClass();
    const stack = [value];
    while (stack.length > 0) {
      const item = stack.pop();
      switch (typeof item) {
        case "string": total += textSize(item); break;
        case "number": total += 24; break;
        case "boolean": total += 5; break;
        case "undefined": case "symbol": total += 24; break;
        case "bigint": total += 24 + StringObject(item).length; break;
        default:
          if (item === null) { total += 5; break; }
          if (seen.has(item) || builtins.has(item) || (!whole && state.known.has(item))) {
            total += REFERENCE_COST;
            break;
          }
          if (!whole && systemPathOf(item) !== undefined && systemPathOf(item)[0] !== "_event") {
            total += REFERENCE_COST;
            break;
          }
          seen.add(item);
          total += REFERENCE_COST;
          for (const key of ownKeys(item)) {
            const descriptor = getOwnPropertyDescriptor(item, key);
            if (!("value" in descriptor)) { inert = false; continue; }
            if (typeof key !== "string") {
              if (typeof descriptor.value === "function") inert = false;
              continue;
            }
            if (typeof descriptor.value === "function" && IMPLICIT_KEYS.has(key)) inert = false;
            total += 4 + textSize(key);
            stack.push(descriptor.value);
          }
          if (typeof item === "function") total += textSize(apply(functionSource, item, []));
          if (isGenerator(item)) inert = false;
          const proto = getPrototypeOf(item);
          if (proto !== null && !builtins.has(proto)) stack.push(proto);
          for (const entry of collectionItems(item)) { total += 4; stack.push(entry); }
      }
      if (total > room) {
        throw new RangeError("the value is larger than " + room + " bytes stored");
      }
    }
    addedInert = inert;
    return total;
  }

  // -- decoding --------------------------------------------------------------------------

  // A tag that does not read right gives undefined: stored data can come from anywhere, it
  // is never trusted to be well formed, and no text in it is ever compiled unless it is one
  // of the chart's own function literals.
  const TAGS = new SetClass(["$ref", "$undefined", "$null", "$number", "$bigint", "$builtin",
    "$system", "$function", "$prototype", "$map", "$set", "$regexp", "$proto"]);

  function decodeAll(text) {
    const stored = parseJSON(text);
    const heapIn = isArray(stored[HEAP]) ? stored[HEAP] : [];
    const heap = [];
    for (let i = 0; i < heapIn.length; i++) heap.push(shell(heapIn[i]));
    for (let i = 0; i < heapIn.length; i++) fill(heap[i], heapIn[i], heap);
    const values = [];
    for (const name of ownKeys(stored)) {
      if (name !== HEAP) values.push([name, decodeValue(stored[name], heap, true)]);
    }
    return values;
  }

  function tagOf(stored) {
    let found = null;
    for (const key of ownKeys(stored)) {
      if (key.charCodeAt(0) === 36 && key.charCodeAt(1) !== 36) {
        if (!TAGS.has(key)) return "invalid";
        if (found === null || key === "$function") found = key;
      }
    }
    return found;
  }

  function shell(stored) {
    if (isArray(stored)) return [];
    if (!isObject(stored)) return undefined;
    switch (tagOf(stored)) {
      case null: case "$proto": return {};
      case "$function": return revive(stored.$function);
      case "$map": return new MapClass();
      case "$set": return new SetClass();
      case "$regexp": return regexpOf(stored.$regexp);
      default: return undefined;
    }
  }

  function fill(target, stored, heap) {
    if (!isObject(target) || !isObject(stored)) return;
    if (isArray(stored)) {
      for (let i = 0; i < stored.length; i++) target.push(decodeValue(stored[i], heap, false));
      return;
    }
    const kind = tagOf(stored);
    if (kind === "$map") {
      if (!isArray(stored.$map)) return;
      for (const entry of stored.$map) {
        if (isArray(entry) && entry.length === 2) {
          apply(mapSet, target, [decodeValue(entry[0], heap, false), decodeValue(entry[1], heap, false)]);
        }
      }
      return;
    }
    if (kind === "$set") {
      if (isArray(stored.$set)) {
        for (const item of stored.$set) apply(setAdd, target, [decodeValue(item, heap, false)]);
      }
      return;
    }
    if (kind === "$regexp") return;
    for (const key of ownKeys(stored)) {
      if (key.charCodeAt(0) !== 36) {
        defineData(target, key, decodeValue(stored[key], heap, false));
      } else if (key.charCodeAt(1) === 36) {
        defineData(target, key.slice(1), decodeValue(stored[key], heap, false));
      }
    }
    if (kind === "$proto") {
      const proto = stored.$proto === null ? null : decodeValue(stored.$proto, heap, false);
      if (proto === null || isObject(proto)) {
        try { setPrototypeOf(target, proto); } catch (_error) { /* a cycle: left as it is */ }
      }
    }
    if (kind === "$function" && "$prototype" in stored) {
      const proto = decodeValue(stored.$prototype, heap, false);
      if (isObject(proto)) {
        try {
          defineProperty(target, "prototype", { value: proto });
          if (getOwnPropertyDescriptor(proto, "constructor") === undefined) {
            defineProperty(proto, "constructor", { value: target, writable: true, configurable: true });
          }
        } catch (_error) { /* not a constructor */ }
      }
    }
  }

  function defineData(target, key, value) {
    try {
      defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
    } catch (_error) { /* a key the target refuses (an array's length...) */ }
  }

  function decodeValue(stored, heap, top) {
    if (stored === null) return top ? undefined : null;
    if (!isObject(stored)) return stored;
    if (isArray(stored)) {
      const out = [];
      fill(out, stored, heap);
      return out;
    }
    switch (tagOf(stored)) {
      case null: case "$proto": case "$function": case "$map": case "$set": case "$regexp": {
        const out = shell(stored);
        fill(out, stored, heap);
        return out;
      }
      case "$ref": {
        const id = stored.$ref;
        return isInteger(id) && id >= 0 && id < heap.length ? heap[id] : undefined;
      }
      case "$null": return null;
      case "$number":
        switch (stored.$number) {
          case "NaN": return NaN;
          case "Infinity": return Infinity;
          case "-Infinity": return -Infinity;
          case "-0": return -0;
          default: return undefined;
        }
      case "$bigint":
        try { return BigIntFunction(stored.$bigint); } catch (_error) { return undefined; }
      case "$builtin":
        pathsOfBuiltins();
        return typeof stored.$builtin === "string" ? builtinByPath.get(stored.$builtin) : undefined;
      case "$system": {
        const path = stored.$system;
        if (!isArray(path) || path.length === 0) return undefined;
        let value = path[0] === "_event" || path[0] === "_ioprocessors" ? system[path[0]] : undefined;
        for (let i = 1; i < path.length && isObject(value); i++) {
          const key = path[i];
          value = typeof key === "string" && getOwnPropertyDescriptor(value, key) !== undefined
            ? value[key] : undefined;
        }
        return value;
      }
      default: return undefined;
    }
  }

  function regexpOf(parts) {
    if (!isArray(parts) || typeof parts[0] !== "string" || typeof parts[1] !== "string") return undefined;
    try { return new RegExpClass(parts[0], parts[1]); } catch (_error) { return undefined; }
  }

  // Only the chart's own function literals are ever compiled from a stored value, and only
  // in forms that run nothing: a function expression, or the one method of an object.
  function revive(text) {
    if (typeof text !== "string") return undefined;
    const how = state.revivable.get(text);
    try {
      if (how === "expression") return indirectEval("(" + text + "\n)");
      if (how === "method") {
        const holder = indirectEval("({" + text + "\n})");
        const keys = ownKeys(holder);
        return keys.length === 1 ? holder[keys[0]] : undefined;
      }
    } catch (_error) { /* a text this engine does not compile */ }
    return undefined;
  }

  // -- copy-out --------------------------------------------------------------------------

  // A value handed to Python (an event's data, a logged value): JSON.stringify's rules,
  // read through property descriptors (no getter, no toJSON runs), a shared object written
  // out each time it occurs, at most ``limit`` characters.
  function exportTree(value, limit) {
    let size = 0;
    const active = new SetClass();
    function check() {
      if (size > limit) {
        throw new RangeError("the value is larger than " + limit + " bytes written out");
      }
    }
    function out(item, depth) {
      switch (typeof item) {
        case "string": size += item.length + 2; check(); return item;
        case "number":
          size += 24;
          check();
          return item === item && item !== Infinity && item !== -Infinity ? item : null;
        case "boolean": size += 5; return item;
        case "bigint": throw new TypeError("a BigInt cannot be handed out (not JSON)");
        case "undefined": case "symbol": case "function": return undefined;
      }
      if (item === null) { size += 5; return null; }
      if (active.has(item)) throw new TypeError("circular structure: the value contains itself");
      if (depth >= 256) throw new RangeError("the value is nested more than 256 levels deep");
      active.add(item);
      let result;
      if (isArray(item)) {
        result = [];
        size += 2 + item.length;
        for (let i = 0; i < item.length; i++) {
          const descriptor = getOwnPropertyDescriptor(item, i);
          const element = descriptor !== undefined && "value" in descriptor
            ? out(descriptor.value, depth + 1) : undefined;
          result.push(element === undefined ? null : element);
        }
      } else {
        result = createObject(null);
        size += 2;
        for (const key of ownKeys(item)) {
          if (typeof key !== "string") continue;
          const descriptor = getOwnPropertyDescriptor(item, key);
          if (!descriptor.enumerable || !("value" in descriptor)) continue;
          const element = out(descriptor.value, depth + 1);
          if (element !== undefined) { size += key.length + 4; result[key] = element; }
        }
      }
      active.delete(item);
      check();
      return result;
    }
    return out(value, 0);
  }

  // What crosses back to Python: a scalar as itself, a string made flat (see flat), any
  // other value as its exported tree in a one-element array (Python reads its JSON).
  function result(value, limit) {
    switch (typeof value) {
      case "number": case "boolean": case "undefined": return value;
      case "string": return flat(value);
      case "bigint": throw new TypeError("a BigInt cannot be handed out (not JSON)");
      case "symbol": case "function": return undefined;
    }
    if (value === null) return null;
    return [exportTree(value, limit)];
  }

  // -- checkpoints: a failed or refused call changes nothing -----------------------------

  // Everything a call could change, object by object. restore() puts the properties back
  // on the very objects, so identity, closures and references all stay as they were.
  function checkpoint() {
    const objects = [];
    const seen = new SetClass();
    const roots = [];
    const stack = [];
    for (const key of userKeys()) {
      const descriptor = getOwnPropertyDescriptor(global, key);
      roots.push([key, descriptor]);
      if ("value" in descriptor) stack.push(descriptor.value);
      else stack.push(descriptor.get, descriptor.set);
    }
    while (stack.length > 0) {
      const value = stack.pop();
      if (!isObject(value) || builtins.has(value) || seen.has(value)) continue;
      seen.add(value);
      const keys = ownKeys(value);
      const descriptors = [];
      for (const key of keys) {
        const descriptor = getOwnPropertyDescriptor(value, key);
        descriptors.push(descriptor);
        if ("value" in descriptor) stack.push(descriptor.value);
        else stack.push(descriptor.get, descriptor.set);
      }
      const proto = getPrototypeOf(value);
      stack.push(proto);
      const items = collectionItems(value);
      for (const item of items) stack.push(item);
      if (!isFrozen(value)) objects.push([value, keys, descriptors, proto, items]);
    }
    return { roots, objects };
  }

  function restore(saved) {
    const keep = new SetClass();
    for (const [key] of saved.roots) keep.add(key);
    for (const key of userKeys()) {
      if (!keep.has(key)) { try { delete global[key]; } catch (_error) { /* not configurable */ } }
    }
    for (const [key, descriptor] of saved.roots) redefine(global, key, descriptor);
    for (const [value, keys, descriptors, proto, items] of saved.objects) {
      const wanted = new SetClass(keys);
      if (isArray(value)) {
        try { value.length = 0; } catch (_error) { /* sealed */ }
      }
      for (const key of ownKeys(value)) {
        if (!wanted.has(key)) { try { delete value[key]; } catch (_error) { /* kept */ } }
      }
      for (let i = 0; i < keys.length; i++) redefine(value, keys[i], descriptors[i]);
      try { setPrototypeOf(value, proto); } catch (_error) { /* not extensible any more */ }
      if (isMap(value)) {
        apply(mapClear, value, []);
        for (let i = 0; i < items.length; i += 2) apply(mapSet, value, [items[i], items[i + 1]]);
      } else if (isSet(value)) {
        apply(setClear, value, []);
        for (const item of items) apply(setAdd, value, [item]);
      }
    }
    state.dirty = true;
  }
  function redefine(target, key, descriptor) {
    try { defineProperty(target, key, descriptor); } catch (_error) { /* not configurable */ }
  }

  // -- host functions --------------------------------------------------------------------

  // A chart's call of a host function takes its answer from those Python handed over;
  // without one it records the request and fails, and Python reruns the whole call with
  // the answer (a host function is pure: the answer for the same arguments is the same).
  const hostAnswers = new MapClass();
  let hostRequest = null;
  function hostFunction(name) {
    return function (...args) {
      const key = stringify([name, exportTree(args, 1 << 24)]);
      const answer = hostAnswers.get(key);
      if (answer !== undefined) {
        if (answer[1] !== null) throw new Error(answer[1]);
        return answer[0] === null ? undefined : parseJSON(answer[0]);
      }
      if (hostRequest === null) hostRequest = key;
      throw new Error("the host function " + name + " has not answered");
    };
  }

  // -- calls -----------------------------------------------------------------------------

  // A call that may write runs between begin() (a checkpoint) and settle() (every variable
  // written out, then checked) or abort(); Python drains the promise jobs in between. A
  // failure, a datamodel past its cap, a variable the call may not create, or a host
  // function's question put everything back.
  let open = null;
  let pendingCopy = null;
  const foreachStack = [];
  let version = 0;  // counts encode()s, so Python knows whether its stored form is current
  let lastText = "{}";

  function begin() {
    open = checkpoint();
    hostRequest = null;
  }

  // Runs ``run`` in a guarded call: a failure after a host function asked for its answer
  // is that question (settle() returns it), not the call's error.
  function attempt(run) {
    try {
      return run();
    } catch (error) {
      if (hostRequest === null) throw error;
      return undefined;
    }
  }

  function abort() {
    if (open !== null) restore(open);
    open = null;
    pendingCopy = null;
  }

  function written() {
    const out = encode();
    version += 1;
    lastText = out.text;
    return out;
  }

  function settle(writable) {
    const saved = open;
    const copy = pendingCopy;
    open = null;
    pendingCopy = null;
    if (hostRequest !== null) {
      restore(saved);
      return ["ask", hostRequest];
    }
    let out;
    try {
      out = written();
    } catch (error) {
      restore(saved);
      throw error;
    }
    const present = [];
    for (const name of out.changed) {
      if (name === HEAP) continue;
      if (!writable(name)) {
        restore(saved);
        written();
        throw new TypeError("cannot create or assign the variable " + stringify(name));
      }
      if (getOwnPropertyDescriptor(global, name) !== undefined) present.push(name);
    }
    if (out.size > state.cap) {
      restore(saved);
      written();
      const names = out.changed.filter((name) => name !== HEAP).slice(0, 5);
      throw new RangeError("the datamodel would be larger than its cap of " + state.cap +
        " bytes stored" + (names.length > 0 ? " (writing " + names.join(", ") + ")" : ""));
    }
    if (copy !== null) foreachStack.push(copy);
    return ["done", out.changed, present];
  }

  function guardedResult(value, limit) {
    const tree = typeof value === "string" || !isObject(value) ? scalarOut(value) : exportTree(value, limit);
    return { guarded: tree === undefined ? null : tree };
  }
  function scalarOut(value) {
    switch (typeof value) {
      case "number": return value === value && value !== Infinity && value !== -Infinity ? value : null;
      case "bigint": throw new TypeError("a BigInt cannot be handed out (not JSON)");
      case "symbol": case "function": case "undefined": return undefined;
      default: return value;
    }
  }

  // Admits ``value`` for a write that needs no checkpoint (``key``: the variable or
  // property it goes under, null when unknown), then runs ``write``; when the bound cannot
  // vouch for the cap, the exact size decides (with a checkpoint).
  function admitted(value, key, write) {
    let added;
    try {
      added = measureNew(value, state.cap - state.bound, false);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      begin();
      try { write(); } catch (failure) { abort(); throw failure; }
      settle(variableName);
      return;
    }
    write();
    state.bound += added + (key === null ? REFERENCE_COST : textSize(key) + 4);
    if (!addedInert || (typeof value === "function" && (key === null || IMPLICIT_KEYS.has(key)))) {
      state.inert = false;
    }
    state.dirty = true;
  }

  function produce(expr, text) {
    return expr === null ? (text === null ? undefined : parseJSON(text)) : expr();
  }

  const api = freezeObject({
    setup(revivable, cap) {
      state.revivable = new MapClass(parseJSON(revivable));
      state.cap = cap;
    },
    setCap(cap) { state.cap = cap; },
    setSystem(name, text) {
      const value = parseJSON(text);
      system[name] = value === null ? undefined : deepFreezeData(value);
      systemPaths = null;
    },
    setEvent(text) {
      const event = text === null ? null : parseJSON(text);
      if (event !== null) {
        for (const key of ownKeys(event)) if (event[key] === null) event[key] = undefined;
      }
      system._event = event === null ? undefined : deepFreezeData(event);
      systemPaths = null;
      // What a variable held of the old event is data of its own now.
      if (state.holdsEvent) state.dirty = true;
    },
    declare(name) {
      if (getOwnPropertyDescriptor(global, name) === undefined) {
        global[name] = undefined;
        state.dirty = true;
      }
    },
    // Binds a variable to data (JSON text; null at the top is undefined): never decoded.
    bind(name, text) {
      const value = text === null ? undefined : parseJSON(text);
      admitted(value, name, () => { global[name] = value; });
    },
    // Installs a position's stored variables (the chart's own functions come back).
    decode(text) {
      for (const [name, value] of decodeAll(text)) {
        if (variableName(name) && !baseline.has(name)) {
          try { global[name] = value; } catch (_error) { /* refused by the engine */ }
        }
      }
      written();
    },
    compileExpression(source) {
      // A trailing semicolon is tolerated: charts write expr="new Foo();".
      const body = source.replace(TRAILING, "");
      // The parenthesised form first: its syntax errors name the chart's own tokens. The
      // bracketed one then refuses what only parses by closing the parenthesis, "a), (b".
      const evaluate = makeFunction("return (" + body + "\n);");
      makeFunction("return [" + body + "\n];");
      return evaluate;
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
    // The names of the built-in globals, as JSON (a chart reads them without defining them).
    globals() {
      return stringify([...baseline].filter((key) => typeof key === "string"));
    },
    // An expression that cannot write by its syntax: evaluated as it is, unless the
    // datamodel holds a function the engine may call implicitly; then the call is guarded
    // and the result comes as {guarded: value} (settle() must follow).
    read(fn, answers, limit) {
      setIn(answers);
      if (state.inert) return result(fn(), limit);
      begin();
      return attempt(() => guardedResult(fn(), limit));
    },
    // An expression that may write (settle() must follow).
    evaluate(fn, answers, limit) {
      setIn(answers);
      begin();
      return attempt(() => guardedResult(fn(), limit));
    },
    // <assign>, <data expr>: evaluate ``expr`` (or parse JSON ``text`` when ``expr`` is
    // null) and store the value at ``location`` (or in the variable ``name``). Returns
    // true when the call is guarded (settle() must follow).
    assign(location, expr, text, name, answers, guard) {
      setIn(answers);
      if (guard || !state.inert) {
        begin();
        attempt(() => {
          const value = produce(expr, text);
          if (location === null) global[name] = value;
          else location(value);
        });
        return true;
      }
      const value = produce(expr, text);
      admitted(value, location === null ? name : null, () => {
        if (location === null) global[name] = value;
        else location(value);
      });
      return false;
    },
    // A <script> (settle() must follow).
    runScript(source, answers) {
      setIn(answers);
      begin();
      attempt(() => indirectEval(source));
    },
    // Ends a guarded call: JSON of ["done", changed, still present] or ["ask", request].
    settle() {
      return flat(stringify(settle(variableName)));
    },
    abort,
    // <foreach>: a shallow copy of the array, whose items foreachItem binds one at a
    // time until foreachEnd. Returns the length (null: not an array), or {guarded: length}
    // when the call is guarded (settle() must follow; the copy is kept once it settles).
    foreachArray(fn, answers, guard) {
      setIn(answers);
      const guarded = guard || !state.inert;
      if (guarded) begin();
      const array = guarded ? attempt(fn) : fn();
      let length = null;
      if (isArray(array)) {
        const copy = [];
        for (let i = 0; i < array.length; i++) {
          const descriptor = getOwnPropertyDescriptor(array, i);
          copy.push(descriptor !== undefined && "value" in descriptor ? descriptor.value : undefined);
        }
        length = copy.length;
        if (guarded) pendingCopy = copy;
        else foreachStack.push(copy);
      }
      return guarded ? { guarded: length } : length;
    },
    foreachItem(item, index, position) {
      const copy = foreachStack[foreachStack.length - 1];
      const value = copy[position];
      admitted(value, item, () => { global[item] = value; });
      if (index !== null) admitted(position, index, () => { global[index] = position; });
    },
    foreachEnd() { foreachStack.pop(); },
    // The stored form of the variables as "version\ntext"; null when Python has
    // ``known`` (the version it holds) and nothing changed since.
    encode(known) {
      if (state.dirty) written();
      return version === known ? null : flat(version + "\n" + lastText);
    },
    exportVariable(name, limit) {
      const tree = exportTree(rootValue(name), limit);
      return tree === undefined ? "null" : flat(stringify(tree));
    },
    defineHost(names) {
      for (const name of parseJSON(names)) {
        const fn = hostFunction(name);
        defineProperty(global, name, { value: fn, writable: false, enumerable: false, configurable: false });
        baseline.add(name);
        builtins.add(fn);
      }
      builtinPaths = null;
    },
    answerHost(key, value, error) { hostAnswers.set(key, [value, error]); },
    forgetHostAnswers() { hostAnswers.clear(); },
  });

  function deepFreezeData(value) {
    if (value !== null && typeof value === "object") {
      for (const key of ownKeys(value)) deepFreezeData(value[key]);
      freezeObject(value);
    }
    return value;
  }

  return function pick(name) { return api[name]; };
})

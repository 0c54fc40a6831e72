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
  const hasOwn = Object.hasOwn;
  const TypeErrorClass = TypeError;
  const isArray = Array.isArray;
  const objectKeys = Object.keys;
  const isInteger = Number.isInteger;
  const isFiniteNumber = Number.isFinite;
  const log2 = Math.log2;
  const floor = Math.floor;
  const clz32 = Math.clz32;
  const StringObject = String;
  const MapClass = Map;
  const SetClass = Set;
  const WeakSetClass = WeakSet;
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
  const ArrayPrototype = Array.prototype;
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

  // The same string as the engine keeps it for a property key: a key handed over from
  // Python is a string of its own, which every property access with it (hasOwn, a read, a
  // write) looks up again among the engine's keys; one made once here is the key itself.
  // For names a block or a location keeps and uses at every write.
  function keyString(value) {
    return typeof value === "string" ? objectKeys({ [value]: 0 })[0] : value;
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
  // Each getter reads its own variable by a key spelled out (a key held in a variable is
  // looked up among the engine's keys at every read, and charts read _event often). Each
  // is a method, as one written inline: no prototype object, not a constructor.
  for (const [name, get] of [
    ["_sessionid", { get() { return system._sessionid; } }.get],
    ["_name", { get() { return system._name; } }.get],
    ["_ioprocessors", { get() { return system._ioprocessors; } }.get],
    ["_event", { get() { return system._event; } }.get],
  ]) {
    defineProperty(global, name, {
      get,
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
    if (!("value" in descriptor)) {
      // The system variables' accessors: a chart reaches them through
      // Object.getOwnPropertyDescriptor, and what it put on them would not survive its
      // position.
      deepFreeze(descriptor.get);
      deepFreeze(descriptor.set);
    } else if (descriptor.value !== global) {
      deepFreeze(descriptor.value);
    }
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
    ...iteratorHelperIntrinsics(),
  ]) {
    deepFreeze(intrinsic);
  }
  // %IteratorHelperPrototype% ([].values().map(f)) and %WrapForValidIteratorPrototype%
  // (Iterator.from(o)), where the engine has Iterator helpers: none when it has not.
  function iteratorHelperIntrinsics() {
    const found = [];
    const iteratorPrototype = getPrototypeOf(getPrototypeOf([][Symbol.iterator]()));
    if (typeof iteratorPrototype.map === "function") {
      found.push(getPrototypeOf(apply(iteratorPrototype.map, [][Symbol.iterator](), [(x) => x])));
    }
    const IteratorClass = global.Iterator;
    if (typeof IteratorClass === "function" && typeof IteratorClass.from === "function") {
      found.push(getPrototypeOf(IteratorClass.from({ next() { return { done: true }; } })));
    }
    return found;
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
  // Brand checks throw for other objects, and a thrown error is costly here: they run only
  // for an object whose prototype chain holds the class's prototype.
  function inherits(value, proto) {
    for (let link = getPrototypeOf(value); link !== null; link = getPrototypeOf(link)) {
      if (link === proto) return true;
      if (link === ObjectPrototype) return false;
    }
    return false;
  }
  function isMap(value) {
    if (!inherits(value, MapClass.prototype)) return false;
    try { apply(mapSize, value, []); return true; } catch (_error) { return false; }
  }
  function isSet(value) {
    if (!inherits(value, SetClass.prototype)) return false;
    try { apply(setSize, value, []); return true; } catch (_error) { return false; }
  }
  function isRegExp(value) {
    if (!inherits(value, RegExpClass.prototype)) return false;
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

  // The global object's own keys beyond the built-in ones. The built-in string keys come
  // first, in the order they were made (none can be deleted), so the chart's are the rest
  // (unless a chart made an integer-like one, which would come first: then a filter).
  const baselineStrings = ownKeys(global).filter((key) => typeof key === "string");
  function userKeys() {
    const keys = ownKeys(global);
    const count = baselineStrings.length;
    const out = [];
    if (keys.length >= count && keys[0] === baselineStrings[0] &&
        keys[count - 1] === baselineStrings[count - 1]) {
      for (let i = count; i < keys.length; i++) {
        const key = keys[i];
        if (typeof key !== "string") break;
        out.push(key);
      }
      return out;
    }
    for (const key of keys) {
      if (typeof key === "string" && !baseline.has(key)) out.push(key);
    }
    return out;
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
    // The system variables are frozen through and through: any other object is not theirs
    // (the test is cheap; the paths are made once per event, on first need).
    if (!isFrozen(value)) return undefined;
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
    callableFree: true,  // no function at all is reachable: a call reaches only built-ins
    full: true,       // the next encode() must walk every variable
    // else: the records (recordOf) of the variables written since (nothing else changed)
    dirtyList: [],
    shared: false,    // the last encode() stored an object once for several places, or deep
    holdsEvent: false,  // a variable holds part of _event (stored as {"$system": path})
    // The objects the last encode() saw, and those written since: weakly held, so that an
    // object the variables dropped is not kept alive (a variable replaced on every event
    // would otherwise fill the heap).
    known: new WeakSetClass(),
    texts: new MapClass(),  // each variable's stored text at the last encode()
    sizes: new MapClass(),  // and its size
    inertRoots: new MapClass(),  // and whether it is inert
    callableRoots: new MapClass(),  // and whether it holds a function
    roots: new MapClass(),  // each variable's record (recordOf): never replaced
    heapSize: 0,
    unfetched: new SetClass(),  // the entries changed since Python last read them
    fetched: -1,      // the version Python read last
    version: 0,       // counts the encode()s that changed something
    revivable: new MapClass(),  // the chart's function literals: text -> how to rebuild
  };

  function dirty() { return state.full || state.dirtyList.length > 0; }

  // A variable's record, made on first need and kept: whether it was written since the
  // last encode() (``dirty``; the dirty ones are listed in ``state.dirtyList``), and
  // whether JSON.stringify writes it as the stored form (``plain``: true, false, or
  // undefined when not known since that encode()). A block keeps the records of the
  // variables it writes: a write marks its own with no lookup by name (a Map's is about a
  // thousand instructions here). The names are the chart's (its locations, its data, the
  // variables the core declares), so the records stay as few as its variables.
  function recordOf(name) {
    let record = state.roots.get(name);
    if (record === undefined) {
      record = { name, dirty: false, plain: undefined };
      state.roots.set(name, record);
    }
    return record;
  }

  function markDirty(record) {
    if (!record.dirty) {
      record.dirty = true;
      state.dirtyList.push(record);
    }
  }

  // Walks ``values``: counts references to each object (one referred to twice is stored
  // once) and finds whether chart code can run without a call in the source: an accessor,
  // a function under a key the engine calls implicitly or under a symbol, a generator.
  // Until such a thing is gone again, every call is treated as writing.
  function walk(values, counts) {
    let inert = true;
    let callableFree = true;
    const stack = values;
    while (stack.length > 0) {
      const value = stack.pop();
      if (typeof value === "function") callableFree = false;
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
      if (proto !== null && proto !== ObjectPrototype && !builtins.has(proto)) stack.push(proto);
      if (proto !== ObjectPrototype && proto !== ArrayPrototype) {
        if (isGenerator(value)) inert = false;
        for (const item of collectionItems(value)) stack.push(item);
      }
    }
    walked.callableFree = callableFree;
    return inert;
  }
  const walked = { callableFree: true };

  // Whether a variable (a global of the chart) itself lets chart code run implicitly.
  function rootInert(key) {
    const descriptor = getOwnPropertyDescriptor(global, key);
    if (!("value" in descriptor)) return false;
    return !(typeof descriptor.value === "function" && IMPLICIT_KEYS.has(key));
  }

  function tag(name, value) {
    const result = createObject(null);
    result[name] = value;
    return result;
  }
  function numberTag(value) {
    return tag("$number", value !== value ? "NaN" : value === Infinity ? "Infinity"
      : value === -Infinity ? "-Infinity" : "-0");
  }
  function escapeKey(key) {
    return key.charCodeAt(0) === 36 ? "$" + key : key;
  }

  // Writes values in the stored form (see the top of this file). ``counts`` says which
  // objects are referred to from several places: those go to the heap (stored once, in
  // the order first met: object i is {"$ref": i}), and so do objects nested too deep.
  class Encoder {
    constructor(counts) {
      this.counts = counts;
      this.ids = new MapClass();
      this.pending = [];
      this.eventHeld = 0;
      this.holdsEvent = false;
    }

    value(value, depth, top) {
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
          this.eventHeld += measureNew(value, Infinity, true, false);
          this.holdsEvent = true;
        }
        return tag("$system", path);
      }
      if (this.counts.get(value) > 1 || depth >= INLINE_DEPTH) {
        let id = this.ids.get(value);
        if (id === undefined) {
          id = this.pending.length;
          this.ids.set(value, id);
          this.pending.push(value);
        }
        return tag("$ref", id);
      }
      return this.object(value, depth);
    }

    object(value, depth) {
      if (isArray(value)) {
        const length = value.length;
        const out = [];
        for (let i = 0; i < length; i++) {
          const descriptor = getOwnPropertyDescriptor(value, i);
          out.push(descriptor !== undefined && "value" in descriptor
            ? this.value(descriptor.value, depth + 1, false) : tag("$undefined", true));
        }
        return out;
      }
      const out = createObject(null);
      const proto = getPrototypeOf(value);
      if (typeof value === "function") {
        const text = apply(functionSource, value, []);
        const how = state.revivable.get(text);
        out.$function = how === "expression" || how === "method" ? text : null;
        const descriptor = getOwnPropertyDescriptor(value, "prototype");
        if (descriptor !== undefined && "value" in descriptor && isObject(descriptor.value) &&
            (this.counts.get(descriptor.value) > 1 || hasEnumerable(descriptor.value))) {
          out.$prototype = this.value(descriptor.value, depth + 1, false);
        }
      } else if (proto !== ObjectPrototype) {
        if (isMap(value)) {
          const entries = [];
          for (const [key, item] of apply(mapEntries, value, [])) {
            entries.push([this.value(key, depth + 2, false), this.value(item, depth + 2, false)]);
          }
          out.$map = entries;
          return out;
        }
        if (isSet(value)) {
          const items = [];
          for (const item of apply(setValues, value, [])) {
            items.push(this.value(item, depth + 2, false));
          }
          out.$set = items;
          return out;
        }
        if (isRegExp(value)) {
          out.$regexp = [apply(regexpSource, value, []), apply(regexpFlags, value, [])];
          return out;
        }
        out.$proto = proto === null ? null : this.value(proto, depth + 1, false);
      }
      for (const key of ownKeys(value)) {
        if (typeof key !== "string") continue;
        const descriptor = getOwnPropertyDescriptor(value, key);
        if (!descriptor.enumerable || !("value" in descriptor)) continue;
        out[escapeKey(key)] = this.value(descriptor.value, depth + 1, false);
      }
      return out;
    }

    // One variable: [text, size].
    root(name) {
      const stored = this.value(rootValue(name), 0, true);
      return [stringify(stored), measure(stored)];
    }

    // The heap, one object at a time (no second copy of the whole datamodel is ever
    // built): [text, size], or null when nothing is stored once.
    heap() {
      if (this.pending.length === 0) return null;
      const texts = [];
      let size = HEAP.length + 6;
      for (let i = 0; i < this.pending.length; i++) {
        const stored = this.object(this.pending[i], 0);
        texts.push(stringify(stored));
        size += measure(stored) + 1;
      }
      return ["[" + texts.join(",") + "]", size];
    }
  }

  // Brings the stored form up to date: every variable (after a call that may have written
  // anything), or only those written since when nothing is shared. Returns the variables
  // whose stored text changed.
  function encode() {
    if (!state.full && !state.shared) return encodeRoots();
    const names = userKeys();
    const counts = new MapClass();
    let inert = true;
    for (const name of names) {
      if (!rootInert(name)) inert = false;
      state.inertRoots.set(name, true);
    }
    inert = walk(names.map(rootValue), counts) && inert;
    const callableFree = walked.callableFree;
    const encoder = new Encoder(counts);
    const texts = new MapClass();
    const sizes = new MapClass();
    let size = 0;
    for (const name of names) {
      const [text, rootSize] = encoder.root(name);
      texts.set(name, text);
      sizes.set(name, rootSize);
      size += rootSize;
    }
    const heap = encoder.heap();
    if (heap !== null) {
      texts.set(HEAP, heap[0]);
      size += heap[1];
    }
    state.heapSize = heap === null ? 0 : heap[1];
    size += encoder.eventHeld;
    const changed = [];
    for (const [name, text] of texts) {
      if (state.texts.get(name) !== text) changed.push(name);
    }
    for (const name of state.texts.keys()) {
      if (!texts.has(name)) changed.push(name);
    }
    state.texts = texts;
    state.sizes = sizes;
    state.inertRoots = new MapClass();
    state.callableRoots = new MapClass();
    for (const record of state.roots.values()) record.plain = undefined;
    for (const name of names) {
      state.inertRoots.set(name, inert);
      state.callableRoots.set(name, callableFree);
    }
    state.callableFree = callableFree;
    state.shared = heap !== null || encoder.holdsEvent;
    state.holdsEvent = encoder.holdsEvent;
    state.inert = inert;
    state.known = new WeakSetClass();
    for (const object of counts.keys()) state.known.add(object);
    return finish(changed, size);
  }

  // Only the variables written since the last encode(), each walked on its own: nothing is
  // shared (no object of one variable is reachable from another), so no other changed.
  function encodeRoots() {
    const changed = [];
    let size = state.size;
    for (const record of state.dirtyList) {
      const name = record.name;
      const descriptor = getOwnPropertyDescriptor(global, name);
      const oldSize = state.sizes.get(name) || 0;
      if (descriptor === undefined) {
        state.texts.delete(name);
        state.sizes.delete(name);
        state.inertRoots.delete(name);
        state.callableRoots.delete(name);
        size -= oldSize;
        changed.push(name);
        continue;
      }
      const value = "value" in descriptor ? descriptor.value : undefined;
      // A plain variable (see admitted) while nothing can run implicitly: JSON.stringify
      // writes it, and its size is bounded by 12 bytes per character of that text (exact
      // sizes are worked out again as the bound nears the cap).
      if (record.plain === true && state.inert && state.callableFree &&
          state.bound < state.cap / 2) {
        const text = value === undefined ? "null" : stringify(value);
        const bound = 12 * text.length;
        state.sizes.set(name, bound);
        size += bound - oldSize;
        if (state.texts.get(name) !== text) {
          state.texts.set(name, text);
          changed.push(name);
        }
        continue;
      }
      const plain = state.inert ? plainText(value) : null;
      if (plain !== null) {
        record.plain = value !== null;
        state.sizes.set(name, plain[1]);
        size += plain[1] - oldSize;
        if (state.texts.get(name) !== plain[0]) {
          state.texts.set(name, plain[0]);
          changed.push(name);
        }
        continue;
      }
      const counts = new MapClass();
      const inert = walk([value], counts) && rootInert(name);
      for (const count of counts.values()) {
        if (count > 1) {  // shared after all: every variable must be walked
          state.full = true;
          return encode();
        }
      }
      const encoder = new Encoder(counts);
      const [text, rootSize] = encoder.root(name);
      if (encoder.pending.length > 0 || encoder.holdsEvent) {
        state.full = true;
        return encode();
      }
      for (const object of counts.keys()) state.known.add(object);
      state.inertRoots.set(name, inert);
      state.callableRoots.set(name, walked.callableFree);
      state.sizes.set(name, rootSize);
      size += rootSize - oldSize;
      if (state.texts.get(name) !== text) {
        state.texts.set(name, text);
        changed.push(name);
      }
    }
    let inert = true;
    for (const value of state.inertRoots.values()) inert = inert && value;
    let callableFree = true;
    for (const value of state.callableRoots.values()) callableFree = callableFree && value;
    state.inert = inert;
    state.callableFree = callableFree;
    return finish(changed, size);
  }

  // [text, size] of a variable holding plain data (JSON writes it exactly as the stored
  // form does: no undefined, NaN or -0, no "$" key, nothing shared or too deep, only plain
  // objects and arrays), read without descriptors: the caller knows no accessor is
  // reachable. Null for any other value.
  function plainText(value) {
    switch (typeof value) {
      case "undefined": return ["null", 5];
      case "string": return [stringify(value), textSize(value)];
      case "boolean": return [value ? "true" : "false", 5];
      case "number":
        if (value !== value || value === Infinity || value === -Infinity ||
            (value === 0 && 1 / value < 0)) return null;
        return [stringify(value), numberSize(value)];
      case "object": break;
      default: return null;
    }
    if (value === null) return null;
    let size = 0;
    const seen = new SetClass();
    const stack = [value, 0];
    while (stack.length > 0) {
      const depth = stack.pop();
      const item = stack.pop();
      switch (typeof item) {
        case "string": size += textSize(item); continue;
        case "boolean": size += 5; continue;
        case "number":
          if (item !== item || item === Infinity || item === -Infinity ||
              (item === 0 && 1 / item < 0)) return null;
          size += numberSize(item);
          continue;
        case "object": break;
        default: return null;
      }
      if (item === null) { size += 5; continue; }
      if (seen.has(item) || depth >= INLINE_DEPTH || systemPathOf(item) !== undefined ||
          builtins.has(item)) return null;
      seen.add(item);
      const proto = getPrototypeOf(item);
      if (proto === ArrayPrototype && isArray(item)) {
        const length = item.length;
        size += 2 + length;
        for (let i = 0; i < length; i++) {
          const element = item[i];
          // Numbers and strings inline: most arrays hold nothing else.
          if (typeof element === "number" && (element | 0) === element) {
            size += (((32 - clz32(element < 0 ? -element : element)) * 77) >> 8) + 2;
          } else if (typeof element === "string") {
            size += textSize(element);
          } else {
            if (element === undefined && !(i in item)) return null;
            stack.push(element, depth + 1);
          }
        }
      } else if (proto === ObjectPrototype) {
        const keys = objectKeys(item);
        size += 2 + 4 * keys.length;
        for (const key of keys) {
          if (key.charCodeAt(0) === 36) return null;
          size += textSize(key);
          stack.push(item[key], depth + 1);
        }
      } else {
        return null;
      }
    }
    for (const object of seen) state.known.add(object);
    return [stringify(value), size];
  }

  function finish(changed, size) {
    state.size = size;
    state.bound = size;
    state.full = false;
    for (const record of state.dirtyList) record.dirty = false;
    state.dirtyList = [];
    if (changed.length > 0) {
      state.version += 1;
      for (const name of changed) state.unfetched.add(name);
    }
    return { size, changed };
  }

  // What Python has not read yet, as JSON: {"version": v, "set": {name: stored text...},
  // "gone": [names]}; null when Python (which holds ``known``) is current.
  function fetch(known) {
    if (dirty()) encode();
    let names;
    if (known !== state.fetched) {
      names = state.texts.keys();
    } else {
      if (state.unfetched.size === 0) return null;
      names = state.unfetched;
    }
    let set = "";
    let gone = "";
    for (const name of names) {
      const text = state.texts.get(name);
      if (text === undefined) gone += (gone === "" ? "" : ",") + stringify(name);
      else set += (set === "" ? "" : ",") + stringify(name) + ":" + text;
    }
    state.unfetched.clear();
    state.fetched = state.version;
    // JSON text: no NUL, no lone surrogate; only made flat (not a rope) for the binding.
    return ("{\"version\":" + state.version + ",\"set\":{" + set + "},\"gone\":[" + gone +
      "]}").slice(0);
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
    if ((value | 0) === value) {  // a 32-bit integer: its bits counted exactly
      const magnitude = value < 0 ? -value : value;
      return (((32 - clz32(magnitude)) * 77) >> 8) + 2;
    }
    if (isInteger(value) && value < 1e21 && value > -1e21) {
      const magnitude = value < 0 ? -value : value;
      const bits = floor(log2(magnitude)) + 2;
      return ((bits * 77) >> 8) + 2;
    }
    return 24;
  }

  // An upper bound of what storing ``value`` adds to the stored size: an object the last
  // encode() saw costs a reference (it is stored once); anything new is walked (with
  // ``whole``, everything is). Throws a RangeError past ``room``. Also says whether the
  // value is inert (see walk()).
  let addedInert = true;
  let addedKnown = false;
  let addedCallable = false;
  let addedPlain = false;
  let addedObjects = null;
  function measureNew(value, room, whole, plain) {
    if (plain && isArray(value) && !state.known.has(value) && !isFrozen(value) &&
        getPrototypeOf(value) === ArrayPrototype) {
      // A new array of numbers and strings (a list kept in a variable): one loop.
      const size = flatArraySize(value);
      if (size >= 0) {
        if (size > room) throw new RangeError("the value is larger than " + room + " bytes stored");
        addedInert = true;
        addedKnown = false;
        addedCallable = false;
        addedPlain = true;
        addedObjects = [value];
        return size;
      }
    }
    let total = 0;
    let inert = true;
    let known = false;
    let callable = false;
    // Whether JSON.stringify writes the value as the stored form does (plain data only,
    // read without descriptors, nested less than INLINE_DEPTH deep).
    let flat = plain;
    const seen = new SetClass();
    const stack = [value];
    const depths = [0];
    while (stack.length > 0) {
      const item = stack.pop();
      const depth = depths.pop();
      if (typeof item === "function") callable = true;
      if (plain && typeof item === "object" && item !== null && !seen.has(item) &&
          !state.known.has(item) && !builtins.has(item) && systemPathOf(item) === undefined) {
        // A new object built by a source that makes no accessor: read directly.
        const proto = getPrototypeOf(item);
        if (depth >= INLINE_DEPTH) flat = false;
        if (proto === ArrayPrototype && isArray(item)) {
          seen.add(item);
          const length = item.length;
          total += REFERENCE_COST + length;
          for (let i = 0; i < length; i++) {
            const element = item[i];
            if (typeof element === "number") {
              total += 24;
              if (element !== element || element === Infinity || element === -Infinity ||
                  (element === 0 && 1 / element < 0)) flat = false;
            } else if (typeof element === "string") {
              total += textSize(element);
            } else {
              if (element === undefined) flat = false;
              stack.push(element);
              depths.push(depth + 1);
            }
          }
          if (total > room) throw new RangeError("the value is larger than " + room + " bytes stored");
          continue;
        }
        if (proto === ObjectPrototype) {
          seen.add(item);
          total += REFERENCE_COST;
          for (const key of objectKeys(item)) {
            total += 4 + textSize(key);
            if (key.charCodeAt(0) === 36) flat = false;
            const element = item[key];
            if (element === undefined) flat = false;
            stack.push(element);
            depths.push(depth + 1);
          }
          if (total > room) throw new RangeError("the value is larger than " + room + " bytes stored");
          continue;
        }
      }
      switch (typeof item) {
        case "number":
          if (item !== item || item === Infinity || item === -Infinity ||
              (item === 0 && 1 / item < 0)) flat = false;
          break;
        case "string": case "boolean": break;
        case "undefined": if (depth > 0) flat = false; break;
        default: if (item !== null || depth === 0) flat = false;
      }
      switch (typeof item) {
        case "string": total += textSize(item); break;
        case "number": total += 24; break;
        case "boolean": total += 5; break;
        case "undefined": case "symbol": total += 24; break;
        case "bigint": total += 24 + StringObject(item).length; break;
        default:
          if (item === null) { total += 5; break; }
          if (seen.has(item) || (!whole && state.known.has(item))) {
            total += REFERENCE_COST;
            known = true;
            break;
          }
          if (builtins.has(item) || (!whole && systemPathOf(item) !== undefined)) {
            total += REFERENCE_COST;
            if (systemPathOf(item) !== undefined) known = true;
            if (whole || systemPathOf(item) === undefined || systemPathOf(item)[0] !== "_event") break;
          }
          seen.add(item);
          flat = false;
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
            depths.push(depth + 1);
          }
          if (typeof item === "function") total += textSize(apply(functionSource, item, []));
          if (isGenerator(item)) inert = false;
          const proto = getPrototypeOf(item);
          if (proto !== null && !builtins.has(proto)) { stack.push(proto); depths.push(depth + 1); }
          for (const entry of collectionItems(item)) {
            total += 4;
            stack.push(entry);
            depths.push(depth + 1);
          }
      }
      if (total > room) {
        throw new RangeError("the value is larger than " + room + " bytes stored");
      }
    }
    addedInert = inert;
    addedKnown = known;
    addedCallable = callable;
    addedPlain = flat;
    addedObjects = seen;
    return total;
  }

  // What measureNew() counts for an array of finite numbers (not -0) and strings, read
  // without descriptors; -1 for any other array.
  function flatArraySize(array) {
    // ``var``: see store().
    var length = array.length;
    // Every item a number until found otherwise: Number.isFinite is cheaper here than a
    // typeof compared with "number" (no coercion: true only for a finite number).
    var total = REFERENCE_COST + 25 * length;
    var i, item;
    for (i = 0; i < length; i++) {
      item = array[i];
      if (isFiniteNumber(item)) {
        if (item === 0 && 1 / item < 0) return -1;  // -0: the one zero whose inverse is negative
      } else if (typeof item === "string") {
        total += textSize(item) - 24;
      } else {
        return -1;  // NaN, the infinities, anything not a number or a string
      }
    }
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
  // on the very objects, so identity, closures and references all stay as they were. It
  // may be run again after it failed half-way (out of memory, out of time): only what
  // the engine refuses for good (a TypeError: not configurable, not extensible) is
  // skipped, and the checkpoint is kept until a restore() completes (see abort()).
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
      if (!keep.has(key)) { try { delete global[key]; } catch (error) { refused(error); } }
    }
    for (const [key, descriptor] of saved.roots) redefine(global, key, descriptor);
    for (const [value, keys, descriptors, proto, items] of saved.objects) {
      const wanted = new SetClass(keys);
      if (isArray(value)) {
        try { value.length = 0; } catch (error) { refused(error); }
      }
      for (const key of ownKeys(value)) {
        if (!wanted.has(key)) { try { delete value[key]; } catch (error) { refused(error); } }
      }
      for (let i = 0; i < keys.length; i++) redefine(value, keys[i], descriptors[i]);
      try { setPrototypeOf(value, proto); } catch (error) { refused(error); }
      if (isMap(value)) {
        apply(mapClear, value, []);
        for (let i = 0; i < items.length; i += 2) apply(mapSet, value, [items[i], items[i + 1]]);
      } else if (isSet(value)) {
        apply(setClear, value, []);
        for (const item of items) apply(setAdd, value, [item]);
      }
    }
    state.full = true;
  }
  function redefine(target, key, descriptor) {
    try { defineProperty(target, key, descriptor); } catch (error) { refused(error); }
  }
  // A put-back the engine refuses for good (sealed, not configurable, not extensible) is
  // skipped; any other failure (out of memory, out of time) stops the restore().
  function refused(error) {
    if (!(error instanceof TypeErrorClass)) throw error;
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

  // -- the state before the call (lazy write-out) ----------------------------------------

  // Python takes a state's variables out of the engine only when something needs them (a
  // position, a read). While the state a call resumed may still be read, every write of
  // the call first logs the property it replaces, so that the old values can be put back
  // for a moment and written out (undone, written out, redone). A write that cannot be
  // logged so (a guarded call, a location of no known object) writes the state out first.
  let logging = false;
  // target, key, what it replaced, its value ...: what it replaced is the descriptor
  // (undefined: no own property), or VALUE_ONLY for a data property whose old value is
  // the next slot (a logged write is an assignment: it changes a value, never attributes).
  let undoLog = [];
  let previousText = null;
  const VALUE_ONLY = {};

  function logWrite(target, key) {
    if (!logging) return;
    const name = typeof key === "symbol" ? key : StringObject(key);
    if (name === "__proto__") {
      snapshotPrevious();  // it sets the prototype, not a property
      return;
    }
    if (isArray(target)) {
      // An index past the end moves the length; a shorter length drops the items past it.
      const length = getOwnPropertyDescriptor(target, "length");
      undoLog.push(target, "length", length, undefined);
      if (name === "length") {
        for (let i = 0; i < length.value; i++) {
          undoLog.push(target, StringObject(i), getOwnPropertyDescriptor(target, i), undefined);
        }
        return;
      }
      undoLog.push(target, name, getOwnPropertyDescriptor(target, name), undefined);
      return;
    }
    logNamed(target, name);
  }

  // logWrite(target, name) for a string (or symbol) ``name`` and a ``target`` that is no
  // array (the global object for a variable, the system variables' holder for the event,
  // an object a member write goes into), without the checks an array needs.
  function logNamed(target, name) {
    if (!logging) return;
    // The length first: comparing strings is QuickJS's slow strict equality.
    if (name.length === 9 && name === "__proto__") {
      snapshotPrevious();  // it sets the prototype, not a property
      return;
    }
    if (!hasOwn(target, name)) {
      undoLog.push(target, name, undefined, undefined);
    } else if (state.inert) {
      // Cheaper than its descriptor (no object made). No accessor is reachable (see walk),
      // so reading the value runs no chart code (the system variables' accessors on the
      // global object only read).
      undoLog.push(target, name, VALUE_ONLY, target[name]);
    } else {
      undoLog.push(target, name, getOwnPropertyDescriptor(target, name), undefined);
    }
  }

  function snapshotPrevious() {
    if (!logging) return;
    logging = false;
    previousText = writtenBefore();
    undoLog = [];
  }

  function writtenBefore() {
    // What every logged property holds now is kept first (putting one back can move
    // another: an array's item, its length), then the old values go back, newest first;
    // afterwards what was kept goes back.
    const now = [];
    for (let i = 0; i < undoLog.length; i += 4) {
      now.push(getOwnPropertyDescriptor(undoLog[i], undoLog[i + 1]));
    }
    for (let i = undoLog.length - 4; i >= 0; i -= 4) {
      put(undoLog[i], undoLog[i + 1], undoLog[i + 2], undoLog[i + 3]);
    }
    systemPaths = null;
    try {
      return encodeDetached();
    } finally {
      for (let i = 0; i < undoLog.length; i += 4) put(undoLog[i], undoLog[i + 1], now[i / 4], undefined);
      systemPaths = null;
    }
  }

  function put(target, key, descriptor, value) {
    if (descriptor === undefined) {
      delete target[key];
    } else if (descriptor === VALUE_ONLY) {
      // The value alone goes back. Refused only where the write could not have changed
      // anything (a property neither writable nor configurable, a system variable's
      // accessor): it holds what it held.
      try { defineProperty(target, key, { value }); } catch (error) { refused(error); }
    } else {
      defineProperty(target, key, descriptor);
    }
  }

  // Every variable in the stored form, as JSON text, leaving ``state`` as it is.
  function encodeDetached() {
    const names = userKeys();
    const counts = new MapClass();
    walk(names.map(rootValue), counts);
    const encoder = new Encoder(counts);
    let out = "";
    for (const name of names) {
      out += (out === "" ? "" : ",") + stringify(name) + ":" + encoder.root(name)[0];
    }
    const heap = encoder.heap();
    if (heap !== null) out += (out === "" ? "" : ",") + stringify(HEAP) + ":" + heap[0];
    return ("{" + out + "}").slice(0);
  }

  // -- calls -----------------------------------------------------------------------------

  // A call that may write runs between begin() (a checkpoint) and settle() (every variable
  // written out, then checked) or abort(); Python drains the promise jobs in between. A
  // failure, a datamodel past its cap, a variable the call may not create, or a host
  // function's question put everything back.
  let open = null;
  let pendingCopy = null;
  const foreachStack = [];

  function begin() {
    snapshotPrevious();
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

  // Puts back what the open call changed. The checkpoint is dropped only once restore()
  // completes: after a failure Python calls abort() again with room to finish it.
  function abort() {
    if (open !== null) restore(open);
    open = null;
    pendingCopy = null;
  }

  // A call that may have written anything: every variable is walked again.
  function written() {
    state.full = true;
    return encode();
  }

  function settle(writable) {
    const copy = pendingCopy;
    if (hostRequest !== null) {
      abort();
      return ["ask", hostRequest];
    }
    let out;
    try {
      out = written();
    } catch (error) {
      abort();
      throw error;
    }
    const present = [];
    for (const name of out.changed) {
      if (name === HEAP) continue;
      if (!writable(name)) {
        abort();
        written();
        throw new TypeError("cannot create or assign the variable " + stringify(name));
      }
      if (getOwnPropertyDescriptor(global, name) !== undefined) present.push(name);
    }
    if (out.size > state.cap) {
      abort();
      written();
      const names = out.changed.filter((name) => name !== HEAP).slice(0, 5);
      throw new RangeError("the datamodel would be larger than its cap of " + state.cap +
        " bytes stored" + (names.length > 0 ? " (writing " + names.join(", ") + ")" : ""));
    }
    open = null;
    pendingCopy = null;
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

  // What a write under the spelled-out property ``member`` adds for its key, at least a
  // reference's cost (the key may be new); -1 when the key is computed at run time.
  function memberCost(member) {
    if (typeof member !== "string" || member === "") return -1;
    const cost = textSize(member) + 4;
    return cost > REFERENCE_COST ? cost : REFERENCE_COST;
  }

  // Admits ``value`` for a write into the variable ``root`` that needs no checkpoint
  // (``key``: the variable or property it goes under, null when unknown), then runs
  // ``write``; when the bound cannot vouch for the cap, the exact size decides (with a
  // checkpoint).
  function admitted(value, root, key, write, plain, member) {
    const keyCost = key !== null ? textSize(key) + 4 : memberCost(member);
    if (keyCost < 0) {
      // A key computed at run time: the bound cannot vouch for what it adds, so the exact
      // size decides (with a checkpoint), as when the bound runs out.
      if (dirty()) encode();
      begin();
      try { write(); } catch (failure) { abort(); throw failure; }
      settle(variableName);
      return;
    }
    if (root !== null && (typeof value === "number" || typeof value === "boolean" ||
        (typeof value === "string" && value.length < 4096) || value === undefined)) {
      // A scalar: its size without a walk, and nothing it could share or run.
      const added = (typeof value === "string" ? textSize(value) : 24) + keyCost;
      if (added <= state.cap - state.bound) {
        write();
        state.bound += added;
        const record = recordOf(root);
        markDirty(record);
        const flat = typeof value !== "number" || (value === value && value !== Infinity &&
          value !== -Infinity && !(value === 0 && 1 / value < 0));
        if (key === root) {
          record.plain = flat;
        } else if (record.plain === true) {
          record.plain = flat && value !== undefined &&
            typeof member === "string" && member.charCodeAt(0) !== 36 && member !== "__proto__";
        }
        return;
      }
    }
    let added;
    try {
      // The room left once the key is paid for: the bound must stay within the cap.
      added = measureNew(value, state.cap - state.bound - keyCost, false, plain === true);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      // The bound only grows between write-outs: one makes it exact again.
      if (dirty()) {
        encode();
        admitted(value, root, key, write, plain, member);
        return;
      }
      begin();
      try { write(); } catch (failure) { abort(); throw failure; }
      settle(variableName);
      return;
    }
    write();
    state.bound += added + keyCost;
    if (!addedInert || (typeof value === "function" && (key === null || IMPLICIT_KEYS.has(key)))) {
      state.inert = false;
    }
    if (addedCallable) state.callableFree = false;
    for (const object of addedObjects) state.known.add(object);
    // A value that holds an object stored already moves or shares it: every variable is
    // walked again; else only this one changed.
    if (addedKnown || root === null) {
      state.full = true;
      return;
    }
    const record = recordOf(root);
    markDirty(record);
    // Whether JSON.stringify still writes the variable as the stored form does: the whole
    // variable was this value, or a plain variable got a plain value under a plain key.
    if (key === root) {
      record.plain = addedPlain && value !== null;
    } else {
      record.plain = record.plain === true && addedPlain && value !== undefined &&
        typeof member === "string" && member.charCodeAt(0) !== 36 && member !== "__proto__";
    }
  }

  // What store() adds for the key of a write at ``location`` (or into the variable
  // ``name``): the variable's name when the value is the whole variable, else the member's
  // (-1: a key computed at run time).
  function storeCost(location, name, member) {
    if (location === null || member === "") return name === null ? 0 : textSize(name) + 4;
    return memberCost(member);
  }

  function produce(expr, text) {
    return expr === null ? (text === null ? undefined : parseJSON(text)) : expr();
  }

  // An unguarded <assign>: ``expr``'s value (or the JSON ``text``) admitted, then stored at
  // ``location`` (or in the variable ``name``).
  // ``under`` is what the write's key adds (storeCost(): the same for every write of one
  // <assign>, worked out once for a run's); ``record`` the record of the variable it writes
  // into (recordOf; null: looked up when needed).
  // Its locals are ``var``, as in the other functions every event runs (runBlock(),
  // readGuards(), setEvent(), flatArraySize()): QuickJS checks a ``let`` or ``const``
  // binding for its temporal dead zone at each use, about a fifth of such a function's
  // time here.
  function store(location, expr, text, name, root, plain, member, target, under, record) {
    var value = expr === null ? (text === null ? undefined : parseJSON(text)) : expr();
    // ``member`` "" says the location is the variable itself.
    var whole = location === null || member === "";
    var variable = location === null ? name : root;
    var kind = typeof value;
    // Compared once: comparing strings takes QuickJS's slow strict equality.
    var number = kind === "number";
    // What the write adds to the bound when one of the two cases below vouches for it
    // (-1: admitted() decides, as always), and whether the value is a scalar.
    var added = -1;
    var scalar = false;
    if (under < 0 || variable === null) {
      // a key computed at run time (admitted() has the exact size decide), or no variable
    } else if (number || kind === "boolean" || value === undefined ||
        (kind === "string" && value.length < 4096)) {
      // admitted()'s scalar case, inline: the most common write of all.
      added = (number || kind !== "string" ? 24 : textSize(value)) + under;
      scalar = true;
    } else if (plain && isArray(value) && !state.known.has(value) && !isFrozen(value) &&
        getPrototypeOf(value) === ArrayPrototype) {
      // admitted()'s new flat array (a list kept in a variable, a new one each event),
      // inline: measureNew() would find it so and count the same size, and the bound
      // vouches for it with the key's cost too (else admitted() decides, as always).
      added = flatArraySize(value);
      if (added >= 0) added += under;
    }
    if (added < 0 || added > state.cap - state.bound) {
      admitted(value, variable, whole ? variable : null,
        () => place(location, value, name, whole, target), plain, member);
      return;
    }
    // place(), inline (a call saved at every write).
    if (logging) {
      if (!whole) {
        if (target !== null) target();
        else snapshotPrevious();
      } else if (variable.length !== 9 && state.inert && hasOwn(global, variable)) {
        // logNamed()'s common case, inline (a call saved at every write): a variable's
        // value replaced. A name of nine characters may be "__proto__": logNamed() decides.
        undoLog.push(global, variable, VALUE_ONLY, global[variable]);
      } else {
        logNamed(global, variable);
      }
    }
    if (location === null) global[name] = value;
    else location(value);
    state.bound += added;
    if (record === null) record = recordOf(variable);
    if (!record.dirty) {  // ``markDirty``, inline
      record.dirty = true;
      state.dirtyList.push(record);
    }
    if (scalar) {
      var flat = !number || (value - value === 0 && !(value === 0 && 1 / value < 0));
      if (whole) {
        record.plain = flat;
      } else if (record.plain === true) {
        record.plain = flat && value !== undefined &&
          typeof member === "string" && member.charCodeAt(0) !== 36 && member !== "__proto__";
      }
      return;
    }
    state.known.add(value);
    if (whole) {
      record.plain = true;
    } else if (record.plain === true) {
      record.plain = typeof member === "string" &&
        member.charCodeAt(0) !== 36 && member !== "__proto__";
    }
  }

  // Writes ``value`` at ``location`` (or into the variable ``name``), logging first what
  // it replaces.
  function place(location, value, name, whole, target) {
    if (location === null) {
      logNamed(global, name);
      global[name] = value;
      return;
    }
    if (logging) {
      if (whole) {
        logNamed(global, name);
      } else if (target !== null) {
        // Logs what the write replaces in the object and under the key the location writes
        // into (the location reads nothing that can change: it is write-free, and no
        // accessor is reachable).
        target();
      } else {
        snapshotPrevious();
      }
    }
    location(value);
  }
  let blockStep = 0;
  let guardStep = 0;

  // A call starts: the state it resumes is the one previousStored() gives from now on.
  function nextGeneration() {
    logging = true;
    // Emptied in place (no new array, no growing it again an event); a long one is
    // dropped, so that its room is not kept.
    if (undoLog.length > 256) undoLog = [];
    else undoLog.length = 0;
    previousText = null;
  }

  // The event's fields (null: blank, undefined in the chart) and its data: with ``key``
  // null, as JSON text (null: none); else the data is an object of one entry, ``key``
  // and its value ``data`` (a number, a string, a boolean or null), as Python sends the
  // commonest data (JSON.parse of its text would build the same object).
  // ``starting``: the first write of a call (nextGeneration() first).
  function setEvent(starting, name, type, sendid, origin, origintype, invokeid, key, data) {
    if (starting) nextGeneration();
    if (logging) {
      // logNamed()'s common case, inline: once an event.
      if (state.inert && hasOwn(system, "_event")) {
        undoLog.push(system, "_event", VALUE_ONLY, system._event);
      } else {
        logNamed(system, "_event");
      }
    }
    // Only the data can hold objects, frozen through: JSON text with no "{" past its
    // first character and no "[" holds one object at most, its first (an event's flat
    // data: no walk). The event itself is frozen as it is. (``var``: see store().)
    var value, event;
    if (name !== null) {
      if (key !== null) {
        // A computed key makes an own data property even when it is "__proto__", as
        // JSON.parse does.
        value = freezeObject({ [key]: data });
      } else if (data !== null) {
        value = parseJSON(data);
        if (data.indexOf("[") < 0 && data.indexOf("{", 1) < 0) freezeObject(value);
        else deepFreezeData(value);
      }
    }
    event = name === null ? undefined : freezeObject({
      name, type,
      sendid: sendid === null ? undefined : sendid,
      origin: origin === null ? undefined : origin,
      origintype: origintype === null ? undefined : origintype,
      invokeid: invokeid === null ? undefined : invokeid,
      data: value,
    });
    system._event = event;
    systemPaths = null;
    if (state.holdsEvent) state.full = true;
  }

  // Evaluates conditions ``from`` .. ``from + count - 1`` in turn, each as read() would
  // unguarded: the index of the first that holds, ``from + count`` when none does, or
  // {stopped: i} before one read() would run guarded, or whose value is not a primitive
  // (Python evaluates it alone: what Python reads of an object decides). A condition
  // holds when the value Python reads is truthy there: a number that is finite and not
  // 0 (NaN and the infinities read as None), a non-empty string, true. A failure throws;
  // guardProgress() then says which condition failed.
  function readGuards(guards, from, count, answers, limit) {
    // setIn(answers) without its call when there are none (an event's two calls).
    if (answers !== null) setIn(answers);
    else inAnswers = activeIds = null;
    var end = from + count;  // ``var``: see store()
    var i, k, fn, value;
    for (i = from; i < end; i++) {
      guardStep = i;
      k = 3 * i;
      if (guards[k + 2]) return { stopped: i };
      fn = guards[k];
      if (fn === null) return i;
      if (!state.inert || (guards[k + 1] && !state.callableFree)) return { stopped: i };
      value = fn();
      // A boolean first, without typeof (a string compared: QuickJS's slow path).
      if (value === true) return i;
      if (value === false) continue;
      switch (typeof value) {
        case "number": if (value !== 0 && value - value === 0) return i; break;
        case "string": if (value.length > 0) return i; break;
        case "undefined": break;
        default: if (value !== null) return { stopped: i };
      }
    }
    guardStep = end;
    return end;
  }

  const api = freezeObject({
    setup(revivable, cap) {
      state.revivable = new MapClass(parseJSON(revivable));
      state.cap = cap;
    },
    setCap(cap) { state.cap = cap; },
    setSystem(name, text) {
      logWrite(system, name);
      const value = parseJSON(text);
      system[name] = value === null ? undefined : deepFreezeData(value);
      systemPaths = null;
    },
    setEvent,
    // The same, from the whole event as JSON (fields a plain string cannot carry).
    setEventJSON(text) {
      logWrite(system, "_event");
      const event = parseJSON(text);
      for (const key of ownKeys(event)) if (event[key] === null) event[key] = undefined;
      system._event = deepFreezeData(event);
      systemPaths = null;
      // What a variable held of the old event is data of its own now.
      if (state.holdsEvent) state.full = true;
    },
    declare(name) {
      if (getOwnPropertyDescriptor(global, name) === undefined) {
        logWrite(global, name);
        global[name] = undefined;
        markDirty(recordOf(name));
      }
    },
    // Binds a variable to data (JSON text; null at the top is undefined): never decoded.
    bind(name, text) {
      const value = text === null ? undefined : parseJSON(text);
      admitted(value, name, name, () => { logWrite(global, name); global[name] = value; }, true, null);
    },
    // Installs a position's stored variables (the chart's own functions come back).
    decode(text) {
      snapshotPrevious();
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
    // A function that logs (logWrite) what a member location's write replaces, from the
    // location's own parts: the object it writes into and its key (an expression when
    // ``computed``). No array is made per write: a spelled-out key on an object that is
    // no array takes logNamed.
    compileTarget(objectSource, key, computed) {
      if (!computed) key = keyString(key);
      const object = makeFunction("return (" + objectSource + "\n);");
      if (computed) {
        const index = makeFunction("return (" + key + "\n);");
        return function () {
          const where = object();
          const at = index();
          if (isObject(where)) logWrite(where, at);
        };
      }
      return function () {
        var where = object();  // ``var``: see store()
        // ``isObject``, inline: every write through such a location comes here.
        if (where === null || (typeof where !== "object" && typeof where !== "function")) return;
        if (isArray(where)) logWrite(where, key);
        else if (key.length !== 9 && state.inert && hasOwn(where, key)) {
          // logNamed()'s common case, inline. Unlike logNamed() it does not test
          // ``logging``: both callers (store(), place()) call this only while logging.
          undoLog.push(where, key, VALUE_ONLY, where[key]);
        } else {
          logNamed(where, key);
        }
      };
    },
    // The state before the current call, written out (a JSON object of its stored
    // variables), or null when the engine holds no call's writes to undo.
    previousStored() {
      snapshotPrevious();
      return previousText;
    },
    nextGeneration,
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
    read(fn, answers, limit, pure) {
      setIn(answers);
      if (state.inert && (!pure || state.callableFree)) return result(fn(), limit);
      begin();
      return attempt(() => guardedResult(fn(), limit));
    },
    // setEvent() then read(), in one call.
    readEvent(starting, name, type, sendid, origin, origintype, invokeid, key, data, fn, answers, limit, pure) {
      setEvent(starting, name, type, sendid, origin, origintype, invokeid, key, data);
      return api.read(fn, answers, limit, pure);
    },
    // An expression that may write (settle() must follow).
    evaluate(fn, answers, limit) {
      setIn(answers);
      begin();
      return attempt(() => guardedResult(fn(), limit));
    },
    // <assign>, <data expr>: evaluate ``expr`` (or parse JSON ``text`` when ``expr`` is
    // null) and store the value at ``location`` (or in the variable ``name``). Returns
    // true when the call is guarded (settle() must follow). ``root`` is the variable
    // ``location`` writes into (null: not known).
    assign(location, expr, text, name, root, answers, guard, pure, plain, member, target) {
      if (location !== null) name = root;
      setIn(answers);
      if (guard || !state.inert || (pure && !state.callableFree)) {
        begin();
        attempt(() => {
          const value = produce(expr, text);
          if (location === null) global[name] = value;
          else location(value);
        });
        return true;
      }
      store(location, expr, text, name, root, plain, member, target,
        storeCost(location, name, member), null);
      return false;
    },
    // Runs of <assign> (and a <log> ending one), made once per block and run in one call.
    newBlock() { return []; },
    blockAssign(block, location, expr, text, name, root, pure, plain, member, target) {
      name = keyString(name);
      root = keyString(root);
      if (location !== null) name = root;
      block.push({ log: null, location, expr, text, name, root, pure, plain, member, target,
        under: storeCost(location, name, member), record: name === null ? null : recordOf(name) });
    },
    blockLog(block, fn, pure) {
      block.push({ log: fn, pure });
    },
    // Runs the first ``count`` steps of ``block``, each as assign() and read() would run
    // it unguarded: true when every one ran (or the log's value, when the log did), or
    // {stopped: i} before a step that needs a guarded call (Python runs it alone). A
    // failure throws; blockProgress() then says which step failed.
    runBlock(block, count, answers, limit) {
      var i, step;  // ``var``: see store()
      // setIn(answers) without its call when there are none (an event's two calls).
      if (answers !== null) setIn(answers);
      else inAnswers = activeIds = null;
      for (i = 0; i < count; i++) {
        blockStep = i;
        step = block[i];
        if (!state.inert || (step.pure && !state.callableFree)) return { stopped: i };
        if (step.log !== null) return result(step.log(), limit);
        store(step.location, step.expr, step.text, step.name, step.root, step.plain, step.member,
          step.target, step.under, step.record);
      }
      blockStep = count;
      return true;
    },
    blockProgress() { return blockStep; },
    // A state's candidate transitions' conditions, in document order (made once per chain
    // of transitions, evaluated in one call): per condition its function (null: none, it
    // holds), whether it calls pure built-ins only, and whether it must run alone (it may
    // write, or did not compile).
    newGuards() { return []; },
    guardAdd(guards, fn, pure, alone) { guards.push(fn, pure, alone); },
    readGuards,
    // setEvent() then readGuards(), in one call.
    readGuardsEvent(starting, name, type, sendid, origin, origintype, invokeid, key, data, guards, from, count, answers, limit) {
      setEvent(starting, name, type, sendid, origin, origintype, invokeid, key, data);
      return readGuards(guards, from, count, answers, limit);
    },
    guardProgress() { return guardStep; },
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
    foreachArray(fn, answers, guard, pure) {
      setIn(answers);
      const guarded = guard || !state.inert || (pure && !state.callableFree);
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
      admitted(value, item, item, () => { logWrite(global, item); global[item] = value; }, false, null);
      if (index !== null) {
        admitted(position, index, index, () => { logWrite(global, index); global[index] = position; }, true, null);
      }
    },
    foreachEnd() { foreachStack.pop(); },
    fetch,
    defineHost(names) {
      for (const name of parseJSON(names)) {
        const fn = hostFunction(name);
        defineProperty(global, name, { value: fn, writable: false, enumerable: false, configurable: false });
        baseline.add(name);
        // Frozen with its prototype object, as every built-in is: what a chart put on
        // them would not survive its position.
        deepFreeze(fn);
      }
      builtinPaths = null;
    },
    answerHost(key, value, error) { hostAnswers.set(key, [value, error]); },
    forgetHostAnswers() { hostAnswers.clear(); },
  });

  function deepFreezeData(value) {
    if (value !== null && typeof value === "object") {
      // Indexed: no iterator an object (every event's data comes here).
      const keys = ownKeys(value);
      for (let i = 0; i < keys.length; i++) deepFreezeData(value[keys[i]]);
      freezeObject(value);
    }
    return value;
  }

  return function pick(name) { return api[name]; };
})

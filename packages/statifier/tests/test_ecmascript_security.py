"""The ECMAScript datamodel tried as a hostile chart or a hostile sender would (issue 19).

Data from outside never becomes code; two chart instances never see each other's engine
state, even run alternately in one thread; a write the datamodel bounds refuse changes
nothing; side effects are found wherever chart code can run.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import statifier
from statifier.budget import MacrostepLimits
from statifier.core import effects as fx
from statifier.core.position import dumps, export_position, import_position, loads
from statifier.datamodel import stored_variables
from statifier.errors import ExecutionResourceError
from statifier.virtual import run_chart

from engine_support.ecmascript import chart, ended_in, errors, logged

PAYLOAD = "globalThis.approved = true, function () {}"
"""Code an attacker hopes to see revived (the shape positions once gave functions)."""


# -- data from outside is never revived as code ------------------------------------------

GATE = chart(
    """
    <datamodel><data id="approved" expr="false"/><data id="order"/></datamodel>
    <state id="open">
      <transition event="order"><assign location="order" expr="_event.data"/></transition>
      <transition event="check" cond="approved === true" target="hacked"/>
      <transition event="check" target="safe"/>
    </state>
    <final id="hacked"/><final id="safe"/>
    """
)


def test_event_data_shaped_like_a_stored_function_stays_data() -> None:
    state, _ = statifier.initialize(GATE, session_id="sess_gate")
    state, _ = statifier.handle_event(
        state, statifier.Event(name="order", data={"$function": PAYLOAD})
    )
    state, effects = statifier.handle_event(state, "check")
    assert ended_in(effects) == [("safe",)]
    assert errors(effects) == []
    probe = chart(
        '<datamodel><data id="order"/></datamodel><state id="s"><transition event="look">'
        "<log expr=\"typeof order + ':' + order['$function']\"/></transition></state>"
    )
    state, _ = statifier.initialize(probe, session_id="sess_probe")
    state, _ = statifier.handle_event(state, statifier.Event(name="look"))
    seeded, _ = statifier.initialize(
        probe, session_id="sess_seed", datamodel={"order": {"$function": PAYLOAD}}
    )
    _, effects = statifier.handle_event(seeded, "look")
    assert logged(effects) == [f"object:{PAYLOAD}"]


def test_a_position_cannot_smuggle_code_into_a_variable() -> None:
    state, _ = statifier.initialize(GATE, session_id="sess_gate")
    tampered = dataclasses.replace(
        state, datamodel={**state.datamodel, "order": {"$function": PAYLOAD}}
    )
    restored = loads(dumps(tampered), GATE)
    _, effects = statifier.handle_event(restored, "check")
    assert ended_in(effects) == [("safe",)]


def test_an_operators_datamodel_change_stays_data() -> None:
    state, _ = statifier.initialize(GATE, session_id="sess_gate")
    imported = import_position(
        export_position(state), GATE, datamodel={"order": {"$function": PAYLOAD}}
    )
    _, effects = statifier.handle_event(imported, "check")
    assert ended_in(effects) == [("safe",)]


def test_an_invocation_answer_stays_data() -> None:
    parent = chart(
        """
        <datamodel><data id="approved" expr="false"/><data id="answer"/></datamodel>
        <state id="waiting">
          <invoke type="scxml">
            <content>
              <scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0"
                  datamodel="ecmascript">
                <final id="end"><donedata>
                  <param name="$function" expr="'globalThis.approved = true, function () {}'"/>
                </donedata></final>
              </scxml>
            </content>
          </invoke>
          <transition event="done.invoke" target="checking">
            <assign location="answer" expr="_event.data"/>
          </transition>
        </state>
        <state id="checking">
          <transition cond="approved === true" target="hacked"/>
          <transition target="safe"/>
        </state>
        <final id="hacked"/><final id="safe"/>
        """
    )
    run = run_chart(parent)
    assert run.configuration == ("safe",)


# -- every instance has an engine of its own ---------------------------------------------

VICTIM = chart(
    """
    <datamodel><data id="approved" expr="false"/><data id="count" expr="1"/></datamodel>
    <state id="s">
      <transition event="check" cond="approved === true" target="hacked"/>
      <transition event="check">
        <assign location="count" expr="count + 1"/><log expr="count"/>
      </transition>
      <transition event="grow">
        <assign location="count" expr="'x'.repeat(40 * 1024 * 1024).length"/>
        <log expr="count"/>
      </transition>
    </state>
    <final id="hacked"/>
    """
)


def attacker(script: str, *, cond: str = "true") -> statifier.Machine:
    return chart(
        f"""
        <datamodel>
          <data id="f"/><data id="n" expr="0"/><data id="approved" expr="false"/>
        </datamodel>
        <state id="s">
          <onentry><script>{script}</script></onentry>
          <transition event="poke" cond="{cond}"><assign location="n" expr="n + 1"/></transition>
        </state>
        """
    )


def alternate(hostile: statifier.Machine, event: str = "check") -> list[fx.Effect]:
    """Start the victim, start the attacker, poke it, then let the victim go on."""
    victim, _ = statifier.initialize(VICTIM, session_id="sess_victim")
    other, _ = statifier.initialize(hostile, session_id="sess_attacker")
    other, _ = statifier.handle_event(other, "poke")
    victim, effects = statifier.handle_event(victim, event)
    assert victim.configuration_ids() == ("s",)
    return effects


def test_an_implicit_call_cannot_reach_another_charts_variables() -> None:
    hostile = attacker(
        "f = function () { approved = true; count = 'hijacked'; return 1 }",
        cond="{valueOf: f} &gt; 0",
    )
    effects = alternate(hostile)
    assert errors(effects) == []
    assert logged(effects) == [2]


def test_a_lone_surrogate_global_breaks_nothing_elsewhere() -> None:
    effects = alternate(attacker("globalThis['\\ud800'] = 1; globalThis['a\\udfff'] = 2"))
    assert errors(effects) == []
    assert logged(effects) == [2]


def test_a_non_configurable_global_of_one_chart_is_not_anothers() -> None:
    hostile = attacker(
        "Object.defineProperty(globalThis, 'count', {value: 'taken', writable: false,"
        " configurable: false}); Object.defineProperty(globalThis, 'approved',"
        " {get: function () { return true }, configurable: false})"
    )
    statifier.initialize(hostile, session_id="sess_attacker")
    fresh, init_effects = statifier.initialize(VICTIM, session_id="sess_victim")
    assert errors(init_effects) == []
    assert fresh.datamodel["count"] == 1
    _, effects = statifier.handle_event(fresh, "check")
    assert errors(effects) == []
    assert logged(effects) == [2]


def test_promise_jobs_of_one_chart_hold_no_memory_of_another() -> None:
    hostile = attacker(
        "var keep = []; for (var i = 0; i &lt; 200000; i++) {"
        " keep.push(Promise.resolve(i).then(function (v) { return 'x'.repeat(64) + v })) }"
        " keep = null"
    )
    effects = alternate(hostile, "grow")
    assert errors(effects) == []
    assert logged(effects) == [40 * 1024 * 1024]


def test_a_variable_replaced_on_every_event_keeps_no_old_value_alive() -> None:
    # Each event replaces ``recent`` with a new array: the engine must not keep the old
    # ones (a live session would fill its heap and fail with out of memory).
    machine = chart(
        """
        <datamodel><data id="recent" expr="[]"/></datamodel>
        <state id="s"><transition event="e">
          <assign location="recent" expr="recent.concat([_event.data]).slice(-10)"/>
        </transition></state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_heap")

    def heap_after(events: int) -> int:
        nonlocal state
        for i in range(events):
            state, _ = statifier.handle_event(state, statifier.Event(name="e", data=i))
        instance = state._datamodel_bound[1].instance  # type: ignore[index]
        used: int = instance.context.context.memory()["memory_used_size"]
        return used

    before = heap_after(200)
    after = heap_after(2000)
    assert state.datamodel["recent"] == list(range(1990, 2000))
    assert after - before < 64 * 1024  # 2,000 dropped arrays held would be about 500 KB


# -- a refused write changes nothing -----------------------------------------------------


def test_writes_refused_by_the_datamodel_cap_are_not_stored() -> None:
    # Issue 19's report (6 MiB writes under the 16 MiB default cap) at a 64th of its size:
    # the cap takes two of the writes, and the third and fourth are refused.
    limits = MacrostepLimits(datamodel_bytes=MacrostepLimits().cap // 64)
    size = 6 * 1024 * 1024 // 64
    machine = chart(
        f"""
        <datamodel>
          <data id="a" expr="0"/><data id="b" expr="0"/><data id="c" expr="0"/>
          <data id="d" expr="0"/>
        </datamodel>
        <state id="s"><onentry>
          <assign location="a" expr="'a'.repeat({size})"/>
          <assign location="b" expr="'b'.repeat({size})"/>
        </onentry>
        <transition event="more">
          <assign location="c" expr="'c'.repeat({size})"/>
        </transition>
        <transition event="again">
          <script>d = 'd'.repeat({size})</script>
        </transition>
        </state>
        """
    )
    state, effects = statifier.initialize(machine, session_id="sess_cap", limits=limits)
    assert errors(effects) == []
    for event in ("more", "again"):
        state, effects = statifier.handle_event(state, event)
        assert len(errors(effects)) == 1, event
    assert state.datamodel["c"] == 0
    assert state.datamodel["d"] == 0
    stored = len(json.dumps(stored_variables(state.datamodel)))
    assert 2 * size < stored <= limits.cap
    assert loads(dumps(state), machine, max_limits=limits).datamodel == state.datamodel


# The restore after a refused write may itself run out of memory (the heap full of what
# the write made): nothing of the write may survive it, in the engine or in the engine a
# failed one is replaced by (issue 19).
STARVED = chart(
    """
    <datamodel>
      <data id="o" expr="({k: 1})"/><data id="d" expr="0"/><data id="n" expr="0"/>
    </datamodel>
    <state id="s">
      <transition event="write">
        <assign location="n" expr="n + 1"/>
        <script>d = 'x'.repeat(64); o.k = 2</script>
      </transition>
      <transition event="look"><log expr="d + ':' + o.k + ':' + n"/></transition>
    </state>
    """
)


def _starve(state: statifier.MachineState, *calls: str) -> None:
    """Make each of the engine's ``calls`` (prelude functions, by their Python names) run
    out of memory at its first allocation, as if the heap were full: a forced OOM, where
    only chance would hit it otherwise."""
    instance = state._datamodel_bound[1].instance  # type: ignore[index]
    quickjs = instance.context.context
    for name in calls:
        real = getattr(instance.api, name)

        def starved(*args: Any, real: Any = real) -> Any:
            limit = quickjs.memory()["malloc_limit"]
            quickjs.set_memory_limit(quickjs.memory()["malloc_size"])
            try:
                return real(*args)
            finally:
                quickjs.set_memory_limit(limit)

        setattr(instance.api, name, starved)


def test_a_write_whose_restore_runs_out_of_memory_is_not_stored() -> None:
    state, _ = statifier.initialize(STARVED, session_id="sess_starved")
    # The settle's write-out fails, and so does the restore it starts at once.
    _starve(state, "settle")
    after, effects = statifier.handle_event(state, "write")
    assert [message.split(":")[0] for message in errors(effects)] == ["script"]
    # The engine was replaced (a resource limit): from its variables as the restore, run
    # again with room, left them, with the write before the script's.
    assert state._datamodel_bound[1].instance is not after._datamodel_bound[1].instance  # type: ignore[index]
    assert stored_variables(after.datamodel)["d"] == 0
    assert after.datamodel["o"] == {"k": 1}
    _, effects = statifier.handle_event(after, "look")
    assert logged(effects) == ["0:1:1"]
    assert loads(dumps(after), STARVED).datamodel == after.datamodel


@pytest.mark.parametrize("stuck", ["abort", "fetch"])
def test_a_write_that_cannot_be_put_back_fails_the_whole_call(stuck: str) -> None:
    state, _ = statifier.initialize(STARVED, session_id="sess_stuck")
    # The restore fails again with room to spare, or the write-out of what it put back: no
    # stored form the engine could give is trusted (the one Python read last is older than
    # the call's first write), so the call fails and the state it resumed stays as it was.
    _starve(state, "settle", stuck)
    with pytest.raises(ExecutionResourceError):
        statifier.handle_event(state, "write")
    assert stored_variables(state.datamodel)["d"] == 0
    assert state.datamodel["o"] == {"k": 1}
    _, effects = statifier.handle_event(state, "look")
    assert logged(effects) == ["0:1:0"]


DEEP = (
    "(function () { var o = {leaf: true}; for (var i = 0; i &lt; 300; i++) o = {o: o};"
    " return o })()"
)


def test_a_deep_value_is_storable_or_not_stored() -> None:
    machine = chart(
        f"""
        <datamodel><data id="v" expr="0"/></datamodel>
        <state id="s">
          <transition event="deep"><assign location="v" expr="{DEEP}"/></transition>
          <transition event="measure">
            <log expr="(function () {{ var d = 0, o = v; while (o.o) {{ o = o.o; d++ }}
              return d + ':' + o.leaf }})()"/>
          </transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_deep")
    state, effects = statifier.handle_event(state, "deep")
    restored = loads(dumps(state), machine)
    _, effects = statifier.handle_event(restored, "measure")
    if errors(effects):
        assert restored.datamodel["v"] == 0
    else:
        assert logged(effects) == ["300:true"]


# -- side effects are found wherever chart code runs -------------------------------------


def test_a_condition_that_runs_chart_code_implicitly_keeps_its_writes() -> None:
    machine = chart(
        """
        <datamodel><data id="n" expr="0"/><data id="bump"/></datamodel>
        <script>bump = function () { n = n + 1; return 1 }</script>
        <state id="s">
          <transition event="go" cond="{valueOf: bump} &gt; 0" target="t"/>
        </state>
        <state id="t"><transition event="look"><log expr="n"/></transition></state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_implicit")
    state, _ = statifier.handle_event(state, "go")
    assert state.datamodel["n"] == 1
    _, effects = statifier.handle_event(state, "look")
    assert logged(effects) == [1]
    _, effects = statifier.handle_event(loads(dumps(state), machine), "look")
    assert logged(effects) == [1]


KEYED = chart(
    '<datamodel><data id="d" expr="({})"/></datamodel><state id="s">'
    '<transition event="put"><assign location="d[_event.data.k]" expr="_event.data.v"/>'
    "</transition>"
    '<transition event="spelled"><assign location="d.' + "k" * 80 + '" expr="1"/>'
    "</transition></state>"
)
"""Writes under a key taken from an event, and under a long spelled-out key."""


@pytest.mark.parametrize(
    "key", ["k", "\u00e9" * 8, "\U0001f600" * 4, "x" * 200, "\u00e9" * 40, "\U0001f600" * 30]
)
@pytest.mark.parametrize("cap", [60, 150, 600, 3000])
def test_a_key_is_counted_as_a_position_writes_it(key: str, cap: int) -> None:
    """Whatever the engine keeps, ``dumps`` stores: a write under a new key is admitted only
    while the datamodel, the key written out (quoted, escaped, however long) included,
    stays within the cap; past it the write is refused and changes nothing."""
    limits = MacrostepLimits(datamodel_bytes=cap)
    state, _ = statifier.initialize(KEYED, session_id="s", limits=limits)
    refused = 0
    for n in range(400):
        if refused == 3:
            break
        data = {"k": f"{key}{n}", "v": [n] if n % 2 else 0}
        before = set(stored_variables(state.datamodel)["d"])
        state, effects = statifier.handle_event(state, statifier.Event(name="put", data=data))
        if errors(effects):
            refused += 1
            assert set(stored_variables(state.datamodel)["d"]) == before  # no key added
        dumps(state)
    assert refused == 3  # the cap was reached


@pytest.mark.parametrize("cap", [60, 100, 150])
def test_a_long_spelled_out_key_is_counted_in_full(cap: int) -> None:
    limits = MacrostepLimits(datamodel_bytes=cap)
    state, _ = statifier.initialize(KEYED, session_id="s", limits=limits)
    state, effects = statifier.handle_event(state, statifier.Event(name="spelled"))
    assert bool(errors(effects)) == (cap < 100)  # {"kk...k": 1}: 88 bytes written out
    dumps(state)


# -- the event is the core's: a chart cannot change it ------------------------------------

EVENT_KEEPER = chart(
    """
    <datamodel><data id="kept"/><data id="refused"/></datamodel>
    <state id="open">
      <transition event="e">
        <assign location="kept" expr="_event.data"/>
        <script>
          refused = [
            function () { "use strict"; _event.data.n = 99; },
            function () { "use strict"; _event.data.extra = 1; },
            function () { "use strict"; kept.n = 98; },
            function () { "use strict"; _event.data.inner.n = 97; },
            function () { "use strict"; _event.data.list.push(96); },
            function () { "use strict"; _event.name = "other"; },
          ].map((f) => { try { f(); return false; } catch (e) { return true; } });
        </script>
        <log expr="JSON.stringify([refused, _event.name, _event.data, kept])"/>
      </transition>
    </state>
    """
)


@pytest.mark.parametrize(
    "data",
    [
        {"n": 1},  # flat: one object, frozen without a walk
        {"n": 1, "inner": {"n": 2}, "list": [3], "text": "{ [ not markup"},
    ],
)
def test_the_events_data_stays_read_only(data: dict[str, Any]) -> None:
    state, _ = statifier.initialize(EVENT_KEEPER, session_id="keeper")
    _, effects = statifier.handle_event(state, statifier.Event(name="e", data=data))
    [text] = logged(effects)
    refused, name, seen, kept = json.loads(text)
    nested = "inner" in data
    # Every write into the event or the data a variable holds of it is refused; a write
    # into a part the data does not have (no inner, no list) fails all the same.
    assert refused == [True] * 6
    assert name == "e"
    assert seen == data
    assert kept == data
    assert nested or set(seen) == {"n"}


# -- every built-in is frozen --------------------------------------------------------------

BUILT_IN_WALK = """
var report = (function () {
  "use strict";
  const getPrototypeOf = Object.getPrototypeOf;
  const describe = Object.getOwnPropertyDescriptor;
  const ownKeys = Reflect.ownKeys;
  const apply = Reflect.apply;
  const seen = new Set();
  const owned = new Set();
  const queue = [];
  const isObject = (v) => v !== null && (typeof v === "object" || typeof v === "function");
  const label = (key) => (typeof key === "symbol" ? "[" + key.description + "]" : key);
  function reach(value, path) {
    if (!isObject(value) || value === globalThis || seen.has(value) || owned.has(value)) {
      return;
    }
    seen.add(value);
    queue.push([value, path]);
  }
  function reachProperties(value, path, accessorsOnly) {
    for (const key of ownKeys(value)) {
      const d = describe(value, key);
      if ("value" in d) {
        if (!accessorsOnly) reach(d.value, path + "." + label(key));
      } else {
        reach(d.get, path + ".get " + label(key));
        reach(d.set, path + ".set " + label(key));
      }
    }
    reach(getPrototypeOf(value), path + ".[[Prototype]]");
  }
  let walked = 0;
  function walk() {
    for (; walked < queue.length; walked++) reachProperties(...queue[walked], false);
  }
  // What the chart made, or a built-in made for it, is the chart's own and need not be
  // frozen, nor a function's prototype object (its instances' prototype); their
  // prototypes and the accessors they are born with (%ThrowTypeError%) are built-ins.
  const made = [];
  function madeBy(value, path) {
    if (!isObject(value) || seen.has(value) || owned.has(value)) return;
    owned.add(value);
    made.push([value, path]);
    if (typeof value === "function") {
      const d = describe(value, "prototype");
      if (d !== undefined && "value" in d) madeBy(d.value, path + ".prototype");
    }
    reachProperties(value, path, true);
  }
  function instanceOf(fn, path) {
    madeBy(fn, path);
    return fn();
  }

  for (const key of ownKeys(globalThis)) {
    if (key === "report") continue;
    const d = describe(globalThis, key);
    if ("value" in d) reach(d.value, label(key));
    else { reach(d.get, "get " + label(key)); reach(d.set, "set " + label(key)); }
  }
  reach(getPrototypeOf(globalThis), "globalThis.[[Prototype]]");
  walk();

  // Objects whose prototypes only syntax, or a built-in's answer, reaches.
  const identity = (x) => x;
  const empty = { next() { return { done: true }; } };
  const syntax = {
    "function": () => function () {},
    "class": () => class {},
    "generator function": () => function* () {},
    "async function": () => async function () {},
    "async arrow": () => async () => {},
    "async generator function": () => async function* () {},
    "generator": () => instanceOf(function* () { yield 1; }, "generator's function"),
    "async generator": () => instanceOf(async function* () {}, "async generator's function"),
    "async call": () => instanceOf(async function () {}, "async call's function"),
    "arguments": () => (function () { return arguments; })(),
    "strict arguments": () => (function () { "use strict"; return arguments; })(),
    "array": () => [1, 2],
    "object": () => ({ a: 1 }),
    "map": () => new Map([[1, 2]]),
    "set": () => new Set([1]),
    "string": () => Object("ab"),
    "regexp": () => /a/g,
    "typed array": () => new Uint8Array(2),
    "array buffer": () => new ArrayBuffer(2),
    "promise": () => Promise.resolve(1),
    "error": () => new Error("e"),
    "iterator helper": () => [1].values().map(identity),
    "Iterator.from": () => Iterator.from(empty),
  };
  const missing = [];
  for (const key of Object.keys(syntax)) {
    let value;
    try { value = syntax[key](); } catch (_error) { missing.push(key); continue; }
    madeBy(value, key);
  }
  walk();
  // Every built-in function, called with no arguments and with a function, on nothing
  // and on each object above: what it answers (an iterator of some kind, a wrapper, a
  // promise) may have a prototype nothing above reaches.
  const functions = queue.filter(([value]) => typeof value === "function");
  const receivers = [[undefined, "undefined"], ...made];
  for (const [fn, fnPath] of functions) {
    if (fn === globalThis.probe) continue;  // a host function asks the host: not here
    for (const [receiver, receiverPath] of receivers) {
      for (const args of [[], [identity]]) {
        let value;
        try { value = apply(fn, receiver, args); } catch (_error) { continue; }
        madeBy(value, receiverPath + " -> " + fnPath + "(" + args.length + ")");
      }
    }
  }
  walk();

  return JSON.stringify({
    unfrozen: queue.filter(([value]) => !Object.isFrozen(value)).map(([, path]) => path),
    missing,
    reached: queue.length,
    helpers: [getPrototypeOf([].values().map(identity)), getPrototypeOf(Iterator.from(empty))]
      .every((proto) => seen.has(proto)),
  });
})();
"""
"""A chart's script that walks every object reachable from the built-ins and reports those
not frozen, by a path that names them."""


def test_every_built_in_a_chart_can_reach_is_frozen() -> None:
    # What a chart changes in a built-in lives in its engine alone and not in its position:
    # a resumed run would differ from the live one. The walk goes from the global object's
    # properties (the system variables' accessors and a host function among them) through
    # properties and prototypes, and from the prototypes of what syntax and built-ins make.
    machine = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript">'
        f'<state id="s"><onentry><script><![CDATA[{BUILT_IN_WALK}]]></script>'
        '<log expr="report"/></onentry></state></scxml>',
        functions={"probe": lambda: 1},
    )
    _, effects = statifier.initialize(machine, session_id="sess_walk")
    assert errors(effects) == []
    [text] = logged(effects)
    report = json.loads(text)
    assert report["missing"] == []
    assert report["helpers"]  # this engine has Iterator helpers: the walk meets them
    assert report["reached"] > 400
    assert report["unfrozen"] == []


def test_the_prelude_hardens_an_engine_without_iterator_helpers() -> None:
    # This engine has Iterator helpers (the walk above meets them); an older one has none,
    # and the prelude must still run and freeze what it has.
    from statifier.datamodel.ecmascript._instance import _PRELUDE, load_quickjs

    context = load_quickjs().Context()
    iterator_prototype = "Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()))"
    context.eval(f"delete globalThis.Iterator; delete {iterator_prototype}.map")
    gone = context.eval(f"typeof Iterator + typeof {iterator_prototype}.map")
    assert gone == "undefinedundefined"
    api = context.eval(_PRELUDE)(context.globalThis)
    assert api is not None
    frozen = (
        f"Object.isFrozen({iterator_prototype})"
        " && Object.isFrozen(Object.getPrototypeOf([][Symbol.iterator]()))"
        " && Object.isFrozen(Array.prototype)"
    )
    assert context.eval(frozen) is True


ITERATOR_HIJACK = chart(
    """
    <datamodel><data id="r" expr="0"/></datamodel>
    <state id="s">
      <onentry><script><![CDATA[
        var same = function (x) { return x; };
        var none = {next: function () { return {done: true}; }};
        var changes = [
          [[].values().map(same), "toArray", function () { return ["changed"]; }],
          [Iterator.from(none), "next", none.next],
        ].map(function (change) {
          var proto = Object.getPrototypeOf(change[0]);
          try { Object.defineProperty(proto, change[1], {value: change[2]}); return true; }
          catch (e) { return false; }
        });
      ]]></script></onentry>
      <transition event="e">
        <assign location="r" expr="[[1, 2].values().map(same).toArray(), Iterator.from(
          {i: 0, next: function () { return {done: this.i > 0, value: this.i++}; }}).toArray()]"/>
      </transition>
    </state>
    """
)


def test_an_iterator_helpers_prototype_is_the_same_live_and_resumed() -> None:
    # %IteratorHelperPrototype% and %WrapForValidIteratorPrototype%: no global names them.
    state, init_effects = statifier.initialize(ITERATOR_HIJACK, session_id="sess_hijack")
    live, _ = statifier.handle_event(state, "e")
    resumed, _ = statifier.handle_event(loads(dumps(state), ITERATOR_HIJACK), "e")
    assert live.datamodel["r"] == resumed.datamodel["r"] == [[1, 2], [0]]
    assert state.datamodel["changes"] == [False, False]
    assert errors(init_effects) == []

"""The chart shapes of ``bench/interpreter.py``, written once per engine.

Each ``Shape`` is one chart in every form a contender reads (SCXML for statifier and
python-statemachine's SCXML loader, YAML for sismic, a ``StateChart`` class for
python-statemachine's class engine), the external events a run sends (a fresh event per
event, ``event(i)`` gives the name and data of the ``i``-th) and what the run must leave
behind (``expected(n)`` after ``n`` events): the active leaves, or, for the datamodel chart,
the counter and the running total. No engine is imported here; the classes for the
python-statemachine class engine are built on demand by ``psm_class``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SCXML_NS = "http://www.w3.org/2005/07/scxml"

Observation = tuple[Any, ...]
"""What a contender reports after a run: sorted active leaves, or (count, total)."""


@dataclass(frozen=True)
class Shape:
    """One benchmark chart, in every engine's notation."""

    key: str
    """Short name (``--shapes`` picks by it)."""
    title: str
    """What one event does, for the tables."""
    scxml: str
    """The chart for statifier (Python datamodel) and python-statemachine's SCXML loader."""
    sismic_yaml: str
    """The same chart in sismic's YAML format (sismic does not read SCXML)."""
    psm_class: Callable[[], type]
    """Builds the python-statemachine ``StateChart`` class of the same chart."""
    event: Callable[[int], tuple[str, dict[str, Any] | None]]
    """The name and data of the ``i``-th event of a run (0-based)."""
    expected: Callable[[int], Observation]
    """What every engine must report after ``n`` events from a fresh start."""
    leaves: frozenset[str]
    """Leaf states reported by ``observe`` (empty: the chart reports datamodel values)."""
    sismic_settles: bool = False
    """The chart runs eventless transitions after the event: sismic then needs ``execute()``
    (run to stability) instead of one ``execute_once()``."""
    ecmascript: str | None = None
    """The chart in the ECMAScript datamodel, for a second statifier row (or None)."""


def _parity(even: frozenset[str], odd: frozenset[str]) -> Callable[[int], Observation]:
    def expected(n: int) -> Observation:
        return tuple(sorted(even if n % 2 == 0 else odd))

    return expected


# -- 1. ping-pong ---------------------------------------------------------------------------

_PING_PONG_SCXML = f"""<?xml version="1.0" encoding="UTF-8"?>
<scxml xmlns="{SCXML_NS}" version="1.0" datamodel="python" initial="machine">
  <state id="machine" initial="off">
    <state id="off">
      <transition event="toggle" target="on"/>
    </state>
    <state id="on">
      <transition event="toggle" target="off"/>
    </state>
  </state>
</scxml>
"""

_PING_PONG_YAML = """statechart:
  name: ping-pong
  root state:
    name: root
    initial: machine
    states:
      - name: machine
        initial: "off"
        states:
          - name: "off"
            transitions:
              - target: "on"
                event: toggle
          - name: "on"
            transitions:
              - target: "off"
                event: toggle
"""


def _ping_pong_class() -> type:
    from statemachine import State, StateMachine

    class PingPong(StateMachine):  # type: ignore[misc]  # a peer typed as Any
        """Flat ``off``/``on`` (if anything less work than the compound chart)."""

        off = State(initial=True)
        on = State()
        toggle = off.to(on) | on.to(off)

    return PingPong


# -- 2. four parallel regions ---------------------------------------------------------------

_REGIONS = 4

_PARALLEL_SCXML = (
    f'<scxml xmlns="{SCXML_NS}" version="1.0" datamodel="python" initial="p">\n'
    '  <parallel id="p">\n'
    + "".join(
        f'    <state id="r{i}" initial="a{i}">\n'
        f'      <state id="a{i}"><transition event="tick" target="b{i}"/></state>\n'
        f'      <state id="b{i}"><transition event="tick" target="a{i}"/></state>\n'
        "    </state>\n"
        for i in range(1, _REGIONS + 1)
    )
    + "  </parallel>\n</scxml>\n"
)

_PARALLEL_YAML = """statechart:
  name: parallel-4
  root state:
    name: root
    initial: p
    states:
      - name: p
        parallel states:
""" + "".join(
    f"""          - name: r{i}
            initial: a{i}
            states:
              - name: a{i}
                transitions:
                  - target: b{i}
                    event: tick
              - name: b{i}
                transitions:
                  - target: a{i}
                    event: tick
"""
    for i in range(1, _REGIONS + 1)
)


def _parallel_class() -> type:
    from statemachine import State, StateChart

    def region(i: int) -> type:
        namespace: dict[str, Any] = {
            f"a{i}": State(initial=True),
            f"b{i}": State(),
        }
        namespace["tick"] = namespace[f"a{i}"].to(namespace[f"b{i}"]) | namespace[f"b{i}"].to(
            namespace[f"a{i}"]
        )
        return type(f"r{i}", (State.Compound,), namespace)

    regions = {f"r{i}": region(i) for i in range(1, _REGIONS + 1)}
    parallel = type("p", (State.Parallel,), regions)
    return type("Parallel4", (StateChart,), {"p": parallel})


# -- 3. six-deep hierarchy crossing ---------------------------------------------------------

_DEPTH = 6


def _deep_scxml() -> str:
    def branch(prefix: str) -> str:
        opened = "".join(
            f'{"  " * (level + 1)}<state id="{prefix}{level}">\n' for level in range(1, _DEPTH)
        )
        other = "b" if prefix == "a" else "a"
        leaf = (
            f'{"  " * (_DEPTH + 1)}<state id="{prefix}{_DEPTH}">'
            f'<transition event="cross" target="{other}{_DEPTH}"/></state>\n'
        )
        closed = "".join(f"{'  ' * (level + 1)}</state>\n" for level in range(_DEPTH - 1, 0, -1))
        return opened + leaf + closed

    return (
        f'<scxml xmlns="{SCXML_NS}" version="1.0" datamodel="python" initial="a{_DEPTH}">\n'
        + branch("a")
        + branch("b")
        + "</scxml>\n"
    )


def _deep_yaml() -> str:
    def branch(prefix: str, level: int, indent: str) -> str:
        name = f"{prefix}{level}"
        if level == _DEPTH:
            other = "b" if prefix == "a" else "a"
            return (
                f"{indent}- name: {name}\n"
                f"{indent}  transitions:\n"
                f"{indent}    - target: {other}{_DEPTH}\n"
                f"{indent}      event: cross\n"
            )
        return (
            f"{indent}- name: {name}\n"
            f"{indent}  initial: {prefix}{level + 1}\n"
            f"{indent}  states:\n" + branch(prefix, level + 1, indent + "    ")
        )

    return (
        "statechart:\n  name: deep-6\n  root state:\n    name: root\n    initial: a1\n"
        "    states:\n" + branch("a", 1, "      ") + branch("b", 1, "      ")
    )


def _deep_class() -> type:
    from statemachine import State, StateChart

    def branch(prefix: str, leaf: Any) -> type:
        node: type = type(f"{prefix}{_DEPTH - 1}", (State.Compound,), {f"{prefix}{_DEPTH}": leaf})
        for level in range(_DEPTH - 2, 0, -1):
            node = type(f"{prefix}{level}", (State.Compound,), {f"{prefix}{level + 1}": node})
        return node

    a_leaf, b_leaf = State(initial=True), State()
    namespace: dict[str, Any] = {"a1": branch("a", a_leaf), "b1": branch("b", b_leaf)}
    # Transitions between the two leaves are declared at the top, where they cross.
    namespace["cross"] = a_leaf.to(b_leaf) | b_leaf.to(a_leaf)
    return type("Deep6", (StateChart,), namespace)


# -- 4. five-hop eventless chains -----------------------------------------------------------

_HOPS = 5


def _chain_scxml() -> str:
    def chain(side: str, start: str, end: str) -> str:
        lines = [f'  <state id="{start}"><transition event="ping" target="{side}1"/></state>\n']
        for hop in range(1, _HOPS + 1):
            target = f"{side}{hop + 1}" if hop < _HOPS else end
            lines.append(f'  <state id="{side}{hop}"><transition target="{target}"/></state>\n')
        return "".join(lines)

    return (
        f'<scxml xmlns="{SCXML_NS}" version="1.0" datamodel="python" initial="left">\n'
        + chain("l", "left", "right")
        + chain("r", "right", "left")
        + "</scxml>\n"
    )


def _chain_yaml() -> str:
    lines = ["statechart:\n  name: eventless-5\n  root state:\n    name: root\n"]
    lines.append("    initial: left\n    states:\n")
    for side, start, end in (("l", "left", "right"), ("r", "right", "left")):
        lines.append(
            f"      - name: {start}\n        transitions:\n"
            f"          - target: {side}1\n            event: ping\n"
        )
        for hop in range(1, _HOPS + 1):
            target = f"{side}{hop + 1}" if hop < _HOPS else end
            lines.append(
                f"      - name: {side}{hop}\n        transitions:\n          - target: {target}\n"
            )
    return "".join(lines)


def _chain_class() -> type:
    from statemachine import State, StateChart

    namespace: dict[str, Any] = {"left": State(initial=True), "right": State()}
    for side in ("l", "r"):
        for hop in range(1, _HOPS + 1):
            namespace[f"{side}{hop}"] = State()
    namespace["ping"] = namespace["left"].to(namespace["l1"]) | namespace["right"].to(
        namespace["r1"]
    )
    for side, end in (("l", "right"), ("r", "left")):
        for hop in range(1, _HOPS + 1):
            target = namespace[f"{side}{hop + 1}"] if hop < _HOPS else namespace[end]
            # Not bound to a name: python-statemachine makes such a transition eventless.
            namespace[f"{side}{hop}"].to(target)
    return type("Eventless5", (StateChart,), namespace)


# -- 5. datamodel-heavy ---------------------------------------------------------------------

_DATAMODEL_CHART = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="{dm}">
  <datamodel>
    <data id="count" expr="0"/>
    <data id="total" expr="0"/>
    <data id="recent" expr="[]"/>
    <data id="account" expr="{account}"/>
  </datamodel>
  <state id="open">
    <transition event="charge" cond="{big}" target="open">
      <assign location="count" expr="count + 1"/>
      <assign location="total" expr="total + _event.data.amount * 2"/>
      <assign location="recent" expr="{recent}"/>
      <assign location="account.last" expr="_event.data.amount"/>
      <log label="big" expr="total"/>
    </transition>
    <transition event="charge" cond="{small}" target="open">
      <assign location="count" expr="count + 1"/>
      <assign location="total" expr="total + _event.data.amount"/>
      <assign location="recent" expr="{recent}"/>
      <assign location="account.last" expr="_event.data.amount"/>
    </transition>
    <transition event="close" cond="{closable}" target="closed"/>
  </state>
  <final id="closed"/>
</scxml>
"""

DATAMODEL_CHARTS = {
    "python": _DATAMODEL_CHART.format(
        dm="python",
        account="{'id': 'acc_1', 'last': 0}",
        big="_event.data['amount'] &gt; 50 and count &gt;= 0",
        small="_event.data['amount'] &lt;= 50",
        recent="(recent + [_event.data['amount']])[-10:]",
        closable="count &gt; 1000000",
    ),
    "ecmascript": _DATAMODEL_CHART.format(
        dm="ecmascript",
        account="({id: 'acc_1', last: 0})",
        big="_event.data.amount &gt; 50 &amp;&amp; count &gt;= 0",
        small="_event.data.amount &lt;= 50",
        recent="recent.concat([_event.data.amount]).slice(-10)",
        closable="count &gt; 1000000",
    ),
}
"""The datamodel-heavy chart per datamodel (the expressions differ only in spelling)."""

_DATAMODEL_YAML = """statechart:
  name: datamodel-heavy
  preamble: |
    count = 0
    total = 0
    recent = []
    account = {'id': 'acc_1', 'last': 0}
  root state:
    name: root
    initial: open
    states:
      - name: open
        transitions:
          - target: open
            event: charge
            guard: event.amount > 50 and count >= 0
            action: |
              count = count + 1
              total = total + event.amount * 2
              recent = (recent + [event.amount])[-10:]
              account = dict(account, last=event.amount)
              big = total
          - target: open
            event: charge
            guard: event.amount <= 50
            action: |
              count = count + 1
              total = total + event.amount
              recent = (recent + [event.amount])[-10:]
              account = dict(account, last=event.amount)
          - target: closed
            event: close
            guard: count > 1000000
      - name: closed
        type: final
"""


def _datamodel_class() -> type:
    from statemachine import State, StateChart

    class DatamodelHeavy(StateChart):  # type: ignore[misc]  # a peer typed as Any
        """Guards on the event's data, four updates per event (one into a nested dict)."""

        open = State(initial=True)
        closed = State(final=True)

        def __init__(self) -> None:
            self.count = 0
            self.total = 0
            self.recent: list[int] = []
            self.account: dict[str, Any] = {"id": "acc_1", "last": 0}
            self.logged: Any = None
            super().__init__()

        def big(self, amount: int) -> bool:
            return amount > 50 and self.count >= 0

        def small(self, amount: int) -> bool:
            return amount <= 50

        def closable(self) -> bool:
            return self.count > 1_000_000

        def record_big(self, amount: int) -> None:
            self.count = self.count + 1
            self.total = self.total + amount * 2
            self.recent = [*self.recent, amount][-10:]
            self.account = {**self.account, "last": amount}
            self.logged = self.total

        def record_small(self, amount: int) -> None:
            self.count = self.count + 1
            self.total = self.total + amount
            self.recent = [*self.recent, amount][-10:]
            self.account = {**self.account, "last": amount}

        charge = open.to(open, cond="big", on="record_big") | open.to(
            open, cond="small", on="record_small"
        )
        close = open.to(closed, cond="closable")

    return DatamodelHeavy


def _amount(i: int) -> int:
    return i % 100


def _datamodel_expected(n: int) -> Observation:
    total = 0
    for i in range(n):
        amount = _amount(i)
        total += amount * 2 if amount > 50 else amount
    return (n, total)


# -- the list -------------------------------------------------------------------------------

SHAPES: tuple[Shape, ...] = (
    Shape(
        key="ping-pong",
        title="one transition between two sibling states",
        scxml=_PING_PONG_SCXML,
        sismic_yaml=_PING_PONG_YAML,
        psm_class=_ping_pong_class,
        event=lambda i: ("toggle", None),
        expected=_parity(frozenset({"off"}), frozenset({"on"})),
        leaves=frozenset({"off", "on"}),
    ),
    Shape(
        key="parallel-4",
        title="a parallel state of 4 regions; one event moves every region",
        scxml=_PARALLEL_SCXML,
        sismic_yaml=_PARALLEL_YAML,
        psm_class=_parallel_class,
        event=lambda i: ("tick", None),
        expected=_parity(
            frozenset(f"a{i}" for i in range(1, _REGIONS + 1)),
            frozenset(f"b{i}" for i in range(1, _REGIONS + 1)),
        ),
        leaves=frozenset(f"{p}{i}" for p in "ab" for i in range(1, _REGIONS + 1)),
    ),
    Shape(
        key="deep-6",
        title="two 6-deep branches; one event exits 6 states and enters 6",
        scxml=_deep_scxml(),
        sismic_yaml=_deep_yaml(),
        psm_class=_deep_class,
        event=lambda i: ("cross", None),
        expected=_parity(frozenset({f"a{_DEPTH}"}), frozenset({f"b{_DEPTH}"})),
        leaves=frozenset({f"a{_DEPTH}", f"b{_DEPTH}"}),
    ),
    Shape(
        key="datamodel",
        title="guards on _event.data, 4 assignments (one nested), a log",
        scxml=DATAMODEL_CHARTS["python"],
        sismic_yaml=_DATAMODEL_YAML,
        psm_class=_datamodel_class,
        event=lambda i: ("charge", {"amount": _amount(i)}),
        expected=_datamodel_expected,
        leaves=frozenset(),
        ecmascript=DATAMODEL_CHARTS["ecmascript"],
    ),
    Shape(
        key="eventless-5",
        title="one event, then a chain of 5 eventless transitions",
        scxml=_chain_scxml(),
        sismic_yaml=_chain_yaml(),
        psm_class=_chain_class,
        event=lambda i: ("ping", None),
        expected=_parity(frozenset({"left"}), frozenset({"right"})),
        leaves=frozenset({"left", "right"}),
        sismic_settles=True,
    ),
)
"""Every shape, in the order the benchmark runs them."""

SHAPES_BY_KEY = {shape.key: shape for shape in SHAPES}

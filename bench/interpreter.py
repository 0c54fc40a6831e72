"""Interpreter benchmark: statifier's pure core against python-statemachine and sismic.

Run from the repository root::

    uv run --group bench python bench/interpreter.py [--events N] [--profile]

Two measurements, printed as tables (see ``bench/README.md`` for what each figure means):

1. Event throughput on one toggle chart, run by every engine: a compound state ``machine``
   whose children are ``off`` (initial) and ``on``, and one event ``toggle`` that flips
   between them. Every run is verified (the state alternates event by event, the final
   state matches the parity of the event count, one more event flips it back), so an
   engine that drops events cannot report a fast number.
2. Compile cost of ``statifier.compile`` on a generated chart of several hundred states.

``--profile`` runs only the statifier toggle loop under ``cProfile`` and prints the top
functions, for whoever optimizes the core.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.metadata
import platform
import pstats
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from datamodel_rows import print_datamodel_rows

SCXML_NS = "http://www.w3.org/2005/07/scxml"
EVENT = "toggle"
LEAVES = frozenset({"off", "on"})

TOGGLE_SCXML = f"""<?xml version="1.0" encoding="UTF-8"?>
<scxml xmlns="{SCXML_NS}" version="1.0" datamodel="python" initial="machine">
  <state id="machine" initial="off">
    <state id="off">
      <transition event="{EVENT}" target="on"/>
    </state>
    <state id="on">
      <transition event="{EVENT}" target="off"/>
    </state>
  </state>
</scxml>
"""
"""The toggle chart, as SCXML (statifier and python-statemachine's SCXML loader)."""

TOGGLE_SISMIC_YAML = f"""statechart:
  name: toggle
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
                event: {EVENT}
          - name: "on"
            transitions:
              - target: "off"
                event: {EVENT}
"""
"""The same chart for sismic, which reads YAML (not SCXML). Sismic needs a single root
state, so ``root`` plays the part of the SCXML ``<scxml>`` element."""

TARGETS: dict[str, float] = {
    "python-statemachine (scxml)": 10.0,
    "python-statemachine (class)": 10.0,
    "sismic (yaml)": 5.0,
}
"""Minimum statifier/peer throughput ratio we aim for, keyed by peer row name."""


class Skipped(Exception):
    """A contender cannot run here (missing package or feature); the message says why."""


class VerificationError(Exception):
    """A contender ended a run in the wrong state: its timing is not reported."""


class Contender(ABC):
    """One engine running the toggle chart.

    ``prepare`` does the one-off work (import, compile or load the chart), ``start`` makes
    a fresh started instance (untimed), ``send`` is the timed loop of ``n`` events and
    ``leaves`` reports the active states among ``off``/``on`` for verification.
    """

    name: str
    """Row label in the results table."""

    how: str
    """One-line description of how events are sent, printed under the table."""

    @abstractmethod
    def prepare(self) -> None:
        """Import the engine and build the chart once; raise ``Skipped`` if unavailable."""

    @abstractmethod
    def start(self) -> None:
        """Create a fresh instance in its initial configuration (``off``)."""

    @abstractmethod
    def send(self, n: int) -> None:
        """Send ``n`` ``toggle`` events, one at a time, each fully processed."""

    @abstractmethod
    def leaves(self) -> frozenset[str]:
        """The active states among ``off`` and ``on``."""

    def processed(self) -> int | None:
        """External events the engine reports processing since ``start``, if it counts them
        (an extra check beyond the state's parity); None if it does not."""
        return None


class StatifierCore(Contender):
    """statifier: compile once, ``initialize``, then thread the state through
    ``handle_event``. A new ``Event`` is built per event, as a host receiving events would."""

    name = "statifier (core)"
    how = "compile once; state = handle_event(state, Event(name='toggle')) per event"

    def __init__(self) -> None:
        self._machine: Any = None
        self._state: Any = None
        self._first_macrostep = 0

    def prepare(self) -> None:
        import statifier

        self._machine = statifier.compile(TOGGLE_SCXML)

    def start(self) -> None:
        import statifier

        self._state, _effects = statifier.initialize(self._machine, session_id="sess_bench")
        self._first_macrostep = self._state.macrostep

    def send(self, n: int) -> None:
        from statifier import Event, handle_event

        state = self._state
        for _ in range(n):
            state, _effects = handle_event(state, Event(name=EVENT))
        self._state = state

    def leaves(self) -> frozenset[str]:
        ids: tuple[str, ...] = self._state.active_leaf_ids()
        if len(ids) != 1:
            raise VerificationError(f"expected one active leaf, got {ids!r}")
        return frozenset(ids)

    def processed(self) -> int:
        """Each external event is one macrostep, counted by ``MachineState.macrostep``."""
        count: int = self._state.macrostep - self._first_macrostep
        return count


class StatemachineScxml(Contender):
    """python-statemachine, chart loaded from the same SCXML text with
    ``statemachine.io.load(text, format="scxml")`` (a ``StateChart`` subclass)."""

    name = "python-statemachine (scxml)"
    how = "statemachine.io.load(scxml, format='scxml') once; sm.send('toggle') per event"

    def __init__(self) -> None:
        self._cls: Any = None
        self._sm: Any = None

    def prepare(self) -> None:
        try:
            import statemachine
        except ImportError as exc:
            raise Skipped(f"python-statemachine is not installed ({exc})") from exc
        try:
            from statemachine.io import load
        except ImportError as exc:
            version = getattr(statemachine, "__version__", "?")
            raise Skipped(
                f"python-statemachine {version} has no SCXML loader (statemachine.io.load)"
            ) from exc
        self._cls = load(TOGGLE_SCXML, format="scxml")

    def start(self) -> None:
        self._sm = self._cls()

    def send(self, n: int) -> None:
        send = self._sm.send
        for _ in range(n):
            send(EVENT)

    def leaves(self) -> frozenset[str]:
        return frozenset(self._sm.configuration_values) & LEAVES


class StatemachineClass(Contender):
    """python-statemachine, chart written as a ``StateMachine`` subclass (flat: ``off`` and
    ``on`` at top level, which is if anything easier for it than the compound chart).

    Events go through the bound event method ``sm.toggle()``, the idiomatic call and a little
    faster than ``sm.send("toggle")`` in python-statemachine 3.x.
    """

    name = "python-statemachine (class)"
    how = "StateMachine subclass, toggle = off.to(on) | on.to(off); sm.toggle() per event"

    def __init__(self) -> None:
        self._cls: Any = None
        self._sm: Any = None

    def prepare(self) -> None:
        try:
            from statemachine import State, StateMachine
        except ImportError as exc:
            raise Skipped(f"python-statemachine is not installed ({exc})") from exc

        class ToggleMachine(StateMachine):  # type: ignore[misc]  # a peer typed as Any
            """off <-> on on ``toggle``."""

            off = State(initial=True)
            on = State()
            toggle = off.to(on) | on.to(off)

        self._cls = ToggleMachine

    def start(self) -> None:
        self._sm = self._cls()

    def send(self, n: int) -> None:
        toggle = self._sm.toggle
        for _ in range(n):
            toggle()

    def leaves(self) -> frozenset[str]:
        return frozenset(self._sm.configuration_values) & LEAVES


class Sismic(Contender):
    """sismic, chart from its YAML format; one ``queue`` + ``execute_once`` per event."""

    name = "sismic (yaml)"
    how = "import_from_yaml once; interpreter.queue('toggle') + execute_once() per event"

    def __init__(self) -> None:
        self._chart: Any = None
        self._interp: Any = None
        self._interpreter_cls: Any = None

    def prepare(self) -> None:
        try:
            from sismic.interpreter import Interpreter
            from sismic.io import import_from_yaml
        except ImportError as exc:
            raise Skipped(f"sismic is not installed ({exc})") from exc
        self._chart = import_from_yaml(TOGGLE_SISMIC_YAML)
        self._interpreter_cls = Interpreter

    def start(self) -> None:
        self._interp = self._interpreter_cls(self._chart)
        self._interp.execute_once()  # sismic enters the initial states on its first step

    def send(self, n: int) -> None:
        queue = self._interp.queue
        execute_once = self._interp.execute_once
        for _ in range(n):
            queue(EVENT)
            execute_once()

    def leaves(self) -> frozenset[str]:
        return frozenset(self._interp.configuration) & LEAVES


CONTENDERS: tuple[Callable[[], Contender], ...] = (
    StatifierCore,
    StatemachineScxml,
    StatemachineClass,
    Sismic,
)


@dataclass
class ThroughputResult:
    """Outcome of one contender: its timed runs, or why there are none."""

    name: str
    how: str
    events: int
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    final: str = ""
    problem: str | None = None
    skipped: bool = False

    @property
    def ok(self) -> bool:
        """Whether every run so far completed and verified."""
        return self.problem is None

    @property
    def best_seconds(self) -> float | None:
        """Wall-clock seconds of the fastest run, or None without a valid run."""
        return min(self.wall) if self.ok and self.wall else None

    @property
    def best_cpu_share(self) -> float | None:
        """Process CPU time / wall time of the fastest run: well under 100% means the run
        was descheduled (a busy machine), so its figure is pessimistic."""
        if self.best_seconds is None:
            return None
        best = self.wall.index(self.best_seconds)
        return self.cpu[best] / self.wall[best]

    @property
    def events_per_second(self) -> float | None:
        """Events per second of the fastest run, or None without a valid run."""
        best = self.best_seconds
        return None if best is None or best <= 0 else self.events / best

    def fail(self, exc: Exception) -> None:
        """Record why this contender has no figure."""
        if isinstance(exc, Skipped):
            self.skipped = True
            self.problem = f"skipped: {exc}"
        elif isinstance(exc, VerificationError):
            self.problem = f"FAILED verification: {exc}"
        else:
            self.problem = f"ERROR: {type(exc).__name__}: {exc}"


def expected_leaf(events_sent: int) -> str:
    """The leaf the toggle chart must be in after ``events_sent`` toggles from ``off``."""
    return "off" if events_sent % 2 == 0 else "on"


def check(contender: Contender, events_sent: int, when: str) -> str:
    """Raise ``VerificationError`` unless exactly the expected leaf is active (and, for an
    engine that counts them, exactly ``events_sent`` events were processed)."""
    want = expected_leaf(events_sent)
    got = contender.leaves()
    if got != {want}:
        raise VerificationError(
            f"{when}: after {events_sent} events expected {{{want!r}}}, got {set(got)!r}"
        )
    processed = contender.processed()
    if processed is not None and processed != events_sent:
        raise VerificationError(
            f"{when}: sent {events_sent} events but the engine counts {processed} macrosteps"
        )
    return want


def verify_alternation(contender: Contender, steps: int = 8) -> None:
    """On a fresh instance, check the state flips on each of the first ``steps`` events."""
    contender.start()
    check(contender, 0, "initial state")
    for sent in range(1, steps + 1):
        contender.send(1)
        check(contender, sent, "alternation check")


def timed_round(
    contenders: Sequence[Contender],
    results: Sequence[ThroughputResult],
    events: int,
    slice_events: int,
    run: int,
) -> None:
    """One timed run of ``events`` events for every contender still in the race.

    Every contender starts from a fresh instance (creation untimed). The run is cut into
    slices of ``slice_events`` events (0: one slice) handed to the engines in turn, and each
    engine's run time is the sum of its slices. Slicing makes every engine's run span the
    whole round, so when the machine's speed drifts (other load, frequency changes) all
    engines see the same drift and the ratios stay fair. The state is checked (untimed)
    after every slice, and after the run one extra event must flip it.
    """
    live = [(c, r) for c, r in zip(contenders, results, strict=True) if r.ok]
    for contender, result in live:
        try:
            contender.start()
        except Exception as exc:
            result.fail(exc)
    wall = [0.0] * len(live)
    cpu = [0.0] * len(live)
    step = slice_events if slice_events > 0 else events
    gc.collect()
    sent = 0
    while sent < events:
        k = min(step, events - sent)
        for i, (contender, result) in enumerate(live):
            if not result.ok:
                continue
            try:
                c0 = time.process_time()
                t0 = time.perf_counter()
                contender.send(k)
                wall[i] += time.perf_counter() - t0
                cpu[i] += time.process_time() - c0
                check(contender, sent + k, f"timed run {run}")
            except Exception as exc:
                result.fail(exc)
        sent += k
    for i, (contender, result) in enumerate(live):
        if not result.ok:
            continue
        try:
            result.final = check(contender, events, f"timed run {run}")
            contender.send(1)
            check(contender, events + 1, f"timed run {run}, one extra event")
        except Exception as exc:
            result.fail(exc)
            continue
        result.wall.append(wall[i])
        result.cpu.append(cpu[i])


def measure(
    contenders: Sequence[Contender], events: int, repeats: int, warmup: int, slice_events: int
) -> list[ThroughputResult]:
    """Prepare, verify and warm up every contender, then time ``repeats`` rounds (see
    ``timed_round``); the best (fastest) verified run of each engine is kept."""
    results = [ThroughputResult(c.name, c.how, events) for c in contenders]
    for contender, result in zip(contenders, results, strict=True):
        try:
            contender.prepare()
            verify_alternation(contender)
            if warmup > 0:
                contender.start()
                contender.send(warmup)
                check(contender, warmup, "warm-up")
        except Exception as exc:
            result.fail(exc)
    for run in range(1, repeats + 1):
        timed_round(contenders, results, events, slice_events, run)
    return results


def generate_chart(groups: int, children: int) -> tuple[str, int]:
    """A chart of ``groups`` compound states of ``children`` atomic children each.

    Every child has ``next`` to its next sibling (wrapping); every third child also has a
    guarded ``skip`` (``cond="x > 3"``) two siblings ahead; every other child increments
    ``x`` on entry; every compound state has ``jump`` to the next compound state (wrapping).
    Returns the SCXML text and the number of ``<state>`` elements.
    """
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<scxml xmlns="{SCXML_NS}" version="1.0" datamodel="python" initial="g0">',
        '  <datamodel><data id="x" expr="0"/></datamodel>',
    ]
    for g in range(groups):
        lines.append(f'  <state id="g{g}" initial="g{g}_s0">')
        lines.append(f'    <transition event="jump" target="g{(g + 1) % groups}"/>')
        for c in range(children):
            lines.append(f'    <state id="g{g}_s{c}">')
            if c % 2 == 0:
                lines.append('      <onentry><assign location="x" expr="x + 1"/></onentry>')
            lines.append(f'      <transition event="next" target="g{g}_s{(c + 1) % children}"/>')
            if c % 3 == 0:
                lines.append(
                    f'      <transition event="skip" cond="x &gt; 3" '
                    f'target="g{g}_s{(c + 2) % children}"/>'
                )
            lines.append("    </state>")
        lines.append("  </state>")
    lines.append("</scxml>")
    return "\n".join(lines) + "\n", groups * (children + 1)


@dataclass
class CompileResult:
    """Outcome of the compile benchmark."""

    states: int
    chars: int
    repeats: int
    best_seconds: float | None = None
    problem: str | None = None


def measure_compile(groups: int, children: int, repeats: int) -> CompileResult:
    """Time ``statifier.compile`` on the generated chart (best of ``repeats``), then check
    the compiled machine actually runs (initial leaf, ``next``, ``jump``)."""
    text, states = generate_chart(groups, children)
    result = CompileResult(states=states, chars=len(text), repeats=repeats)
    try:
        import statifier

        times: list[float] = []
        machine: Any = None
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            machine = statifier.compile(text)
            times.append(time.perf_counter() - t0)
        state, _effects = statifier.initialize(machine, session_id="sess_bench")
        steps: Sequence[tuple[str | None, str]] = (
            (None, "g0_s0"),
            ("next", "g0_s1"),
            ("jump", "g1_s0" if groups > 1 else "g0_s0"),
        )
        for event, want in steps:
            if event is not None:
                state, _effects = statifier.handle_event(state, statifier.Event(name=event))
            got = state.active_leaf_ids()
            if got != (want,):
                raise VerificationError(f"generated chart after {event!r}: {got!r} != {want!r}")
        result.best_seconds = min(times)
    except VerificationError as exc:
        result.problem = f"FAILED verification: {exc}"
    except Exception as exc:
        result.problem = f"ERROR: {type(exc).__name__}: {exc}"
    return result


def package_version(name: str) -> str:
    """Installed version of a distribution, or ``not installed``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def print_header() -> None:
    """Interpreter and package versions, so figures can be compared across machines."""
    versions = ", ".join(
        f"{name} {package_version(name)}" for name in ("statifier", "python-statemachine", "sismic")
    )
    print(f"Python {platform.python_version()} ({platform.python_implementation()}), {versions}")
    print(f"Platform: {platform.platform()}")
    print()


def print_throughput(results: Sequence[ThroughputResult], args: argparse.Namespace) -> None:
    """The per-engine table, how each row sends events, and the ratio/target table."""
    print(
        f"1. Toggle chart throughput: {args.events:,} events per run, best of {args.repeats} "
        f"runs after a {args.warmup:,}-event warm-up"
    )
    if args.slice > 0 and args.slice < args.events:
        print(
            f"(each run interleaves the engines in slices of {args.slice:,} events; "
            "a run's time is the sum of its slices)"
        )
    header = (
        f"{'engine':<30} {'events/s':>12} {'best (s)':>9} {'us/event':>9} {'cpu':>5} "
        f"{'final':>6}  all runs (s)"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        eps, best, share = r.events_per_second, r.best_seconds, r.best_cpu_share
        if eps is None or best is None or share is None:
            print(f"{r.name:<30} {'-':>12} {'-':>9} {'-':>9} {'-':>5} {'-':>6}  {r.problem}")
            continue
        us = best / r.events * 1e6
        runs = " ".join(f"{w:.3f}" for w in r.wall)
        print(
            f"{r.name:<30} {eps:>12,.0f} {best:>9.3f} {us:>9.2f} {share:>5.0%} {r.final:>6}  {runs}"
        )
    print()
    for r in results:
        print(f"  {r.name}: {r.how}")
    print()

    ours = results[0].events_per_second
    header = f"{'ratio':<42} {'value':>8} {'target':>8}  verdict"
    print(header)
    print("-" * len(header))
    for r in results[1:]:
        target = TARGETS.get(r.name)
        label = f"statifier / {r.name.removesuffix(' (yaml)')}"
        target_text = f">= {target:g}x" if target is not None else "-"
        peer = r.events_per_second
        if ours is None or peer is None:
            why = "statifier has no result" if ours is None else (r.problem or "no result")
            print(f"{label:<42} {'n/a':>8} {target_text:>8}  n/a ({why})")
            continue
        ratio = ours / peer
        verdict = "-" if target is None else ("PASS" if ratio >= target else "BELOW")
        print(f"{label:<42} {ratio:>7.2f}x {target_text:>8}  {verdict}")
    print()


def print_compile(result: CompileResult, groups: int, children: int) -> None:
    """The compile-cost line."""
    print(
        f"2. Compile cost: statifier.compile on a generated chart of {result.states} states "
        f"({groups} compound x {children} atomic children + the compounds; "
        f"{result.chars:,} chars), best of {result.repeats}"
    )
    if result.best_seconds is None:
        print(f"   {result.problem}")
    else:
        ms = result.best_seconds * 1e3
        print(f"   {ms:.2f} ms per compile, {result.states / ms:.1f} states/ms")
    print()


def run_profile(events: int, warmup: int, top: int, sort: str) -> int:
    """Run the statifier toggle loop under cProfile and print the top functions."""
    contender = StatifierCore()
    contender.prepare()
    contender.start()
    contender.send(warmup)  # warm the machine's caches, as the benchmark does
    contender.start()
    profiler = cProfile.Profile()
    profiler.enable()
    contender.send(events)
    profiler.disable()
    final = check(contender, events, "profiled run")
    print(f"statifier toggle loop under cProfile: {events:,} events, final state {final!r}")
    key = "cumulative time" if sort == "cumulative" else "own time (tottime)"
    print(f"top {top} functions by {key}")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats(sort).print_stats(top)
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--events", type=int, default=100_000, help="events per timed run (default 100000)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs, best kept (3)")
    parser.add_argument("--warmup", type=int, default=1000, help="warm-up events (1000)")
    parser.add_argument(
        "--slice",
        type=int,
        default=1000,
        help="events per slice when interleaving engines within a run; 0: no slicing (1000)",
    )
    parser.add_argument("--compile-groups", type=int, default=50, help="compound states (50)")
    parser.add_argument(
        "--compile-children", type=int, default=10, help="atomic children per compound (10)"
    )
    parser.add_argument("--compile-repeats", type=int, default=5, help="compiles, best kept (5)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="only profile the statifier toggle loop with cProfile",
    )
    parser.add_argument("--profile-top", type=int, default=25, help="functions shown (25)")
    parser.add_argument(
        "--profile-sort",
        choices=("cumulative", "tottime"),
        default="cumulative",
        help="profile sort key (cumulative)",
    )
    args = parser.parse_args(argv)
    for name in ("events", "repeats", "compile_groups", "compile_children", "compile_repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("warmup", "slice"):
        if getattr(args, name) < 0:
            parser.error(f"--{name} must not be negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit status 1 if statifier failed or any run failed verification."""
    args = parse_args(argv)
    if args.profile:
        return run_profile(args.events, args.warmup, args.profile_top, args.profile_sort)

    print_header()
    contenders = [make() for make in CONTENDERS]
    results = measure(contenders, args.events, args.repeats, args.warmup, args.slice)
    print_throughput(results, args)
    compiled = measure_compile(args.compile_groups, args.compile_children, args.compile_repeats)
    print_compile(compiled, args.compile_groups, args.compile_children)
    print_datamodel_rows()

    failed = [r for r in results if r.problem is not None and not r.skipped]
    if results[0].best_seconds is None or failed or compiled.best_seconds is None:
        print("Some measurements failed (see above).")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

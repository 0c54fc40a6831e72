"""Run every automated W3C SCXML IRP case on the engine and report pass/fail per test.

Usage (from the repository root)::

    uv run python -m tools.w3c.report            # report only
    uv run python -m tools.w3c.report --update   # also add newly passing ids to passing.txt
    uv run python -m tools.w3c.report 144 403    # only these ids
    uv run python -m tools.w3c.report --profile ecmascript [--update]

Every automated case, mandatory and optional, is run, rendered for ``--profile``
(``python``, the default, or ``ecmascript``; each has its own ratchet file), unless it needs
a datamodel profile other than the one run (ECMAScript-profile tests run only in the
``ecmascript`` profile; XPath never) or the BasicHTTP I/O processor; those are listed as
skipped with the reason.  Each case runs under a wall-clock guard (default 10 s), so a
hang in the engine cannot hang the report.  The exit status is 1 if a case listed in
``passing.txt`` failed (a ratchet regression), else 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

from tools.w3c.harness import DEFAULT_TIMEOUT, CaseResult, run_case_guarded
from tools.w3c.manifest import Case, automated, skip_reason
from tools.w3c.passing import PASSING_FILES, add_passing, read_passing
from tools.w3c.transform import PROFILES

__all__ = ["main"]


def _reason_line(result: CaseResult, limit: int = 300) -> str:
    reason = " ".join(result.reason().split())
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    """Run the report; return the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help="only run these test ids")
    parser.add_argument(
        "--update", action="store_true", help="add newly passing ids to passing.txt"
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="wall-clock seconds per case"
    )
    parser.add_argument(
        "--profile", choices=sorted(PROFILES), default="python", help="datamodel profile"
    )
    parser.add_argument(
        "--passing", type=Path, default=None, help="ratchet file (default: the profile's)"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print full details of failures"
    )
    args = parser.parse_args(argv)
    if args.passing is None:
        args.passing = PASSING_FILES[args.profile]

    cases = sorted(automated(), key=lambda case: int(case.id))
    if args.ids:
        wanted = set(args.ids)
        unknown = wanted - {case.id for case in cases}
        if unknown:
            print(f"not automated cases of the manifest: {sorted(unknown)}", file=sys.stderr)
            return 2
        cases = [case for case in cases if case.id in wanted]
    listed = set(read_passing(args.passing))

    skipped: dict[str, list[Case]] = defaultdict(list)
    results: list[tuple[Case, CaseResult]] = []
    started = time.monotonic()
    for case in cases:
        reason = skip_reason(case, profile=args.profile)
        if reason is not None:
            skipped[reason].append(case)
            continue
        result = run_case_guarded(case, timeout=args.timeout, profile=args.profile)
        results.append((case, result))
        status = "PASS" if result.passed else "FAIL"
        marker = " [in passing.txt]" if case.id in listed and not result.passed else ""
        line = f"{case.id:>4} {case.conformance:<9} {status}{marker}"
        if not result.passed:
            line += f"  {_reason_line(result)}"
        print(line, flush=True)
        if args.verbose and not result.passed:
            print("     " + result.describe().replace("\n", "\n     "))
    elapsed = time.monotonic() - started

    print()
    for reason in sorted(skipped):
        ids = " ".join(case.id for case in skipped[reason])
        print(f"skipped ({reason}, {len(skipped[reason])}): {ids}")

    passed = [case for case, result in results if result.passed]
    mandatory_total = sum(1 for case, _ in results if case.mandatory)
    mandatory_passed = sum(1 for case in passed if case.mandatory)
    optional_total = len(results) - mandatory_total
    optional_passed = len(passed) - mandatory_passed
    regressions = sorted(
        (case.id for case, result in results if case.id in listed and not result.passed),
        key=int,
    )
    print(
        f"\nmandatory: {mandatory_passed}/{mandatory_total} passed;"
        f" optional: {optional_passed}/{optional_total} passed;"
        f" skipped: {sum(len(v) for v in skipped.values())}; {elapsed:.1f} s"
    )
    if regressions:
        print(f"REGRESSIONS (listed in {args.passing.name} but failing): {' '.join(regressions)}")

    if args.update:
        added = add_passing((case.id for case in passed), args.passing)
        print(f"added to {args.passing}: {' '.join(added) if added else '(nothing new)'}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())

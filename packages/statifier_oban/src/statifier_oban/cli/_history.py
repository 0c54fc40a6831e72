"""The history commands of ``statifier-oban executions`` (ADR 25).

* ``history ID [--after SEQ | --last N] [--limit N] [--follow [--timeout D]]``: the
  execution's history entries, oldest first, a page at a time (where the next page starts
  goes to stderr); ``--follow`` goes on printing entries as their changes commit, until
  the execution ends (or ``--timeout``, or Ctrl-C);
* ``wait ID [--state S] [--status S] [--timeout 30s]``: return once the execution is in
  state ``S`` and/or has status ``S`` (woken by the commit of each change, never polling);
  status 1 with one line when it times out or can no longer get there;
* ``prune-history (--keep-last N | --older-than D) [--batch-size N]``: delete the entries
  retention does not keep, in batches of their own transactions.

With ``--json``: ``history`` prints one ``HistoryEntry.to_json`` object per entry,
``wait`` the execution's record, ``prune-history`` ``{"deleted": N}``.
"""

from __future__ import annotations

import contextlib
import sys
from datetime import timedelta

import click
from oban import Oban
from statifier.cli import kit
from statifier_persistence import STATUSES, Executions, ExecutionStatus, HistoryEntry

from ._main import database_options
from ._persistence import with_executions

HISTORY_COLUMNS = ("seq", "at", "kind", "trigger", "event", "states", "status", "did")
"""The columns of ``executions history``."""

DEFAULT_WAIT = "30s"
"""How long ``executions wait`` waits unless ``--timeout`` says otherwise."""


@click.command(cls=kit.Command, help="Print an execution's history, oldest first.")
@database_options
@click.argument("execution_id", metavar="ID")
@click.option("--after", type=click.IntRange(min=0), default=None, metavar="SEQ",
              help="the entries after this seq (the page after a page)")  # fmt: skip
@click.option("--last", type=click.IntRange(min=1), default=None, metavar="N",
              help="the newest N entries")  # fmt: skip
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, metavar="N")
@click.option("--follow", is_flag=True, help="go on printing entries as changes commit")
@click.option("--timeout", type=kit.DURATION, default=None, metavar="DURATION",
              help="with --follow: stop after this long (e.g. 10m; default: never)")  # fmt: skip
@kit.json_option
def history(
    database_url: str,
    prefix: str,
    execution_id: str,
    after: int | None,
    last: int | None,
    limit: int,
    follow: bool,
    timeout: int | None,
    as_json: bool,
) -> None:
    """``executions history``."""
    if after is not None and last is not None:
        raise click.UsageError("--after and --last choose the page two ways: give one")
    if timeout is not None and not follow:
        raise click.UsageError("--timeout is how long --follow follows: give --follow too")
    output = kit.Output(as_json)
    printer = _Printer(output)

    async def work(executions: Executions, oban: Oban) -> None:
        if last is not None:
            execution = await executions.get(execution_id)
            page = await executions.history(
                execution_id, before=execution.history_seq + 1, limit=last
            )
        else:
            page = await executions.history(execution_id, after=after, limit=limit)
        printer.entries(page.entries)
        seq = page.entries[-1].seq if page.entries else (after or 0)
        if not follow:
            if page.after is not None:
                output.note(f"more: --after {page.after}")
            return
        seconds = None if timeout is None else timeout / 1000
        following = executions.follow(execution_id, after=seq, timeout=seconds)
        async with contextlib.aclosing(following) as entries:
            async for entry in entries:
                printer.entries((entry,))

    with_executions(database_url, prefix, work)


class _Printer:
    """Prints entries as table rows (the header once) or as JSON objects."""

    def __init__(self, output: kit.Output) -> None:
        self.output = output
        self.header = True

    def entries(self, entries: tuple[HistoryEntry, ...]) -> None:
        if self.output.as_json:
            for entry in entries:
                self.output.record_json(entry.to_json())
            return
        self.output.table(HISTORY_COLUMNS, [_row(e) for e in entries], header=self.header)
        self.header = False
        sys.stdout.flush()  # a follower reads each entry as it comes


def _row(entry: HistoryEntry) -> dict[str, object]:
    """An entry as a row of the ``history`` table."""
    trigger: str = entry.trigger.source
    if entry.trigger.job_id is not None:
        trigger = f"{trigger} job {entry.trigger.job_id}"
    states = " ".join(entry.configuration_after)
    if entry.configuration_before != entry.configuration_after and entry.configuration_before:
        states = f"{' '.join(entry.configuration_before)} -> {states or '-'}"
    return {
        "seq": entry.seq,
        "at": entry.at,
        "kind": entry.kind,
        "trigger": trigger,
        "event": entry.event.name if entry.event is not None else None,
        "states": states or None,
        "status": entry.status,
        "did": describe(entry) or None,
    }


def describe(entry: HistoryEntry) -> str:
    """What the change did, in a few words per effect: ``armed hold in 7d; log ...``."""
    parts: list[str] = []
    if entry.unmatched is not None:
        parts.append(entry.unmatched)
    parts += [
        f"armed {t.send_id} ({t.event}) in {kit.text_of(kit.Duration(t.delay_ms))}"
        for t in entry.timers_armed
    ]
    parts += [f"cancelled {send_id}" for send_id in entry.timers_cancelled]
    parts += [f"invoked {i.invoke_id} ({i.type})" for i in entry.invocations_started]
    parts += [f"stopped {invoke_id}" for invoke_id in entry.invocations_cancelled]
    parts += [f"sent {s.event} to {s.target or 'itself'}" for s in entry.sends]
    for error in entry.errors:
        where = f" at line {error.line}" if error.line is not None else ""
        parts.append(f"{error.name}{where}: {error.message}")
    parts += [f"log {log.label or ''}: {kit.text_of(log.value)}" for log in entry.logs]
    for name, value in entry.detail.items():
        if name == "chart" and isinstance(value, dict):
            value = value.get("name") or value.get("identity")
        parts.append(f"{name} {kit.text_of(value)}")
    if entry.omitted:
        parts.append(f"{entry.omitted} more left out")
    return "; ".join(parts)


@click.command(cls=kit.Command, help="Wait until an execution is in a state or has a status.")
@database_options
@click.argument("execution_id", metavar="ID")
@click.option("--state", default=None, metavar="STATE", help="a state id it must be in")
@click.option(
    "--status", "statuses", type=click.Choice(STATUSES), multiple=True,
    help="a status it must have (repeatable: any of them)",
)  # fmt: skip
@click.option("--timeout", type=kit.DURATION, default=DEFAULT_WAIT, show_default=True,
              metavar="DURATION", help="how long to wait (e.g. 30s, 5m)")  # fmt: skip
@kit.json_option
def wait(
    database_url: str,
    prefix: str,
    execution_id: str,
    state: str | None,
    statuses: tuple[ExecutionStatus, ...],
    timeout: int,
    as_json: bool,
) -> None:
    """``executions wait``: status 0 once there; 1 (one line) on a timeout, or when the
    execution ended without getting there."""
    if state is None and not statuses:
        raise click.UsageError("wait for --state STATE, --status STATUS or both")
    if timeout <= 0:
        raise click.UsageError("--timeout must be longer than 0")

    async def work(executions: Executions, oban: Oban) -> None:
        execution = await executions.wait(
            execution_id, state=state, status=statuses or None, timeout=timeout / 1000
        )
        kit.Output(as_json).line(
            f"{execution.id} is {execution.status}", {"execution": execution.to_json()}
        )

    with_executions(database_url, prefix, work)


@click.command("prune-history", cls=kit.Command,
               help="Delete the history entries retention does not keep.")  # fmt: skip
@database_options
@click.option("--keep-last", type=click.IntRange(min=0), default=None, metavar="N",
              help="keep the last N entries of each execution")  # fmt: skip
@click.option("--older-than", type=kit.DURATION, default=None, metavar="DURATION",
              help="delete the entries written longer ago than this (e.g. 90d)")  # fmt: skip
@click.option("--batch-size", type=click.IntRange(min=1, max=100_000), default=1000,
              show_default=True, metavar="N", help="entries per transaction")  # fmt: skip
@kit.json_option
def prune_history(
    database_url: str,
    prefix: str,
    keep_last: int | None,
    older_than: int | None,
    batch_size: int,
    as_json: bool,
) -> None:
    """``executions prune-history``: say how many entries went."""
    if keep_last is None and older_than is None:
        raise click.UsageError("give --keep-last N, --older-than DURATION or both")

    async def work(executions: Executions, oban: Oban) -> None:
        age = None if older_than is None else timedelta(milliseconds=older_than)
        deleted = await executions.prune_history(
            keep_last=keep_last, older_than=age, batch_size=batch_size
        )
        kit.Output(as_json).line(f"deleted {deleted} history entries", {"deleted": deleted})

    with_executions(database_url, prefix, work)


COMMANDS = (history, wait, prune_history)
"""The commands this module adds to ``executions``."""

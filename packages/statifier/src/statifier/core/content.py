"""Executable content: ``<raise>``, ``<log>``, ``<assign>``, ``<if>``, ``<foreach>``,
``<script>``, ``<send>``, ``<cancel>`` (SCXML section 4), and the argument forms
(``namelist``, ``<param>``, ``<content>``, ``<donedata>``) they share with ``<invoke>``.

A block runs until its first error: the error event is queued and the rest of the
block is skipped (spec 4.9). Send targets are read by ``statifier.core.planner``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from statifier.budget import NODE_COST
from statifier.chart.durations import InvalidDuration, parse_duration
from statifier.chart.model import (
    AssignNode,
    CancelNode,
    ContentNode,
    ContentSpec,
    ForeachNode,
    IfNode,
    LogNode,
    Machine,
    Owner,
    ParamNode,
    RaiseNode,
    ScriptNode,
    SendNode,
    StateNode,
)
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core._build import (
    CHANGE_BUILDER,
    LOG_BUILDER,
    cancel,
    datamodel_change,
    log,
    send_delayed,
)
from statifier.core._run import NEGATIVE_SMALL_INT, SMALL_INT, SMALL_SCALAR_SIZE, BlockAbort, Run
from statifier.core.events import MAX_NAME_LENGTH, Event
from statifier.datamodel import (
    DirectEvaluation,
    Expression,
    Location,
    WritesFailed,
    datamodel_for,
    variables_of,
)
from statifier.values import DIGITS_PER_256_BITS, brief, entry_key_size, flat_list_measure


class ContentExecutor(Run):
    """Runs blocks of executable content against the working copy."""

    __slots__ = ()

    def execute_block(self, nodes: tuple[ContentNode, ...]) -> None:
        """Run a block; an error ends the block, never the caller (spec 4.9)."""
        if not nodes:
            return
        self.replayable = False
        try:  # noqa: SIM105 - cheaper than contextlib.suppress on this hot path
            self.execute_nodes(nodes)
        except BlockAbort:
            pass
        self.node = None

    def execute_nodes(self, nodes: tuple[ContentNode, ...], start: int = 0) -> None:
        """Run nodes in order (from ``start``: a direct or kept run ran the first ones and
        stopped before that one); ``BlockAbort`` propagates to the enclosing block.

        Every node spends ``NODE_COST`` steps of the macrostep budget, and none runs once a
        per-call budget is exhausted. Each node runs through its step (``steps_of``).
        """
        if type(self.datamodel) is not dict:
            self.execute_kept(nodes, start)
            return
        budget = self.budget
        # (Not the queue: the first event queued replaces the empty one, see ``queue``.)
        effects, limits = self.effects, self.limits
        max_effects, max_queue = limits.max_effects, limits.max_queue
        # ``compiled``, inlined: once per block.
        memo = self.machine._cache.get(_BLOCKS)
        known = None if memo is None else memo.get(id(nodes))
        if known is None or known[0] is not nodes:
            known = compiled(self.machine, nodes)
        steps = known[1]
        direct = known[2]
        if start:
            steps = steps[start:]
        elif direct is not None and not self.trace:
            done = self.run_direct(direct)
            if done == len(steps):
                return
            if done:
                steps = steps[done:]
        for node, step in steps:
            self.node = node
            self.line = node.line
            budget.steps -= NODE_COST
            if (
                budget.steps < 0
                or budget.exhausted is not None
                or len(effects) >= max_effects
                or len(self.internal_queue) >= max_queue
            ):
                self.check_budget()
            step(self, node)

    def run_direct(self, program: DirectRun) -> int:  # noqa: C901 - one loop, inlined
        """Run the nodes of ``program`` (a block's first nodes) as ``execute_nodes`` would
        run them through their steps, evaluating their expressions straight against the
        run's context of the datamodel (ADR 20): the same charges, effects and errors,
        with no call a node but its expression's. Stops before a node the budgets would
        stop (the caller's loop runs that one, as ever); returns how many nodes it ran.
        Never in trace mode (changes record no values here)."""
        budget = self.budget
        effects = self.effects
        limits = self.limits
        if len(self.internal_queue) >= limits.max_queue:
            return 0
        ops = program.ops
        # Each node adds one effect (an error ends the block): the last that may run.
        end = limits.max_effects - len(effects)
        if end > len(ops):
            end = len(ops)
        context = self.context
        if context is None:
            context = self.context = program.direct.context(self.datamodel, self.in_state)
        limit = program.limit
        datamodel = self.datamodel
        macrostep, microstep, rounds = self.macrostep, self.microstep, self.round
        done = 0
        node: Any = None
        value: Any = None
        # The node's charge and its expression's are taken off together, after it is
        # evaluated (nothing reads the budget meanwhile): every arithmetic on the large
        # remaining count makes a new int, and what an expression spends is small.
        limit_after_node = limit + NODE_COST
        while done < end:
            steps = budget.steps
            if steps < NODE_COST or budget.exhausted is not None:
                break  # the loop's check fires: ``execute_nodes`` runs this node
            node, kind, evaluator, expr, location, c_index, owner, growth = ops[done]
            # ``Expression.evaluate``, without the wrapper: the same allowance and charge.
            allowance = limit if steps > limit_after_node else steps - NODE_COST
            if evaluator is None:
                value = None
                budget.steps = steps - NODE_COST
            else:
                context.steps = allowance
                try:
                    value = evaluator(context)
                except Exception as exc:
                    budget.steps = steps - NODE_COST
                    budget.spend(allowance - context.steps)
                    self.node, self.line = node, node.line
                    self.evaluation_failed(expr, program.direct.failure(exc))
                steps = budget.steps = steps - (NODE_COST + (allowance - context.steps))
                if steps < 0 and budget.exhausted is None:
                    budget.exhausted = "steps"
            if kind is _LOG:
                value_type = type(value)
                if value is None or (value_type is str and len(value) < 256):
                    budget.output -= 0 if value is None else len(value) + 2  # ``ship``
                elif (
                    value_type is int
                    and NEGATIVE_SMALL_INT < value < SMALL_INT
                    and (size := (value.bit_length() * DIGITS_PER_256_BITS >> 8) + 2)
                    <= budget.output
                ):
                    # ``ship`` of a small int (``measure``'s count, one step), as a kept
                    # run has it.
                    budget.output -= size
                    budget.steps -= 1
                    if budget.steps < 0 and budget.exhausted is None:
                        budget.exhausted = "steps"
                else:
                    self.node, self.line = node, node.line
                    value = self.ship(value)
                effect = LOG_BUILDER()
                effect.label = location
                effect.value = value
                effect.c_index = c_index
                effect.owner = owner
                effect.macrostep = macrostep
                effect.microstep = microstep
                effect.round = rounds
                effect.__class__ = fx.Log
                effects.append(effect)
                done += 1
                continue
            root = location.root
            if kind is not _ASSIGN or root not in datamodel:
                root_value = datamodel.get(root) if kind is not _ASSIGN else None
                if type(root_value) is dict and kind is not _INTO:
                    # ``Run.write`` of one spelled-out key into a dict (``account.last``), as
                    # the hook's ``key`` has it: the copy's steps, then the cap.
                    key: str = kind  # type: ignore[assignment] # not _ASSIGN, not _INTO
                    units = len(root_value) + 1
                    if units <= limit and units <= budget.steps:
                        copy = dict(root_value)
                        copy[key] = value
                        budget.steps -= units  # ``spend``: it cannot go below zero here
                        bound = self.bound
                        if bound is None:
                            bound = self.bound = self.carried_bound()
                        value_type = type(value)
                        if (
                            (value_type is int and NEGATIVE_SMALL_INT < value < SMALL_INT)
                            or value_type is bool
                            or value is None
                        ) and (grown := bound + growth) <= limits.cap:
                            self.bound = grown
                        else:
                            self.node, self.line = node, node.line
                            try:
                                self.admit(root, (key,), value, copy)
                            except Exception as exc:
                                what = f"cannot assign to {brief(location.source)}"
                                self.raise_error("error.execution", self.failure(what, exc))
                                raise BlockAbort from None
                        datamodel[root] = copy
                        effect = CHANGE_BUILDER()
                        effect.location = location.source
                        effect.path = (key,)
                        effect.new_value = fx.NOT_RECORDED
                        effect.prior_value = fx.NOT_RECORDED
                        effect.c_index = c_index
                        effect.owner = owner
                        effect.macrostep = macrostep
                        effect.microstep = microstep
                        effect.round = rounds
                        effect.__class__ = fx.DatamodelChange
                        effects.append(effect)
                        done += 1
                        continue
                self.node, self.line = node, node.line
                self.write(location, value, c_index, owner)  # (it reports an undeclared root)
                done += 1
                continue
            # ``Run.admit`` for a small scalar, as ``assign_step`` has it.
            bound = self.bound
            if bound is None:
                bound = self.bound = self.carried_bound()
            value_type = type(value)
            if (
                (value_type is int and NEGATIVE_SMALL_INT < value < SMALL_INT)
                or value_type is bool
                or value is None
            ) and (grown := bound + growth) <= limits.cap:
                self.bound = grown
            elif (
                value_type is list
                and (flat := flat_list_measure(value)) is not None
                and (grown := bound + flat[0]) <= limits.cap
            ):
                # ``Run.admit`` of a list of scalars of one kind that fits: ``measure``'s
                # count and work, without its calls.
                budget.steps -= flat[1]
                self.bound = grown
            else:
                self.node, self.line = node, node.line
                try:
                    self.admit(root, (), value, value)
                except Exception as exc:
                    what = f"cannot assign to {brief(location.source)}"
                    self.raise_error("error.execution", self.failure(what, exc))
                    raise BlockAbort from None
            datamodel[root] = value
            effect = CHANGE_BUILDER()
            effect.location = location.source
            effect.path = ()
            effect.new_value = fx.NOT_RECORDED
            effect.prior_value = fx.NOT_RECORDED
            effect.c_index = c_index
            effect.owner = owner
            effect.macrostep = macrostep
            effect.microstep = microstep
            effect.round = rounds
            effect.__class__ = fx.DatamodelChange
            effects.append(effect)
            done += 1
        if done:
            node = ops[done - 1][0]
            self.node, self.line = node, node.line
        return done

    def execute_kept(self, nodes: tuple[ContentNode, ...], start: int = 0) -> None:
        """``execute_nodes`` over variables their datamodel keeps (ADR 22): each run of
        ``<assign>`` (and a ``<log>`` ending it) goes to the datamodel in one call, as far
        as the budgets let it go; a node a run stops before runs alone (trace mode runs
        every node alone, for the values it records). From ``start`` (a run stopped
        before that node), that node runs alone first."""
        runs = None if self.trace else kept_runs(self.machine, nodes)
        steps = None  # worked out only when a node runs alone
        budget = self.budget
        effects, limits = self.effects, self.limits
        index, end = start, len(nodes)
        alone = start > 0
        while index < end:
            run = None if runs is None or alone else runs[index]
            alone = False
            if run is not None:
                done = self.run_kept(run)
                index += done
                if done == len(run.nodes):
                    continue
            # One node alone, as ``execute_nodes`` runs each.
            if steps is None:
                steps = steps_of(self.machine, nodes)
            node, step = steps[index]
            self.node = node
            self.line = node.line
            budget.steps -= NODE_COST
            if (
                budget.steps < 0
                or budget.exhausted is not None
                or len(effects) >= limits.max_effects
                or len(self.internal_queue) >= limits.max_queue
            ):
                self.check_budget()
            step(self, node)
            index += 1

    def run_kept(self, run: KeptRun) -> int:
        """Run as much of ``run`` as the budgets allow in one datamodel call, with the
        charges, effects and errors each node would have alone; the number of nodes run."""
        budget = self.budget
        limits = self.limits
        datamodel: Any = self.datamodel
        if budget.exhausted is not None or len(self.internal_queue) >= limits.max_queue:
            return 0
        # Each node charges NODE_COST, then its call; both checks pass while steps remain.
        # (Compared by products and sums of small counts: a quotient or a difference of
        # the large remaining counts would make a new int every event.)
        count = len(run.nodes)
        per_node = NODE_COST + datamodel.call_cost
        if budget.steps < count * per_node:
            count = budget.steps // per_node
        made = len(self.effects)
        if made + count > limits.max_effects:
            count = limits.max_effects - made
        if count <= 0:
            return 0
        self.replayable = False
        writes = len(run.writes)
        try:
            ran: tuple[int, Any] = datamodel.assign_all(
                run.writes, run.log, count, self.in_state, budget
            )
        except WritesFailed as failed:
            budget.steps -= NODE_COST * (failed.done + 1)
            self.record_kept(run, failed.done)
            node = run.nodes[failed.done]
            self.node, self.line = node, node.line
            what = (
                f"cannot assign to {brief(node.location.source)}"
                if type(node) is AssignNode
                else brief(run.log.source if run.log is not None else "")
            )
            self.raise_error("error.execution", self.failure(what, failed.error))
            raise BlockAbort from None
        done, value = ran
        budget.steps -= NODE_COST * done
        # ``record_kept``, inlined: once a run.
        effects = self.effects
        macrostep, microstep, rounds = self.macrostep, self.microstep, self.round
        unrecorded = fx.NOT_RECORDED
        change = fx.DatamodelChange
        changes = run.changes
        for location, c_index, owner in changes if done >= writes else changes[:done]:
            # ``datamodel_change``, inlined (as ``run_direct`` builds its effects).
            effect = CHANGE_BUILDER()
            effect.location = location
            effect.path = ()
            effect.new_value = unrecorded
            effect.prior_value = unrecorded
            effect.c_index = c_index
            effect.owner = owner
            effect.macrostep = macrostep
            effect.microstep = microstep
            effect.round = rounds
            effect.__class__ = change
            effects.append(effect)
        if done > writes:
            node = run.nodes[writes]
            self.node, self.line = node, node.line
            value_type = type(value)
            if value is None or (value_type is str and len(value) < 256):
                budget.output -= 0 if value is None else len(value) + 2  # ``ship``
            elif (
                value_type is int
                and NEGATIVE_SMALL_INT < value < SMALL_INT
                and (size := (value.bit_length() * DIGITS_PER_256_BITS >> 8) + 2) <= budget.output
            ):
                # ``ship`` of a small int (``measure``'s count, one step).
                budget.output -= size
                steps = budget.steps = budget.steps - 1
                if steps < 0 and budget.exhausted is None:
                    budget.exhausted = "steps"
            else:
                value = self.ship(value)
            # ``log``, inlined (as ``run_direct`` builds its effects).
            effect = LOG_BUILDER()
            effect.label = node.label  # type: ignore[attr-defined] # a run ends with its log
            effect.value = value
            effect.c_index = node.c_index
            effect.owner = node.owner
            effect.macrostep = macrostep
            effect.microstep = microstep
            effect.round = rounds
            effect.__class__ = fx.Log
            effects.append(effect)
        elif done:
            node = run.nodes[done - 1]
            self.node, self.line = node, node.line
        return done

    def record_kept(self, run: KeptRun, count: int) -> None:
        """The ``DatamodelChange`` of each of the first ``count`` writes of ``run`` (no
        values: a run never goes to the engine in trace mode)."""
        append = self.effects.append
        macrostep, microstep, rounds = self.macrostep, self.microstep, self.round
        for location, c_index, owner in run.changes[:count]:
            append(
                datamodel_change(
                    location,
                    (),
                    fx.NOT_RECORDED,
                    fx.NOT_RECORDED,
                    c_index,
                    owner,
                    macrostep,
                    microstep,
                    rounds,
                )
            )
        if count:
            node = run.nodes[count - 1]
            self.node, self.line = node, node.line

    def exec_raise(self, node: RaiseNode) -> None:
        self.queue().append(Event(name=node.event, type="internal"))

    def exec_log(self, node: LogNode) -> None:
        expr = node.expr
        value = None
        if expr is not None:
            self.replayable = False  # ``evaluate``, inlined as in ``exec_assign``
            try:
                value = expr.evaluate(self.datamodel, self.in_state, self.budget)
            except Exception as exc:
                self.evaluation_failed(expr, exc)
            value = self.ship(value)
        self.effects.append(
            log(
                node.label,
                value,
                node.c_index,
                node.owner,
                self.macrostep,
                self.microstep,
                self.round,
            )
        )

    def exec_assign(self, node: AssignNode) -> None:
        """Any ``<assign>`` (``assign_step`` compiles the common one into a step of its own)."""
        if type(self.datamodel) is not dict:
            self.assign_kept(node)
            return
        expr = node.expr
        value = node.value if expr is None else self.evaluate(expr)
        self.write(node.location, value, node.c_index, node.owner)

    def assign_kept(self, node: AssignNode) -> None:
        """``<assign>`` into kept variables (ADR 22): the expression's value is stored in
        place, never copied through Python, so it may stay the very object it was."""
        self.replayable = False
        location = node.location
        root = location.root
        if root[:1] == "_" or root not in self.datamodel:
            self.undeclared(location)
        self.write_kept(location, node.expr, node.value, node.c_index, node.owner)

    def exec_if(self, node: IfNode) -> None:
        for cond, body in node.branches:
            if cond is None or self.condition(cond):
                self.execute_nodes(body)
                return

    def exec_foreach(self, node: ForeachNode) -> None:
        if type(self.datamodel) is not dict:
            self.foreach_kept(node)
            return
        array = self.evaluate(node.array)
        if not isinstance(array, list):
            self.raise_error(
                "error.execution", f"foreach array {brief(node.array.source)} is not a list"
            )
            raise BlockAbort
        budget = self.budget
        for position, item in enumerate(list(array)):
            budget.steps -= NODE_COST
            self.check_budget()
            self.bind(node.item, item, node.c_index, node.owner)
            if node.index is not None:
                self.bind(node.index, position, node.c_index, node.owner)
            self.execute_nodes(node.body)

    def foreach_kept(self, node: ForeachNode) -> None:
        """``<foreach>`` over kept variables (ADR 22): the item is the array's very element
        (the array is copied shallowly, as the spec says), bound in place."""
        datamodel: Any = self.datamodel
        self.replayable = False
        try:
            length = datamodel.foreach_array(node.array, self.in_state, self.budget)
        except Exception as exc:
            self.evaluation_failed(node.array, exc)
        if length is None:
            self.raise_error(
                "error.execution", f"foreach array {brief(node.array.source)} is not a list"
            )
            raise BlockAbort
        budget = self.budget
        try:
            for position in range(length):
                budget.steps -= NODE_COST
                self.check_budget()
                for name in (node.item, node.index):
                    if name is not None:
                        self.bindable(name)
                try:
                    datamodel.foreach_item(node.item, node.index, position)
                except Exception as exc:
                    self.raise_error("error.execution", f"cannot bind {brief(node.item)}: {exc}")
                    raise BlockAbort from None
                for name in (node.item, node.index):
                    if name is not None:
                        value = datamodel.export(name) if self.trace else None
                        self.effects.append(
                            self.change(name, (name,), value, None, node.c_index, node.owner)
                        )
                self.execute_nodes(node.body)
        finally:
            datamodel.foreach_end()

    def exec_script(self, node: ScriptNode) -> None:
        self.run_script(node.script, node.c_index, node.owner)

    def exec_cancel(self, node: CancelNode) -> None:
        if node.sendidexpr is not None:
            sendid = self.evaluate(node.sendidexpr)
            if not isinstance(sendid, str):
                self.raise_error(
                    "error.execution", f"cancel sendid must be a string, not {brief(sendid)}"
                )
                raise BlockAbort
        else:
            assert node.sendid is not None  # noqa: S101 - compiled: sendid or sendidexpr
            sendid = node.sendid
        self.timer_counter += 1
        self.effects.append(
            cancel(
                sendid,
                node.c_index,
                node.owner,
                self.timer_counter,
                self.caller_context,
                self.macrostep,
                self.microstep,
                self.round,
            )
        )

    def exec_send(self, node: SendNode) -> None:
        # The id is minted (and idlocation written) before anything can fail, so a rejected
        # send still consumes an id and its error event carries it (W3C test 332).
        change: fx.DatamodelChange | None = None
        if node.id is not None:
            send_id, from_author = node.id, True
        else:
            self.send_counter += 1
            send_id, from_author = f"send_{self.send_counter}", False
            if node.idlocation is not None:
                change = self.write(node.idlocation, send_id, node.c_index, node.owner, emit=False)
        try:
            name = self.evaluate(node.eventexpr) if node.eventexpr is not None else node.event
            target = self.evaluate(node.targetexpr) if node.targetexpr is not None else node.target
            send_type = self.evaluate(node.typeexpr) if node.typeexpr is not None else node.type
            delay_ms = node.delay_ms
            if node.delayexpr is not None:
                delay_ms = self.delay_value(self.evaluate(node.delayexpr))
            data = self.ship(
                self.content_value(node.content)
                if node.content is not None
                else self.event_data_fields(node.namelist, node.params) or None
            )
        except BlockAbort:
            self.retag_last_error(send_id)
            raise
        parsed = self.send_target(name, target, send_type, send_id)
        if name is None:
            name = ""  # a BasicHTTP send without an event name (send_target allows it)
        if change is not None:
            self.effects.append(change)
        if delay_ms:
            self.timer_counter += 1
            self.effects.append(
                send_delayed(
                    name,
                    target,
                    send_type,
                    data,
                    send_id,
                    delay_ms,
                    node.c_index,
                    node.owner,
                    self.timer_counter,
                    from_author,
                    self.caller_context,
                    self.macrostep,
                    self.microstep,
                    self.round,
                )
            )
        elif isinstance(parsed, planner.InternalTarget):
            self.queue().append(
                planner.internal_send_event(self.session_id, name, data, send_id, from_author)
            )
        else:
            self.effects.append(
                fx.Send(
                    event=name,
                    target=target,
                    type=send_type,
                    data=data,
                    send_id=send_id,
                    c_index=node.c_index,
                    owner=node.owner,
                    id_from_author=from_author,
                    caller_context=self.caller_context,
                    **self.counters(),
                )
            )

    def send_target(self, name: Any, target: Any, send_type: Any, send_id: str) -> planner.Target:
        """The parsed target of a send whose name, target and type were evaluated; raises
        the chart's error and aborts the block when they are unusable (SCXML 6.2, D.2)."""
        problem = _send_problem(name, target, send_type)
        if problem is not None:
            self.raise_error("error.execution", problem, sendid=send_id)
            raise BlockAbort
        http = _basic_http(send_type)
        if http and target is None:
            # SCXML D.2: a BasicHTTP send without a target is a communication error.
            message = "a BasicHTTP send needs a target URL"
            self.raise_error("error.communication", message, send_id)
            raise BlockAbort
        parsed = planner.parse_target(target, self.session_id, send_type)
        if isinstance(parsed, planner.UnsupportedTarget):
            kind = "an http or https URL" if http else "a valid SCXML target"
            message = f"send target {brief(target)} is not {kind}"
            self.raise_error("error.execution", message, send_id)
            raise BlockAbort
        if not self.reachable(target, parsed):
            message = f"send target {brief(target)} is unreachable"
            self.raise_error("error.communication", message, send_id)
            raise BlockAbort
        return parsed

    def reachable(self, target: str | None, parsed: planner.Target) -> bool:
        """Judge a target against the routes snapshot (True when there is none)."""
        # An http(s) URL is the host's to judge (its allow-list), when it POSTs.
        if self.routes is None or isinstance(
            parsed, planner.SelfTarget | planner.InternalTarget | planner.HttpTarget
        ):
            return True
        if isinstance(parsed, planner.InvocationTarget):
            return parsed.invoke_id in self.invocations.values()
        return target in self.routes

    def retag_last_error(self, send_id: str) -> None:
        """Give the error event a failed send argument just queued the send's id."""
        queue = self.internal_queue
        if queue:
            last = queue[-1]
            if last.name == "error.execution" and last.sendid is None:
                self.queue()[-1] = replace(last, sendid=send_id)
                announced = self.effects[-1]
                if isinstance(announced, fx.ErrorRaised) and announced.sendid is None:
                    self.effects[-1] = replace(announced, sendid=send_id)

    def delay_value(self, value: Any) -> int:
        if isinstance(value, str):
            try:
                return parse_duration(value)
            except InvalidDuration as exc:
                self.raise_error("error.execution", str(exc))
                raise BlockAbort from None
        self.raise_error(
            "error.execution", f"a delay must be a duration string like '5s', not {brief(value)}"
        )
        raise BlockAbort

    def event_data_fields(
        self, namelist: tuple[tuple[str, Expression], ...], params: tuple[ParamNode, ...]
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for name, expr in namelist:
            fields[name] = self.evaluate(expr)
        for param in params:
            fields[param.name] = self.evaluate(param.value)
        return fields

    def content_value(self, content: ContentSpec) -> Any:
        if content.expr is not None:
            return self.evaluate(content.expr)
        return content.value

    def evaluate_donedata(self, state: StateNode) -> Any:
        """Spec 5.5: a failed donedata evaluation raises an error and gives no data."""
        done = state.donedata
        if done is None:
            return None
        self.line = state.line
        try:
            if done.content is not None:
                return self.ship(self.content_value(done.content))
            return self.ship(self.event_data_fields((), done.params))
        except BlockAbort:
            return None


def _basic_http(send_type: Any) -> bool:
    """Whether a send's evaluated type is the BasicHTTP Event I/O Processor's."""
    return isinstance(send_type, str) and send_type in planner.BASIC_HTTP_SEND_TYPES


def _send_problem(name: Any, target: Any, send_type: Any) -> str | None:
    """Why a send's evaluated name, target or type is unusable, or None.

    A BasicHTTP send may have no name (None: its POST carries no ``_scxmleventname``).
    """
    if name is not None or not _basic_http(send_type):
        if not isinstance(name, str) or not name:
            return f"send event name must be a non-empty string, not {brief(name)}"
        if len(name) > MAX_NAME_LENGTH:
            return f"send event name is longer than {MAX_NAME_LENGTH} characters"
    if send_type is not None and (
        not isinstance(send_type, str) or send_type not in planner.SEND_TYPES
    ):
        return f"send type {brief(send_type)} is not supported"
    if target is not None and not isinstance(target, str):
        return f"send target must be a string, not {brief(target)}"
    return None


Step = Callable[[ContentExecutor, Any], None]
"""Runs one node of executable content: ``step(run, node)``."""


def assign_step(node: AssignNode, kept: bool) -> Step:
    """The step of an ``<assign>`` of an expression: for a variable itself (no path), one
    closure that evaluates, checks the datamodel cap and records the change (``Run.write``
    and ``Run.admit``, inlined for that case); into a path, the evaluation inlined before
    ``Run.write``; ``exec_assign`` for the rest. One ``<assign>`` per node is the bulk of a
    datamodel chart's step."""
    expr = node.expr
    location = node.location
    root = location.root
    if kept or expr is None or root[:1] == "_":
        return ContentExecutor.exec_assign
    evaluate = expr.evaluate
    source = location.source
    c_index, owner = node.c_index, node.owner
    if not location.plain:

        def assign_into(run: ContentExecutor, node: AssignNode) -> None:
            run.replayable = False
            try:
                value = evaluate(run.datamodel, run.in_state, run.budget)
            except Exception as exc:  # nothing may escape the core as a Python exception
                run.evaluation_failed(expr, exc)
            run.write(location, value, c_index, owner)

        return assign_into

    def assign(run: ContentExecutor, node: AssignNode) -> None:
        run.replayable = False
        datamodel = run.datamodel
        try:
            value = evaluate(datamodel, run.in_state, run.budget)
        except Exception as exc:  # nothing may escape the core as a Python exception
            run.evaluation_failed(expr, exc)
        if root not in datamodel:
            run.write(location, value, c_index, owner)  # it reports the error
            return
        prior = datamodel[root]
        try:
            # ``Run.admit`` for a small scalar: an upper bound of its size, no walk.
            bound = run.bound
            if bound is None:
                bound = run.bound = run.carried_bound()
            kind = type(value)
            if (
                (kind is int and NEGATIVE_SMALL_INT < value < SMALL_INT)
                or kind is bool
                or value is None
            ) and (grown := bound + SMALL_SCALAR_SIZE) <= run.limits.cap:
                run.bound = grown
            else:
                run.admit(root, (), value, value)
        except Exception as exc:
            run.raise_error(
                "error.execution", run.failure(f"cannot assign to {brief(source)}", exc)
            )
            raise BlockAbort from None
        datamodel[root] = value
        traced = run.trace
        run.effects.append(
            datamodel_change(
                source,
                (),
                value if traced else fx.NOT_RECORDED,
                prior if traced else fx.NOT_RECORDED,
                c_index,
                owner,
                run.macrostep,
                run.microstep,
                run.round,
            )
        )

    return assign


def _method(executor: Step) -> Callable[[Any, bool], Step]:
    return lambda node, kept: executor


_STEPS: dict[type, Callable[[Any, bool], Step]] = {
    RaiseNode: _method(ContentExecutor.exec_raise),
    LogNode: _method(ContentExecutor.exec_log),
    AssignNode: assign_step,
    IfNode: _method(ContentExecutor.exec_if),
    ForeachNode: _method(ContentExecutor.exec_foreach),
    ScriptNode: _method(ContentExecutor.exec_script),
    SendNode: _method(ContentExecutor.exec_send),
    CancelNode: _method(ContentExecutor.exec_cancel),
}
"""Per node type, what makes a node's step (given the node, and whether the machine's
datamodel keeps its variables itself)."""


@dataclass(frozen=True, slots=True)
class KeptRun:
    """A run of ``<assign>`` nodes (and a ``<log>`` with an ``expr`` ending it) that a
    datamodel keeping its variables runs in one call (``KeptVariables.assign_all``)."""

    nodes: tuple[ContentNode, ...]
    writes: tuple[tuple[Location, Expression | None, Any], ...]
    log: Expression | None
    changes: tuple[tuple[str, int, Owner], ...]
    """Per write, what its ``DatamodelChange`` says of it: its location's source, its
    ``c_index`` and owner."""


_RUNS = "kept runs"
"""The key, in a machine's ``_cache``, of the runs of its blocks (by the block's id)."""


def kept_runs(machine: Machine, nodes: tuple[ContentNode, ...]) -> tuple[KeptRun | None, ...]:
    """For each node of a block, the run starting there (None: none, or one node alone).

    A run is two or more nodes: ``<assign>`` nodes, perhaps ended by a ``<log>`` with an
    ``expr``. Worked out once per block (blocks live as long as their machine)."""
    memo: dict[int, tuple[Any, tuple[KeptRun | None, ...]]] = machine._cache.setdefault(_RUNS, {})
    known = memo.get(id(nodes))
    if known is not None and known[0] is nodes:
        return known[1]
    runs: list[KeptRun | None] = [None] * len(nodes)
    start = 0
    while start < len(nodes):
        end = start
        while end < len(nodes) and type(nodes[end]) is AssignNode:
            end += 1
        tail = nodes[end] if end < len(nodes) else None
        last = end + 1 if type(tail) is LogNode and tail.expr is not None else end
        for first in range(start, last):
            if last - first >= 2:
                assigns: list[AssignNode] = [n for n in nodes[first:end] if type(n) is AssignNode]
                runs[first] = KeptRun(
                    nodes[first:last],
                    tuple((n.location, n.expr, n.value) for n in assigns),
                    tail.expr if last > end else None,  # type: ignore[union-attr]
                    tuple((n.location.source, n.c_index, n.owner) for n in assigns),
                )
        start = max(last, start + 1)
    found = tuple(runs)
    memo[id(nodes)] = (nodes, found)
    return found


_BLOCKS: Final = "blocks"
"""The key, in a machine's ``_cache``, of the compiled blocks, by the identity of the
node tuple (a machine's blocks live as long as it does)."""


type Compiled = tuple[
    tuple[ContentNode, ...], tuple[tuple[ContentNode, Step], ...], "DirectRun | None"
]
"""A block compiled: the block, each node with its step, and the run of its first nodes
``ContentExecutor.run_direct`` takes (None: none)."""


def steps_of(
    machine: Machine, nodes: tuple[ContentNode, ...]
) -> tuple[tuple[ContentNode, Step], ...]:
    """Each node of ``nodes`` with its step, compiled once per machine and block."""
    return compiled(machine, nodes)[1]


def compiled(machine: Machine, nodes: tuple[ContentNode, ...]) -> Compiled:
    """The block ``nodes`` compiled (its steps and its direct run), once per machine."""
    memo: dict[int, Compiled] = machine._cache.get(_BLOCKS) or machine._cache.setdefault(
        _BLOCKS, {}
    )
    known = memo.get(id(nodes))
    if known is not None and known[0] is nodes:
        return known
    # A datamodel that keeps its variables itself (ADR 22) writes them in its own way.
    kept = variables_of(machine) is not None
    steps = tuple((node, _STEPS[type(node)](node, kept)) for node in nodes)
    found: Compiled = (nodes, steps, direct_run(machine, nodes))
    memo[id(nodes)] = found
    return found


_ASSIGN: Final = 0
"""A direct run's ``<assign>`` of an expression into a variable itself."""
_INTO: Final = 1
"""A direct run's ``<assign>`` of an expression into a path (written by ``Run.write``);
into one spelled-out key of a dict (``DirectEvaluation.key``), the kind is that key."""
_LOG: Final = 2
"""A direct run's ``<log>``."""


@dataclass(frozen=True, slots=True)
class DirectRun:
    """The first nodes of a block, for ``ContentExecutor.run_direct``: per node, the node,
    its kind, its expression's code and the expression, its location (a ``<log>``'s
    label), ``c_index``, owner and what a small scalar it writes adds to the datamodel's
    size bound (``SMALL_SCALAR_SIZE`` and a spelled-out key's ``entry_key_size``); and the
    datamodel's hook with its step limit."""

    ops: tuple[tuple[Any, int | str, Any, Any, Any, int, Any, int], ...]
    direct: DirectEvaluation
    limit: int


_DIRECT: Final = "direct"
"""The key, in a machine's ``_cache``, of its datamodel's ``DirectEvaluation`` (False:
none, or variables the datamodel keeps)."""


def direct_of(machine: Machine) -> DirectEvaluation | None:
    """``machine``'s datamodel as a ``DirectEvaluation`` (ADR 20), or None."""
    found = machine._cache.get(_DIRECT)
    if found is None:
        datamodel = datamodel_for(machine.datamodel)
        found = machine._cache[_DIRECT] = (
            datamodel
            if variables_of(machine) is None and isinstance(datamodel, DirectEvaluation)
            else False
        )
    return found if isinstance(found, DirectEvaluation) else None


def direct_run(machine: Machine, nodes: tuple[ContentNode, ...]) -> DirectRun | None:
    """The direct run of a block: its longest beginning of ``<assign>`` nodes of an
    expression into a variable that is no system variable, and ``<log>`` nodes, whose
    expressions the datamodel evaluates directly (None: none, or one node)."""
    direct = direct_of(machine)
    if direct is None:
        return None
    ops: list[tuple[Any, int | str, Any, Any, Any, int, Any, int]] = []
    for node in nodes:
        if type(node) is AssignNode:
            expr = node.expr
            if expr is None or node.location.root[:1] == "_":
                break
            evaluator = direct.evaluator(expr)
            if evaluator is None:
                break
            location = node.location
            key = direct.key(location)
            kind: int | str = _ASSIGN if location.plain else _INTO if key is None else key
            growth = SMALL_SCALAR_SIZE + (0 if key is None else entry_key_size(key))
            ops.append((node, kind, evaluator, expr, location, node.c_index, node.owner, growth))
        elif type(node) is LogNode:
            expr = node.expr
            evaluator = None if expr is None else direct.evaluator(expr)
            if expr is not None and evaluator is None:
                break
            ops.append((node, _LOG, evaluator, expr, node.label, node.c_index, node.owner, 0))
        else:
            break
    if len(ops) < 2:
        # One node: its step (the expression's ``evaluate``) costs less than making the
        # run's context and starting the loop.
        return None
    return DirectRun(tuple(ops), direct, direct.step_limit)

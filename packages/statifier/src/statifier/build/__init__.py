"""Charts written in Python: a typed builder of SCXML charts.

Each function makes one SCXML element, and records the Python line that called it::

    from statifier import build as sc

    chart = sc.chart(
        sc.data("captures", expr="0"),
        sc.state(
            "authorized",
            sc.on_entry(sc.send(event="authorization.expired", id="hold", delay="7d")),
            sc.on_exit(sc.cancel("hold")),
            sc.transition(event="capture.requested", target="capturing"),
        ),
        ...,
        name="card_authorization",
    )
    machine = chart.compile()          # the Machine its SCXML compiles to
    text = statifier.export(chart)     # that SCXML

A built chart *is* its SCXML: ``compile()`` compiles the exported text, so the two have
one identity and a chart moves between the forms without a revision change. The
compiler's checks are the only checks, and each ``ChartError`` diagnostic names the Python
file and line that made the faulty element. Conditions and expressions are text in the
chart's datamodel, or ``call()``s of registered host functions: a chart holds no Python
callable (ADR 27).
"""

from ._actions import (
    Action,
    Assign,
    Cancel,
    Foreach,
    If,
    Log,
    Raise,
    Script,
    Send,
    assign,
    cancel,
    foreach,
    if_,
    log,
    raise_,
    script,
    send,
)
from ._chart import Binding, Chart, ChartChild, DatamodelName, chart, export
from ._data import Content, Data, DoneData, Param, content, data, done_data, param
from ._expressions import Expr, HostCall, call
from ._invoke import Finalize, Invoke, finalize, invoke
from ._origin import BuildError, Origin
from ._scxml import Exported
from ._states import (
    Final,
    FinalChild,
    History,
    HistoryType,
    Initial,
    OnEntry,
    OnExit,
    Parallel,
    ParallelChild,
    State,
    StateChild,
    Transition,
    TransitionType,
    final,
    history,
    initial,
    on_entry,
    on_exit,
    parallel,
    state,
    transition,
)
from ._tree import Markup, Node
from ._values import JSONValue, xml

__all__ = [
    "Action",
    "Assign",
    "Binding",
    "BuildError",
    "Cancel",
    "Chart",
    "ChartChild",
    "Content",
    "Data",
    "DatamodelName",
    "DoneData",
    "Exported",
    "Expr",
    "Final",
    "FinalChild",
    "Finalize",
    "Foreach",
    "History",
    "HistoryType",
    "HostCall",
    "If",
    "Initial",
    "Invoke",
    "JSONValue",
    "Log",
    "Markup",
    "Node",
    "OnEntry",
    "OnExit",
    "Origin",
    "Parallel",
    "ParallelChild",
    "Param",
    "Raise",
    "Script",
    "Send",
    "State",
    "StateChild",
    "Transition",
    "TransitionType",
    "assign",
    "call",
    "cancel",
    "chart",
    "content",
    "data",
    "done_data",
    "export",
    "final",
    "finalize",
    "foreach",
    "history",
    "if_",
    "initial",
    "invoke",
    "log",
    "on_entry",
    "on_exit",
    "parallel",
    "param",
    "raise_",
    "script",
    "send",
    "state",
    "transition",
    "xml",
]

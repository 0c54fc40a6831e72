"""The safe Python-expression datamodel of the SCXML engine.

Expressions, locations and scripts written by (untrusted) chart authors are parsed with
:mod:`ast`, checked against an allow-list and compiled into closures; nothing is ever handed to
``eval`` or ``exec``. Values are JSON-like and treated as immutable, and every evaluation runs
under size and step limits (see :mod:`statifier.datamodel.python.limits`).
"""

from statifier.datamodel.base import WriteResult
from statifier.datamodel.python.errors import (
    DatamodelError,
    EvaluationError,
    ExpressionSyntaxError,
    ScriptError,
)
from statifier.datamodel.python.expressions import Expression, compile_expression, is_identifier
from statifier.datamodel.python.functions import FUNCTIONS
from statifier.datamodel.python.locations import Location, compile_location
from statifier.datamodel.python.scripts import Script, compile_script
from statifier.datamodel.python.values import (
    InState,
    Value,
    Variables,
    is_value,
    parse_inline_content,
)

__all__ = [
    "FUNCTIONS",
    "DatamodelError",
    "EvaluationError",
    "Expression",
    "ExpressionSyntaxError",
    "InState",
    "Location",
    "Script",
    "ScriptError",
    "Value",
    "Variables",
    "WriteResult",
    "compile_expression",
    "compile_location",
    "compile_script",
    "is_identifier",
    "is_value",
    "parse_inline_content",
]

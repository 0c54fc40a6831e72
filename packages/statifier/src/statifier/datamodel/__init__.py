"""Datamodels: how a chart's expressions, locations and scripts are compiled and run.

``statifier.datamodel.python`` is the safe Python-expression datamodel, the default. The
core and the compiler reach a datamodel only through the names re-exported here.
"""

from statifier.datamodel.host import HostFunction, HostFunctionError, HostFunctions
from statifier.datamodel.python import (
    FUNCTIONS,
    DatamodelError,
    EvaluationError,
    Expression,
    ExpressionSyntaxError,
    InState,
    Location,
    Script,
    ScriptError,
    Value,
    Variables,
    WriteResult,
    compile_expression,
    compile_location,
    compile_script,
    is_identifier,
    is_value,
    parse_inline_content,
)

__all__ = [
    "FUNCTIONS",
    "DatamodelError",
    "EvaluationError",
    "Expression",
    "ExpressionSyntaxError",
    "HostFunction",
    "HostFunctionError",
    "HostFunctions",
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

"""Datamodels: how a chart's expressions, locations and scripts are compiled and run.

The compiler picks the chart's :class:`Datamodel` with :func:`datamodel_for` and asks it to
compile every expression, location and script; the core evaluates the compiled objects
(:class:`Expression`, :class:`Location`, :class:`Script`, the protocols of
``statifier.datamodel.base``) and never looks at which datamodel made them.

``statifier.datamodel.python`` is the safe Python-expression datamodel, the default; its
compile functions stay re-exported here under their historical names.
``statifier.datamodel.ecmascript`` is the sandboxed ECMAScript datamodel (ADR 22).
"""

from statifier.datamodel.base import (
    Datamodel,
    DatamodelError,
    DatamodelUnavailable,
    DirectContext,
    DirectEvaluation,
    EvaluationError,
    Expression,
    ExpressionSyntaxError,
    InState,
    KeptVariables,
    Location,
    Script,
    ScriptError,
    StoredVariables,
    Value,
    Variables,
    WriteResult,
    WritesFailed,
    stored_variables,
)
from statifier.datamodel.host import HostFunction, HostFunctionError, HostFunctions
from statifier.datamodel.python import (
    FUNCTIONS,
    compile_expression,
    compile_location,
    compile_script,
    is_identifier,
    is_value,
    parse_inline_content,
)
from statifier.datamodel.registry import (
    DATAMODEL_NAMES,
    DEFAULT_DATAMODEL,
    PYTHON,
    PythonDatamodel,
    datamodel_for,
    variables_of,
)

__all__ = [
    "DATAMODEL_NAMES",
    "DEFAULT_DATAMODEL",
    "FUNCTIONS",
    "PYTHON",
    "Datamodel",
    "DatamodelError",
    "DatamodelUnavailable",
    "DirectContext",
    "DirectEvaluation",
    "EvaluationError",
    "Expression",
    "ExpressionSyntaxError",
    "HostFunction",
    "HostFunctionError",
    "HostFunctions",
    "InState",
    "KeptVariables",
    "Location",
    "PythonDatamodel",
    "Script",
    "ScriptError",
    "StoredVariables",
    "Value",
    "Variables",
    "WriteResult",
    "WritesFailed",
    "compile_expression",
    "compile_location",
    "compile_script",
    "datamodel_for",
    "is_identifier",
    "is_value",
    "parse_inline_content",
    "stored_variables",
    "variables_of",
]

"""Import paths for host objects named on durable job rows (deliveries, codecs...).

A path is ``"package.module:Attribute"`` (``"package.module.Attribute"`` is accepted too).
Resolution never creates anything beyond importing the module; a class resolves to a
fresh instance, any other attribute is used as it is.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from ._errors import ResolutionError

_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*(:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*)?$")


def path_of(obj: Any) -> str:
    """The durable path of a class (``module:QualName``)."""
    return f"{obj.__module__}:{obj.__qualname__}"


def is_path(value: object) -> bool:
    """Whether ``value`` has the shape of an import path (not whether it resolves)."""
    return isinstance(value, str) and bool(_PATH.match(value)) and ("." in value or ":" in value)


def resolve(path: str) -> Any:
    """Import the module and return the attribute; a class is instantiated with no args."""
    target = locate(path)
    return target() if isinstance(target, type) else target


def locate(path: str) -> Any:
    """Import the module and return the attribute as it is (a class stays a class)."""
    if not is_path(path):
        raise ResolutionError(f"{path!r} is not an import path")
    if ":" in path:
        module_name, attribute = path.split(":", 1)
    else:
        module_name, _, attribute = path.rpartition(".")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ResolutionError(f"cannot import {module_name!r} for {path!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ResolutionError(
                f"{module_name!r} has no attribute {attribute!r} (for {path!r})"
            ) from None
    return target

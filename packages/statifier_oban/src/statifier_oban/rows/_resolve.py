"""Which host objects a durable job row may name, and finding them (ADR 13).

A job row names its delivery, codec, child starter or invoke handler by path
(``"package.module:QualName"``; ``"package.module.QualName"`` is accepted too). Rows come
from storage, and storage is as untrusted as a user, so a row never chooses what a worker
imports or builds: a path resolves only when this process registered it, in one of four
ways:

* the library's own plug-ins (:data:`LIBRARY_PATHS`), imported on demand;
* objects passed to :func:`register` (``statifier_oban.register_plugin``); every
  ``InvokeHandler`` subclass registers itself when it is defined;
* the exact paths and classes a host gives a ``Config`` (``delivery=``, ``opaque_codec=``...),
  allowed when the ``Config`` is built (the host's own process named them);
* the classes defined in a module named with :func:`allow_module` (``statifier-oban
  worker --module``), looked up in the module the worker already imported.

Anything else is refused with :class:`ResolutionError` before any import. Lookups read
``__dict__`` entries (never ``getattr``), so a module-level ``__getattr__`` or a
descriptor cannot run either. What a path resolves to is only looked up here; building
an instance, after checking its class, is ``_plugins``'s job.
"""

from __future__ import annotations

import importlib
import re
import sys
import threading
from types import MappingProxyType, ModuleType
from typing import Any, Final

from .._errors import ResolutionError

_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*(:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*)?$")

MAX_PATH_LENGTH: Final = 512
"""The longest path considered at all (a row's value beyond this is refused unread)."""

LIBRARY_PATHS: Final = frozenset(
    {
        "statifier_oban.delivery:SessionDelivery",
        "statifier_oban.delivery:SessionInvokeDelivery",
        "statifier_oban.executions:ExecutionDelivery",
        "statifier_oban.executions:ExecutionInvokeDelivery",
        "statifier_oban.children:ExecutionChildStarter",
        "statifier_oban.children:MapHandler",
    }
)
"""Plug-ins of the library itself: resolvable in every process, imported on demand."""

_lock = threading.Lock()
_registered: dict[str, object] = {}
_allowed_paths: set[str] = set()
_allowed_modules: set[str] = set()


def path_of(obj: Any) -> str:
    """The durable path of a class (``module:QualName``)."""
    return f"{obj.__module__}:{obj.__qualname__}"


def is_path(value: object) -> bool:
    """Whether ``value`` has the shape of an import path (not whether it resolves)."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_PATH_LENGTH
        and bool(_PATH.match(value))
        and ("." in value or ":" in value)
    )


def _split(path: str) -> tuple[str, str]:
    """``(module, qualname)`` of a path of either spelling."""
    if ":" in path:
        module_name, qualname = path.split(":", 1)
    else:
        module_name, _, qualname = path.rpartition(".")
    return module_name, qualname


def canonical(path: str) -> str:
    """``path`` spelled ``module:QualName`` (``ResolutionError`` if it is not a path)."""
    known = _canonical.get(path) if type(path) is str else None
    if known is not None:
        return known
    if not is_path(path):
        raise ResolutionError(f"{_shown(path)} is not an import path")
    module_name, qualname = _split(path)
    key = f"{module_name}:{qualname}"
    if len(_canonical) >= MAX_KNOWN_PATHS:
        _canonical.clear()
    _canonical[path] = key
    return key


MAX_KNOWN_PATHS: Final = 1024
"""Paths :func:`canonical` remembers the spelling of (every job row names its plug-ins
again, mostly the same few); when full, it forgets them all and starts again."""

_canonical: dict[str, str] = {}


def register(obj: object, *, path: str | None = None) -> str:
    """Let job rows name ``obj`` (a class, or an object with ``__module__``/``__qualname__``).

    ``path`` names it otherwise (a module run as a script is ``__main__`` to itself but
    named by its file's module name on rows). Returns the path rows name it by.
    Registering twice is harmless; a different object under a path already taken
    replaces it (a reloaded module).
    """
    if path is None:
        module_name = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if not isinstance(module_name, str) or not isinstance(qualname, str):
            raise ResolutionError(f"{obj!r} has no module and qualified name to be named by")
        path = f"{module_name}:{qualname}"
    key = canonical(path)
    with _lock:
        _registered[key] = obj
    return key


def allow_path(path: str) -> str:
    """Let rows name ``path`` (its module may be imported when a row first names it).

    For paths a host writes into its own ``Config``. Returns the canonical path.
    """
    key = canonical(path)
    with _lock:
        _allowed_paths.add(key)
    return key


def allow_module(module: ModuleType | str) -> str:
    """Let rows name any class defined in ``module``, which must be imported already.

    What ``statifier-oban worker --module M`` does after importing ``M``. Classes the
    module merely imports from elsewhere are not included.
    """
    name = module.__name__ if isinstance(module, ModuleType) else module
    if sys.modules.get(name) is None:
        raise ResolutionError(f"module {name!r} must be imported before it is allowed")
    with _lock:
        _allowed_modules.add(name)
    return name


def forget(path: str) -> None:
    """Undo :func:`register` and :func:`allow_path` for ``path`` (for tests and reloads)."""
    key = canonical(path)
    with _lock:
        _registered.pop(key, None)
        _allowed_paths.discard(key)


def locate(path: str) -> Any:
    """Import the module a *host or operator* names and return the attribute as it is.

    For paths given on a command line (``--handler TYPE=PATH``) or in code, never for a
    path read from a job row (:func:`lookup` is for those).
    """
    key = canonical(path)
    module_name, qualname = _split(key)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ResolutionError(f"cannot import {module_name!r} for {key!r}: {exc}") from exc
    target = _walk(module, qualname)
    if target is _MISSING:
        raise ResolutionError(f"{module_name!r} has no attribute {qualname!r} (for {key!r})")
    return target


def lookup(path: object) -> object:
    """The object a row's ``path`` names, if this process registered it.

    Never imports a module unless the path is one of the library's own or one a host
    wrote into a ``Config``; never builds anything. Raises ``ResolutionError`` otherwise.
    """
    if not isinstance(path, str):
        raise ResolutionError(f"{_shown(path)} is not an import path")
    key = canonical(path)
    module_name, qualname = _split(key)
    with _lock:
        found = _registered.get(key, _MISSING)
        in_module = module_name in _allowed_modules
        importable = key in _allowed_paths or key in LIBRARY_PATHS
    if found is not _MISSING:
        return found
    if in_module:
        module = sys.modules.get(module_name)
        if module is not None:
            target = _walk(module, qualname)
            if isinstance(target, type) and path_of(target) == key:
                return target
        raise ResolutionError(f"{key!r} is not a class defined in the allowed module")
    if importable:
        try:
            # Imported already, in a worker, from the second row on: no import machinery.
            module = sys.modules.get(module_name) or importlib.import_module(module_name)
        except ImportError as exc:
            raise ResolutionError(f"cannot import {module_name!r} for {key!r}: {exc}") from exc
        target = _walk(module, qualname)
        if target is _MISSING:
            raise ResolutionError(f"{module_name!r} has no attribute {qualname!r} (for {key!r})")
        return target
    raise ResolutionError(
        f"{key!r} is not registered in this process (register it, name it in the Config, "
        "or start the worker with --module naming its module)"
    )


_MISSING: Any = object()

_NAMESPACES: Final = (dict, MappingProxyType)
"""What a ``__dict__`` may be (a tuple: ``isinstance`` reads it faster than a union)."""


def _walk(module: ModuleType, qualname: str) -> object:
    """The object at ``qualname`` inside ``module``, read from ``__dict__``s only."""
    target: object = module
    for part in qualname.split("."):
        namespace = getattr(target, "__dict__", None)
        if not isinstance(namespace, _NAMESPACES):
            return _MISSING
        target = namespace.get(part, _MISSING)
        if target is _MISSING:
            return _MISSING
    return target


def _shown(value: object) -> str:
    """A bounded rendering of a row's value for a message."""
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."

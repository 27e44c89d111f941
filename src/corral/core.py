"""Which request core runs: the compiled one, or its pure-Python twin.

The compiled core (Cython, built by ``pip install``: setup.py) is the parser written in
Cython (`corral.http._parser`, twin of `corral.http.parser`) and the Python modules of the
request path compiled as they are, typed by the ``.pxd`` beside each (setup.py's ``TWINS``:
``connection.so`` beside ``connection.py``). Both behave identically (docs/architecture.md,
"Layout"). ``CORRAL_NO_EXTENSIONS=1`` asks for the Python core at run time, as it does at build
time: the import of a compiled twin then loads its ``.py`` instead. Without it the compiled
core runs when it was built and is not older than its sources (an editable checkout whose
``.py`` changed since ``pip install -e .``: the Python core runs, and ``NAME`` says why).

This module is imported by ``corral/__init__.py``, before any twin can be.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

PACKAGE = os.path.dirname(os.path.abspath(__file__))  # (os.path: pathlib is no worker's import)
_EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


class _PythonTwins:
    """A meta-path finder that loads the ``.py`` of a compiled corral module that has one."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("corral."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)  # type: ignore[arg-type]
        if spec is None or spec.origin is None or not spec.origin.endswith(_EXTENSIONS):
            return None
        source = os.path.join(os.path.dirname(spec.origin), fullname.rpartition(".")[2] + ".py")
        if not os.path.exists(source):
            return None  # compiled only (corral.http._parser): the Python core never imports it
        return importlib.util.spec_from_file_location(fullname, source)


def _stale() -> str | None:
    """The first source newer than its compiled module (an editable checkout edited since its
    build), or None. Installed wheels unpack both at once: a second of slack."""
    for directory, _, names in os.walk(PACKAGE):
        for name in names:
            if not name.endswith(".so"):
                continue
            built = os.stat(os.path.join(directory, name)).st_mtime
            stem = name.partition(".")[0]
            for suffix in (".py", ".pyx"):
                source = os.path.join(directory, stem + suffix)
                if os.path.exists(source) and os.stat(source).st_mtime > built + 1:
                    return os.path.relpath(source, os.path.dirname(PACKAGE))
    return None


REQUESTED_PYTHON = os.environ.get("CORRAL_NO_EXTENSIONS", "") not in ("", "0")
STALE = None if REQUESTED_PYTHON else _stale()

# whether it was built; loaded only when a parser is asked for (corral.routing, for one, is
# imported without the HTTP layer)
NATIVE = (
    not REQUESTED_PYTHON
    and STALE is None
    and importlib.util.find_spec("corral.http._parser") is not None
)
if not NATIVE:
    sys.meta_path.insert(0, _PythonTwins())


def __getattr__(name: str) -> Any:
    """``RequestParser``: the HTTP/1.1 parser class of the core that runs."""
    if name != "RequestParser":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if NATIVE:
        from corral.http._parser import RequestParser
    else:
        from corral.http.parser import RequestParser
    globals()["RequestParser"] = RequestParser
    return RequestParser


if NATIVE:
    NAME = "compiled core"
elif REQUESTED_PYTHON:
    NAME = "Python core: CORRAL_NO_EXTENSIONS=1"
elif STALE is not None:
    NAME = f"Python core: the compiled core is older than {STALE}, run pip install -e . again"
else:
    NAME = "Python core: the compiled core is not built"

"""Which request core runs: the compiled one, or its pure-Python twin.

The compiled modules (Cython, built by ``pip install``) and the Python modules they shadow
behave identically (DESIGN.md, "The native core"). ``CORRAL_NO_EXTENSIONS=1`` asks for the
Python core at run time, as it does at build time; without it the compiled core runs when it
was built, and the Python one (saying so in ``NAME``) when it was not.
"""

from __future__ import annotations

import os

from corral.http import parser as _python_parser

REQUESTED_PYTHON = os.environ.get("CORRAL_NO_EXTENSIONS", "") not in ("", "0")

if REQUESTED_PYTHON:
    NATIVE = False
else:
    try:
        from corral.http import _parser as _native_parser  # type: ignore[attr-defined]
    except ImportError:
        NATIVE = False
    else:
        NATIVE = True

RequestParser = _native_parser.RequestParser if NATIVE else _python_parser.RequestParser

if NATIVE:
    NAME = "compiled core"
elif REQUESTED_PYTHON:
    NAME = "Python core: CORRAL_NO_EXTENSIONS=1"
else:
    NAME = "Python core: the compiled core is not built"

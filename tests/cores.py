"""The two builds of the request core, for tests that run against both.

The compiled core is built by ``pip install`` (setup.py); a checkout installed with
``CORRAL_NO_EXTENSIONS=1`` has only the Python one, and its compiled cases are skipped with
that reason. Anywhere else a missing compiled core fails: it is the one that serves.
"""

from __future__ import annotations

import importlib

import pytest

from corral import core as core_choice
from corral.http import parser as python_parser

CORES = ("python", "compiled")


def request_parser(core: str) -> type:
    """The ``RequestParser`` class of ``core``."""
    if core == "python":
        return python_parser.RequestParser
    if not core_choice.NATIVE:
        # the compiled parser extends the compiled Parser and makes compiled heads: beside the
        # Python twins (this process runs the Python core) its import fails
        if core_choice.REQUESTED_PYTHON:
            pytest.skip("CORRAL_NO_EXTENSIONS=1: this process runs the Python core")
        if core_choice.STALE is not None:
            pytest.fail(f"the compiled core is older than {core_choice.STALE}: pip install -e .")
        pytest.fail("the compiled core is not built: pip install -e . (with gcc and python3-dev)")
    return importlib.import_module("corral.http._parser").RequestParser

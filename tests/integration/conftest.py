"""Fixtures shared by integration modules."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server import APPS
from tests.integration.venvs import BASE_PYTHON, Sandbox, make_sandbox


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """corral installed in a virtualenv an unprivileged worker can read (see venvs.py), with
    priv_app.py; made once per session."""
    if not os.access(BASE_PYTHON, os.X_OK):
        pytest.fail(f"{BASE_PYTHON} is needed for a virtualenv an unprivileged worker can read")
    root = Path(tempfile.mkdtemp(prefix="corral-priv-", dir="/tmp"))
    try:
        yield make_sandbox(root, [APPS / "priv_app.py"])
    finally:
        shutil.rmtree(root, ignore_errors=True)

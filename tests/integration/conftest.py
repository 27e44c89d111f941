"""Fixtures shared by integration modules."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.certificates import issue_files
from tests.cores import CORES, request_parser
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


@pytest.fixture(scope="module", params=CORES)
def each_core(request: pytest.FixtureRequest) -> Iterator[str]:
    """The servers a module starts run the compiled core, then (the module again) the Python
    one. A module opts in with ``pytestmark = pytest.mark.usefixtures("each_core")``; its
    module-scoped server fixtures take ``each_core`` too, so that they start once per core."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "python":
            patch.setenv("CORRAL_NO_EXTENSIONS", "1")
        else:
            request_parser("compiled")  # fails when it is not built
            patch.delenv("CORRAL_NO_EXTENSIONS", raising=False)
        yield request.param


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A test certificate authority (trustme) for the TLS tests' servers and clients."""
    return trustme.CA()


@pytest.fixture
def certificate(ca: trustme.CA, tmp_path: Path) -> tuple[Path, Path]:
    """A certificate of `ca` for localhost: (its chain file, its key file)."""
    return issue_files(ca, tmp_path)

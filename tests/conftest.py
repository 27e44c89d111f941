"""Fixtures shared by every test package."""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

import corral
from tests.cores import CORES, request_parser


@pytest.fixture(params=CORES)
def parser_class(request: pytest.FixtureRequest) -> type:
    """Each build's ``RequestParser``: a test taking this runs once per core."""
    return request_parser(request.param)


def pytest_sessionstart(session: pytest.Session) -> None:
    """corral's modules and the tests' applications compiled to byte code once, as an installed
    package's are: where ``PYTHONDONTWRITEBYTECODE`` is set (as on the CI machine), every
    server a test starts would compile some 300 modules from source at its start instead
    (0.15 s more a start, thousands of starts)."""
    for directory in (Path(corral.__file__).parent, Path(__file__).parent):
        compileall.compile_dir(directory, quiet=2, workers=0)  # (a broken test app: said when run)

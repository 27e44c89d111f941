"""Fixtures shared by every test package."""

from __future__ import annotations

import pytest

from tests.cores import CORES, request_parser


@pytest.fixture(params=CORES)
def parser_class(request: pytest.FixtureRequest) -> type:
    """Each build's ``RequestParser``: a test taking this runs once per core."""
    return request_parser(request.param)

"""Fixtures for every unit test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _in_an_empty_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in its own empty directory: corral reads ./gunicorn.conf.py when no -c
    is given, so a test must not depend on where pytest was started (files of the repository
    are reached by absolute paths)."""
    monkeypatch.chdir(tmp_path)

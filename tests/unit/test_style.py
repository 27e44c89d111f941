"""The tree is ruff-clean (lint and format), as the style guide requires."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_lint():
    result = ruff("check", "src", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    result = ruff("format", "--check", "src", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr

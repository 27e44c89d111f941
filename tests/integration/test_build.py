"""Building corral: the compiled core by default, the Python core on request, and one line
(not a compiler's error) when the compiler or the Python headers are missing.

Each test builds a wheel of this checkout with pip (no build isolation: the suite's own
setuptools and Cython) into a temporary directory, and looks inside it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """A wheel of a copy of the checkout (the build writes beside the sources)."""
    source = tmp_path / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "bench", "tests", "*.so", "*.c", "build", "*.egg-info", "__pycache__"
        ),
    )
    out = tmp_path / "wheels"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    names = []
    for wheel in out.glob("*.whl") if out.exists() else []:
        with zipfile.ZipFile(wheel) as archive:
            names += archive.namelist()
    return result, names


def test_the_wheel_holds_the_compiled_core_and_its_python_twin(tmp_path: Path) -> None:
    # what the wheel holds, not how fast it runs: unoptimised, the modules compile in
    # a sixth of the time (11 s against 65 on two cores)
    result, names = build(tmp_path, CFLAGS="-O0")
    assert result.returncode == 0, result.stderr
    compiled = sorted(name.partition(".")[0] for name in names if name.endswith(".so"))
    # the parser written in Cython, and the request path's modules compiled as they are
    assert compiled == [
        "corral/apps/asgi/adapter",
        "corral/apps/asgi/runner",
        "corral/apps/asgi/scope",
        "corral/apps/wsgi/environ",
        "corral/apps/wsgi/response",
        "corral/apps/wsgi/runner",
        "corral/filters/forwarded",
        "corral/http/_parser",
        "corral/http/head",
        "corral/http/response",
        "corral/server/acceptor",
        "corral/server/connection",
    ]
    for module in compiled:  # each with its Python twin (the parser's is parser.py)
        assert module.replace("_parser", "parser") + ".py" in names


def test_corral_no_extensions_builds_the_python_core_only(tmp_path: Path) -> None:
    result, names = build(tmp_path, CORRAL_NO_EXTENSIONS="1", CC="/nonexistent/cc")
    assert result.returncode == 0, result.stderr
    assert not [name for name in names if name.endswith(".so")]
    assert "corral/http/parser.py" in names


def test_without_a_compiler_the_build_says_what_to_install_in_one_line(tmp_path: Path) -> None:
    result, names = build(tmp_path, CC="/nonexistent/cc")
    assert result.returncode != 0 and not names
    # pip indents what the build printed; the line itself is whole
    lines = [line.strip() for line in result.stderr.splitlines() if "corral: " in line]
    assert lines == [
        "corral: building the compiled core needs a C compiler (/nonexistent/cc): on Debian or "
        "Ubuntu `apt-get install gcc python3-dev`; or build the pure-Python core with "
        "CORRAL_NO_EXTENSIONS=1"
    ], result.stderr

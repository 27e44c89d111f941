"""The compiled twins (setup.py's TWINS: Python modules compiled as they are) and their Python
core: ``CORRAL_NO_EXTENSIONS=1`` loads each ``.py`` instead, and the request path's unit
tests pass on it as they do here on the compiled core (the integration modules that take
``each_core`` run both too)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corral import core

ROOT = Path(__file__).resolve().parents[2]
# the unit tests of what the twins hold: run again in a Python-core process
REQUEST_PATH_TESTS = (
    "tests/unit/test_connection.py",
    "tests/unit/test_http_response.py",
    "tests/unit/test_wsgi_input.py",
    "tests/unit/test_wsgi_environ.py",
    "tests/unit/test_uwsgi_protocol.py",
    "tests/unit/test_request_head_limit.py",
    "tests/unit/test_forwarded.py",
    "tests/unit/test_deadline.py",
    "tests/unit/test_thread_pool.py",
    "tests/unit/test_routed_connection.py",
    "tests/unit/test_static_files.py",
    "tests/unit/test_static_safety.py",
    "tests/unit/test_share_action.py",
    "tests/unit/test_routing.py",
    "tests/unit/test_ratelimit.py",
    "tests/unit/test_connlimit.py",
    "tests/unit/test_proxy_head.py",
)


def setup_twins() -> list[str]:
    """setup.py's TWINS list, read from its source (setup.py runs setup() when imported)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TWINS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no TWINS")


TWINS = setup_twins()


def origins(env: dict[str, str]) -> list[str]:
    code = "import importlib\nfor name in %r: print(importlib.import_module(name).__file__)"
    result = subprocess.run(
        [sys.executable, "-c", code % (TWINS,)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )
    return result.stdout.split()


def test_the_twins_are_compiled_in_this_build() -> None:
    if not core.NATIVE:
        pytest.skip(f"this process runs the {core.NAME}")
    assert "corral.server.connection" in TWINS
    assert all(path.endswith(".so") for path in origins({"CORRAL_NO_EXTENSIONS": "0"}))


def test_corral_no_extensions_loads_each_twins_python_source() -> None:
    paths = origins({"CORRAL_NO_EXTENSIONS": "1"})
    assert [Path(path).name for path in paths] == [
        name.rpartition(".")[2] + ".py" for name in TWINS
    ]


def test_the_request_path_unit_tests_pass_on_the_python_core() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *REQUEST_PATH_TESTS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "CORRAL_NO_EXTENSIONS": "1"},
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert " passed" in result.stdout.splitlines()[-1]


def test_a_source_edited_since_the_build_runs_the_python_core_and_says_so() -> None:
    if not core.NATIVE:
        pytest.skip(f"this process runs the {core.NAME}")
    source = Path(core.PACKAGE) / "http" / "head.py"
    stat = source.stat()
    (compiled,) = source.parent.glob("head.*.so")
    edited = compiled.stat().st_mtime + 10  # as an edit after the build
    os.utime(source, (stat.st_atime, edited))
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "import corral.core as c, corral.http.head as h; print(c.NAME); print(h.__file__)",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "CORRAL_NO_EXTENSIONS": "0"},
            check=True,
        )
    finally:
        os.utime(source, (stat.st_atime, stat.st_mtime))
    name, path = result.stdout.splitlines()
    assert name == (
        "Python core: the compiled core is older than corral/http/head.py, "
        "run pip install -e . again"
    )
    assert path.endswith("head.py")


def test_architecture_md_names_every_twin() -> None:
    # the page lists the twins in its Layout and marks them "(twin)" in its map of modules;
    # a module added to TWINS and not to the page would leave it counting too few
    page = (ROOT / "docs" / "architecture.md").read_text()
    layout = page[page.index("## Layout") : page.index("### A map")]
    tree = page[page.index("### A map") : page.index("## Modules")]
    paths = [name.removeprefix("corral.").replace(".", "/") + ".py" for name in TWINS]
    assert [path for path in paths if f"`{path}`" not in layout] == []
    assert tree.count("(twin)") == len(TWINS)

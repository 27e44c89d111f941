"""corral.interpreter without a server: which interpreter an application's `home` asks for, the
brief's round trip through its memfd, and the line its entry point writes when corral cannot
serve in that interpreter (the wire's `failed` line, written there by hand)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import corral
from corral.config import ConfigError, validate_document
from corral.interpreter.brief import Brief, read, write
from corral.interpreter.choice import foreign_python
from corral.interpreter.handover import BOOT
from corral.wire import Failed, LineDecoder

OTHER = (3, 13) if sys.version_info[:2] != (3, 13) else (3, 12)


def venv(tmp_path: Path, version: str, python: bool = True) -> str:
    (tmp_path / "bin").mkdir(parents=True)
    (tmp_path / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion = {version}\n")
    if python:
        (tmp_path / "bin" / "python").write_text("#!/bin/sh\n")
        (tmp_path / "bin" / "python").chmod(0o755)
    return str(tmp_path)


def test_another_pythons_virtualenv_is_run_by_its_own_interpreter(tmp_path: Path) -> None:
    home = venv(tmp_path, f"{OTHER[0]}.{OTHER[1]}.1")
    assert foreign_python(home) == os.path.join(home, "bin", "python")


@pytest.mark.parametrize(
    ("version", "python"),
    [
        (f"{sys.version_info[0]}.{sys.version_info[1]}.0", True),  # the master's: forked
        ("3.9.1", True),  # older than corral runs on: the fork's activation says so
        (f"{OTHER[0]}.{OTHER[1]}.1", False),  # no bin/python: the same
        ("", True),  # no version recorded: the same
    ],
    ids=["same", "too-old", "no-python", "no-version"],
)
def test_the_others_are_forked(tmp_path: Path, version: str, python: bool) -> None:
    assert foreign_python(venv(tmp_path, version, python)) is None


def test_no_home_is_forked() -> None:
    assert foreign_python(None) is None


def test_a_brief_survives_its_memfd_and_names_every_descriptor() -> None:
    brief = Brief(
        document={"applications": {"a": {"module": "m"}}},
        application="a",
        slot=1,
        seat=3,
        max_requests=0,
        latency_histogram=True,
        start_cwd="/",
        beat_fd=10,
        stacks_fd=11,
        orders_fd=12,
        listeners={"127.0.0.1:80": 13},
        handoff_fd=14,
        tallies={"127.0.0.1:80": 15},
        load_board=16,
        external_board=17,
    )
    fd = write(brief)
    assert os.get_inheritable(fd)  # the exec keeps it
    assert read(fd) == brief
    assert sorted(brief.descriptors()) == list(range(10, 18))


def test_the_entry_point_says_a_version_mismatch_on_the_heartbeat_pipe() -> None:
    beat_read, beat_write = os.pipe()
    result = subprocess.run(
        [sys.executable, "-c", BOOT, "99", str(beat_write), "0.0.0"],
        pass_fds=(beat_write,),
        capture_output=True,
        text=True,
        timeout=60,
    )
    os.close(beat_write)
    with os.fdopen(beat_read, "rb") as stream:
        messages = LineDecoder().feed(stream.read())
    assert result.returncode == 3, result.stderr
    assert result.stderr == ""  # the master's line says it
    assert messages == [
        Failed(
            f"{sys.executable} (its home's Python) has corral {corral.__version__}, the master "
            f"0.0.0: install corral 0.0.0 in {sys.prefix}"
        )
    ]


LIMIT = {"rate": "10r/s"}
UNSHARED = (
    "application \"new\" runs on its home's Python, whose workers cannot share this limit's "
    f"counts yet: drop the limit, or make the virtualenv with python{sys.version_info[0]}."
    f"{sys.version_info[1]} (docs/deploy.md)"
)


@pytest.mark.parametrize(
    ("listener", "routes", "settings", "where"),
    [
        (
            {"pass": "applications/new", "rate_limit": LIMIT},
            None,
            {},
            '$.listeners["127.0.0.1:80"].rate_limit',
        ),
        (
            {"pass": "routes", "limit_conn": {"connections": 2}},
            [],
            {},
            '$.listeners["127.0.0.1:80"].limit_conn',
        ),
        (
            {"pass": "routes"},
            [{"action": {"pass": "applications/new", "rate_limit": LIMIT}}],
            {},
            "$.routes[0].action.rate_limit",
        ),
        (
            {"pass": "applications/old"},
            None,
            {"limit_concurrency_total": 10},
            "$.settings.limit_concurrency_total",
        ),
    ],
    ids=["listener-rate", "routed-conn", "step-rate", "total"],
)
def test_a_limit_a_spawned_worker_would_count_is_one_line(
    tmp_path: Path, listener: dict, routes: list | None, settings: dict, where: str
) -> None:
    doc = {
        "listeners": {"127.0.0.1:80": listener},
        "applications": {
            "new": {"module": "app", "home": venv(tmp_path, f"{OTHER[0]}.{OTHER[1]}.1")},
            "old": {"module": "app"},
        },
        "settings": settings,
    }
    if routes is not None:
        doc["routes"] = routes
    with pytest.raises(ConfigError) as raised:
        validate_document(doc)
    assert str(raised.value) == f"{where}: {UNSHARED}"


def test_a_limit_on_a_listener_only_forked_workers_take_is_kept(tmp_path: Path) -> None:
    doc = validate_document(
        {
            "listeners": {
                "127.0.0.1:80": {"pass": "applications/old", "rate_limit": LIMIT},
                "127.0.0.1:81": {"pass": "applications/new"},
            },
            "applications": {
                "new": {"module": "app", "home": venv(tmp_path, f"{OTHER[0]}.{OTHER[1]}.1")},
                "old": {"module": "app"},
            },
        }
    )
    assert doc.listeners["127.0.0.1:80"].rate_limit.rate == "10r/s"

"""Decisions of the master's parts on plain data (a stop's signals, the worker counts after a
commit, a dynamic pool's step on the Measured view of its workers, which the supervisor's
WorkerProcess satisfies: mypy checks that call), and the shape of the parts: none of them
imports the arbiter."""

from __future__ import annotations

import ast
import signal
from pathlib import Path

import pytest

from corral.master.scaling import Measured, decide
from corral.master.stopping import delay_cut, stops_now
from corral.master.supervisor import counts_after_commit

MASTER = Path(__file__).resolve().parents[2] / "src" / "corral" / "master"


@pytest.mark.parametrize(
    ("sig", "cut"),
    [
        (signal.SIGTERM, (True, signal.SIGTERM)),  # the drain begins now
        (signal.SIGINT, (False, signal.SIGQUIT)),  # the workers leave at once
        (signal.SIGQUIT, (False, signal.SIGQUIT)),
        (signal.SIGHUP, None),  # no reload while stopping: the delay goes on
        (signal.SIGCHLD, None),  # reaped, and the delay goes on
    ],
)
def test_what_a_signal_does_to_the_shutdown_delay(sig: int, cut: object) -> None:
    assert delay_cut(sig) == cut


@pytest.mark.parametrize(
    ("sig", "graceful", "now"),
    [
        (signal.SIGTERM, True, False),  # the TERM that started the stop, again: drain on
        (signal.SIGTERM, False, True),  # a TERM after a QUIT: asked twice
        (signal.SIGINT, True, True),
        (signal.SIGQUIT, True, True),
        (signal.SIGHUP, False, False),
        (signal.SIGCHLD, False, False),
    ],
)
def test_which_signal_ends_the_wait_for_the_workers(sig: int, graceful: bool, now: bool) -> None:
    assert stops_now(sig, graceful) is now


def test_a_carried_pool_keeps_its_count_and_a_fresh_one_takes_the_configured_one() -> None:
    counts = {"blog": 5, "shop": 1, "gone": 3}  # TTIN gave blog 5 (configured 2)
    configured = {"blog": 2, "shop": 4, "new": 1}
    after = counts_after_commit(counts, configured, fresh={"shop", "new"})
    assert after == {"blog": 5, "shop": 4, "new": 1}  # an application removed is no more


def test_a_reload_restarts_every_pool_with_its_configured_count() -> None:
    assert counts_after_commit({"blog": 5}, {"blog": 2}, fresh={"blog"}) == {"blog": 2}


class _Worker:
    def __init__(self, busy: float, idle_since: float | None) -> None:
        self.ready = True
        self.retiring = False
        self.busy_share = busy
        self.idle_since = idle_since


class _Dynamic:
    max = 4
    spare = 1
    idle_timeout = 10.0


def test_scaling_decides_on_what_it_measures_of_a_worker() -> None:
    workers: list[Measured] = [_Worker(0.9, None), _Worker(0.8, None)]
    assert decide(_Dynamic(), workers, 100.0) == (1, "every worker is busy")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_part_of_the_master_imports_the_arbiter() -> None:
    """The arbiter composes the parts: each is given what it uses (type-only imports too)."""
    parts = [p for p in MASTER.glob("*.py") if p.name not in ("arbiter.py", "startup.py")]
    parts.append(MASTER.parent / "external" / "supervisor.py")
    importing = [p.name for p in parts if "corral.master.arbiter" in _imports(p)]
    assert not importing

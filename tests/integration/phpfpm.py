"""A real php-fpm for a corral running a ``"php"`` application, started from what corral
says it runs (`corral.php.fpm.fpm_pool`: the configuration it writes, the command, the socket),
as the master's supervision will start it. Tests skip, saying so, where Debian's php-fpm
package is not installed."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from corral.php.fpm import FpmPool, fpm_binary, fpm_pool
from tests.integration.server import wait_for

needs_php_fpm = pytest.mark.skipif(
    not os.access(fpm_binary(), os.X_OK), reason="php-fpm is not installed (Debian's php-fpm)"
)


def _answers(path: str) -> bool:
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(path)
        except OSError:
            return False
    return True


@contextmanager
def php_fpm(name: str, app: Any, master_pid: int, log: Path) -> Iterator[FpmPool]:
    """php-fpm for the application ``name`` (the document's ``app``) of the corral master
    ``master_pid``, listening once this yields; stopped (SIGQUIT: graceful) after."""
    pool = fpm_pool(name, app, master_pid=master_pid)
    Path(pool.config_path).write_text(pool.config)
    with log.open("ab") as sink:
        proc = subprocess.Popen(pool.command, stdout=sink, stderr=sink)
    try:
        wait_for(lambda: proc.poll() is not None or _answers(pool.listen), timeout=15)
        assert proc.poll() is None, log.read_text()
        yield pool
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for path in (pool.config_path, pool.listen):
            Path(path).unlink(missing_ok=True)

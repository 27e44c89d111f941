"""``daemon`` (Gunicorn's ``-D``): detach from the terminal; the command waits until it serves.

The command forks; the child starts a new session (``setsid``) and forks again, so that the
daemon is not a session leader and cannot get a controlling terminal back; the middle
process exits at once. The daemon points its standard input at /dev/null, and its standard
output and error too unless ``enable_stdio_inheritance`` keeps them, and runs the server.

The foreground process waits on a pipe for one line from the daemon: ``ready`` once every
worker of the first generation is ready (the command exits 0: the port answers), or ``exit N
LINE`` when the server stopped before that (the command exits N and prints LINE, the last
``corral: error: ...`` line the daemon wrote, which went to /dev/null). The pipe closing
without a line (the daemon was killed) is exit 1.

Not done in a new master started by USR2 (``upgrade.py``): it must stay the old master's
child, and the old master detached already.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO

from corral.master import upgrade

_READY = "ready"
_ERROR = "corral: error: "


def wanted(settings: Any) -> bool:
    """Whether to detach: `daemon` set, and not a USR2 master (already detached)."""
    return bool(settings.daemon) and not upgrade.started_by_upgrade()


class Detached:
    """In the daemon: tells the foreground process how the start-up went, once."""

    def __init__(self, fd: int, stderr: _Remembering) -> None:
        self._fd = fd
        self._stderr = stderr

    def ready(self) -> None:
        """Every worker is ready: the foreground exits 0; standard error is plain again."""
        self._send(_READY)
        if sys.stderr is self._stderr:
            sys.stderr = self._stderr.stream

    def exited(self, code: int) -> None:
        """The server stopped (before ready, the foreground exits with `code`)."""
        self._send(f"exit {code} {self._stderr.last_error}")

    def _send(self, line: str) -> None:
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self._fd, line.encode("utf-8", "replace")[:4000] + b"\n")
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = -1


class _Remembering:
    """The daemon's ``sys.stderr`` until it serves: writes go on to /dev/null (or the
    inherited stream), and the last ``corral: error:`` line is kept for the foreground."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.last_error = ""

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.startswith(_ERROR):
                self.last_error = line
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def detach(inherit_stdio: bool) -> Detached | int:
    """Fork the daemon. In the daemon, returns its `Detached`; in the foreground process,
    waits for the daemon's word and returns the command's exit code."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:  # the foreground process
        os.close(write_fd)
        os.waitpid(pid, 0)  # the middle process, gone at once
        return _wait(read_fd)
    try:
        os.close(read_fd)
        os.setsid()
        if os.fork():
            os._exit(0)
        _redirect(inherit_stdio)
    except BaseException:
        os._exit(1)
    stderr = _Remembering(sys.stderr)
    sys.stderr = stderr
    return Detached(write_fd, stderr)


def _redirect(inherit_stdio: bool) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    if not inherit_stdio:
        os.dup2(null, 1)
        os.dup2(null, 2)
    if null > 2:
        os.close(null)


def _wait(fd: int) -> int:
    data = b""
    with os.fdopen(fd, "rb") as pipe:
        while b"\n" not in data:
            chunk = pipe.read1(4096)
            if not chunk:
                break
            data += chunk
    line = data.partition(b"\n")[0].decode("utf-8", "replace")
    if line == _READY:
        return 0
    word, _, rest = line.partition(" ")
    code_text, _, error = rest.partition(" ")
    code = int(code_text) if word == "exit" and code_text.isdigit() else 1
    if code == 0:  # stopped (a signal) before it served: not a success to report
        code = 1
    print(
        error
        or f"{_ERROR}the daemon stopped before it served (exit code {code}); see its error log",
        file=sys.stderr,
    )
    return code

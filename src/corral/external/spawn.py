"""Start one process of a supervised pool: fork, arrange, exec.

The child gets corral's environment with the command's on top, its socket the systemd way in
``fd`` mode (descriptor 3, ``LISTEN_FDS=1``, ``LISTEN_FDNAMES`` the application's name and
``LISTEN_PID`` its own pid, which only the child knows: hence a fork and an exec of our own
rather than `subprocess`), ``PORT`` in ``port`` mode, its output files, user, group and
directory, then execs the program. A program that cannot be run (missing, not executable, a
directory or user that fails) is said to the master before `start` returns, through a pipe
that the exec closes, as `subprocess` does: one line, not a silent early exit.

The child stays in corral's process group, so that a whole server killed by its group takes
its programs along, and it is killed if the master dies (``PR_SET_PDEATHSIG``; SIGKILL, or
the command's ``death_signal``), so that no program outlives the server that supervised it.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import sys

from corral.apps.stdio import open_stdio
from corral.external.kinds import Command, Place
from corral.master.identity import Identity

__all__ = ["CannotRun", "start"]

_PR_SET_PDEATHSIG = 1
_LISTEN_FD = 3  # systemd's SD_LISTEN_FDS_START


class CannotRun(OSError):
    """The program could not be started; `str()` is one line saying why."""


def environment(name: str, command: Command, place: Place) -> dict[str, str]:
    """The child's environment but for ``LISTEN_PID`` (its pid, set after the fork)."""
    env = {**os.environ, **command.env}
    for key in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):  # not corral's own, if any
        env.pop(key, None)
    if place.mode == "fd":
        env.update(LISTEN_FDS="1", LISTEN_FDNAMES=name)
    elif place.mode == "port":
        env["PORT"] = str(place.port)
    return env


def start(name: str, command: Command, place: Place, shared: socket.socket | None) -> int:
    """Fork and exec ``command`` at ``place`` (``shared``: the fd mode's socket); its pid.
    Raises `CannotRun` when the program could not be started."""
    identity = Identity(command.user, command.group)  # ValueError: an unknown name
    env = environment(name, command, place)
    report_read, report_write = os.pipe()  # both close on exec
    sys.stdout.flush()
    sys.stderr.flush()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(report_read)
        os.close(report_write)
        raise
    if pid == 0:  # the child: exec, or say why not and exit
        try:
            os.close(report_read)
            # above descriptor 3, which the socket takes (still closed by the exec)
            report_write = fcntl.fcntl(report_write, fcntl.F_DUPFD_CLOEXEC, 10)
            _become(command, shared, identity, env, report_write)
        except BaseException as exc:  # every failure is said, then exit
            with contextlib.suppress(BaseException):
                os.write(report_write, _reason(command, exc).encode("utf-8", "replace"))
        finally:
            os._exit(127)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.close(report_write)
    with os.fdopen(report_read, "rb") as report:
        failure = report.read()  # empty: the exec closed it
    if failure:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        raise CannotRun(failure.decode("utf-8", "replace"))
    return pid


def _reason(command: Command, exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        what = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    else:
        what = str(exc) or type(exc).__name__
    return f"cannot run {command.argv[0]!r}: {what}"


def _become(
    command: Command,
    shared: socket.socket | None,
    identity: Identity,
    env: dict[str, str],
    report: int,
) -> None:
    """In the child: everything between the fork and the exec (returns only by raising)."""
    signal.set_wakeup_fd(-1)  # the master's: a signal here must not reach the master's loop
    # a process group of its own: a terminal's Ctrl-C (SIGINT to the foreground group) reaches
    # the master, which stops the program in order, instead of the program first, which the
    # master would take for a crash; and a SIGKILL reaches the program's own children too
    os.setpgid(0, 0)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, command.death_signal)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; the program won't
        signal.signal(sig, signal.SIG_DFL)
    stdio = open_stdio(command.stdout, command.stderr)  # as corral's user, as workers do
    for target, fd in stdio.items():
        os.dup2(fd, target)
    if shared is not None:
        os.dup2(shared.fileno(), _LISTEN_FD)
        # a socket that is descriptor 3 already is not duplicated: its close-on-exec stays
        os.set_inheritable(_LISTEN_FD, True)
    identity.switch()
    if command.cwd:
        os.chdir(command.cwd)
    first = _LISTEN_FD + 1 if shared is not None else _LISTEN_FD
    os.closerange(first, report)  # nothing of the master's reaches the program
    os.closerange(report + 1, os.sysconf("SC_OPEN_MAX"))
    if shared is not None:
        env["LISTEN_PID"] = str(os.getpid())
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    os.execvpe(command.argv[0], list(command.argv), env)

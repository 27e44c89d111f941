"""systemd integration: readiness notifications, the watchdog, socket activation (stdlib only).

This module owns corral's side of three systemd protocols, without libsystemd:

- :func:`notify` sends ``KEY=VALUE`` lines to ``$NOTIFY_SOCKET`` (``sd_notify(3)``): one
  datagram per call, to a filesystem path or an abstract name (``@name``). Without the
  variable it does nothing; it never raises, since the server must run the same with or
  without a service manager listening.
- :func:`watchdog_interval` reads ``$WATCHDOG_USEC`` (``sd_watchdog_enabled(3)``): how often
  to send ``WATCHDOG=1``, honouring ``$WATCHDOG_PID`` (set for another process: none).
- :func:`listen_fds` takes the sockets of socket activation (``sd_listen_fds(3)``): only when
  ``$LISTEN_PID`` is this process, descriptors 3 .. 3 + ``$LISTEN_FDS`` - 1. The three
  ``LISTEN_*`` variables are removed from the environment whatever they say, so that no
  worker or application takes them for itself.

Socket activation follows Gunicorn's rule: the inherited sockets replace the configured
binds (:func:`replace_binds`), for the life of the master, reloads included. Uvicorn's
``--fd`` (:func:`take_fd`, one socket handed by any other launcher) is treated the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterable

import msgspec

from corral.config import Document, Listener
from corral.observe.errorlog import LOGGER_NAME

LISTEN_FDS_START = 3  # SD_LISTEN_FDS_START
_FAMILIES = (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX)

_log = logging.getLogger(LOGGER_NAME)


def notify(*lines: str) -> bool:
    """Send ``lines`` as one message to the service manager; True if it was sent."""
    target = os.environ.get("NOTIFY_SOCKET", "")
    if not target:
        return False
    if target.startswith("@"):
        address = "\0" + target[1:]  # the abstract namespace
    elif target.startswith("/"):
        address = target
    else:
        _log.debug("NOTIFY_SOCKET=%s: only paths and @names are supported", target)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall("\n".join(lines).encode("utf-8", "replace"))
    except OSError as exc:
        _log.debug("cannot notify %s (%s): %s", target, ", ".join(lines), exc)
        return False
    return True


def monotonic_usec() -> str:
    """``MONOTONIC_USEC=...``: systemd (>= 253) pairs it with ``RELOADING=1`` to order reloads."""
    return f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}"


def watchdog_interval() -> float | None:
    """Seconds between two ``WATCHDOG=1`` (half the timeout), or None when none is expected."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid != str(os.getpid()):
        return None  # the variables were meant for another process (our parent, say)
    return int(usec) / 2e6


def hand_over_watchdog(env: dict[str, str], parent: int) -> None:
    """In a child that will replace ``parent`` as the main process, take over its watchdog."""
    if env.get("WATCHDOG_PID") == str(parent):
        env["WATCHDOG_PID"] = str(os.getpid())


def listen_fds() -> dict[str, socket.socket]:
    """The listening sockets passed by socket activation, keyed by normalized bind address."""
    count = os.environ.pop("LISTEN_FDS", "")
    pid = os.environ.pop("LISTEN_PID", "")
    names_text = os.environ.pop("LISTEN_FDNAMES", "")
    if not count and not pid:
        return {}
    if pid != str(os.getpid()):
        _log.warning(
            "LISTEN_PID is %s, not this process (%d): ignoring socket activation",
            pid or "unset",
            os.getpid(),
        )
        return {}
    if not count.isdigit():
        _log.warning("LISTEN_FDS=%r is not a count: ignoring socket activation", count)
        return {}
    names = names_text.split(":") if names_text else []
    sockets: dict[str, socket.socket] = {}
    for index in range(int(count)):
        fd = LISTEN_FDS_START + index
        name = names[index] if index < len(names) else ""
        sock = _listening_socket(fd, name)
        if sock is None:
            continue
        address = bind_address(sock)
        if address in sockets:
            _log.warning("socket activation: fd %d repeats %s; ignored", fd, address)
            sock.close()
            continue
        _log.debug("socket activation: fd %d%s is %s", fd, f" ({name})" if name else "", address)
        sockets[address] = sock
    return sockets


def _listening_socket(fd: int, name: str) -> socket.socket | None:
    what = f"fd {fd}" + (f" ({name})" if name else "")
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        _log.warning("socket activation: %s is not a socket (%s); ignored", what, exc.strerror)
        return None
    listening = sock.type == socket.SOCK_STREAM and sock.family in _FAMILIES
    with contextlib.suppress(OSError):
        listening = listening and bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    if not listening:
        _log.warning("socket activation: %s is not a listening stream socket; ignored", what)
        sock.detach()  # not ours to close
        return None
    sock.set_inheritable(False)  # as sd_listen_fds sets FD_CLOEXEC
    sock.setblocking(False)
    return sock


def take_fd(fd: int, backlog: int) -> dict[str, socket.socket]:
    """Uvicorn's ``--fd``: the stream socket on ``fd``, bound by whoever started corral (as
    supervisor's ``fcgi-program`` binds fd 0), listened on if it is not yet; keyed by its
    address, as `listen_fds` keys them. `ValueError` with one line when it is no such socket."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise ValueError(f"fd {fd} is not a socket ({exc.strerror})") from None
    if sock.type != socket.SOCK_STREAM or sock.family not in _FAMILIES:
        sock.detach()  # not ours to close
        raise ValueError(f"fd {fd} is not a TCP or unix stream socket")
    listening = False
    with contextlib.suppress(OSError):
        listening = bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    try:
        if not listening:
            sock.listen(backlog)
    except OSError as exc:
        sock.detach()
        raise ValueError(f"fd {fd}: cannot listen: {exc.strerror}") from None
    sock.set_inheritable(False)
    sock.setblocking(False)
    return {bind_address(sock): sock}


def bind_address(sock: socket.socket) -> str:
    """The address ``sock`` is bound to, in the form of a listener key (``parse_bind``)."""
    name = sock.getsockname()
    if sock.family == socket.AF_UNIX:
        if isinstance(name, bytes):  # the abstract namespace: a leading NUL
            return "unix:@" + name[1:].decode("utf-8", "surrogateescape")
        return f"unix:{name}"
    if sock.family == socket.AF_INET6:
        return f"[{name[0]}]:{name[1]}"
    return f"{name[0]}:{name[1]}"


def replace_binds(doc: Document, addresses: Iterable[str]) -> Document:
    """``doc`` listening on ``addresses`` instead of its own binds, passing to its application."""
    target = next(iter(doc.listeners.values())).pass_ if doc.listeners else None
    if target is None:
        target = f"applications/{next(iter(doc.applications))}"
    listeners = {address: Listener(pass_=target) for address in addresses}
    return msgspec.structs.replace(doc, listeners=listeners)

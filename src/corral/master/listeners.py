"""Listening sockets: bound once by the master, inherited by every worker."""

from __future__ import annotations

import contextlib
import os
import socket
import stat

from corral.config import BindAddress, parse_bind


class ListenError(Exception):
    """A listener could not be created; the message names the address."""


def bind(
    address: BindAddress, *, backlog: int, unix_mode: int, reuse_port: bool = False
) -> socket.socket:
    """Create, bind and listen; TCP with SO_REUSEADDR (and SO_REUSEPORT with `reuse_port`),
    IPv6 sockets IPv6-only."""
    if address.kind == "unix":
        return _bind_unix(address.path or "", backlog, unix_mode)
    sock = socket.socket(address.family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if address.family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address.host, address.port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {address}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def _bind_unix(path: str, backlog: int, mode: int) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.stat(path).st_mode):
            # a stale socket from an earlier run; refuse if something still answers
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(path)
            except OSError:
                os.unlink(path)
            else:
                raise ListenError(f"cannot listen on unix:{path}: another server is using it")
            finally:
                probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o777 & ~mode)  # never a moment with wider permissions
    try:
        sock.bind(path)
        os.chmod(path, mode)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on unix:{path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old_umask)
    sock.setblocking(False)
    return sock


def bind_all(
    addresses: list[str], *, backlog: int, unix_mode: int, reuse_port: bool = False
) -> dict[str, socket.socket]:
    """Bind every listener of the document; on failure close what was bound and raise."""
    bound: dict[str, socket.socket] = {}
    try:
        for text in addresses:
            bound[text] = bind(
                parse_bind(text), backlog=backlog, unix_mode=unix_mode, reuse_port=reuse_port
            )
    except ListenError:
        close_all(bound)
        raise
    return bound


def close_all(sockets: dict[str, socket.socket], *, unlink: bool = True) -> None:
    """Close the sockets; with ``unlink``, remove the files of unix listeners too."""
    for text, sock in sockets.items():
        sock.close()
        if unlink and text.startswith("unix:"):
            with contextlib.suppress(OSError):
                os.unlink(text[5:])


def describe(sock: socket.socket, protocol: str = "http") -> str:
    """The address a socket actually listens on (the real port when 0 was asked), as a URL of
    its protocol (``http://``, ``uwsgi://``); a unix socket's says ``unix:PATH`` and, for
    uwsgi, `` (uwsgi)``."""
    name = sock.getsockname()
    if sock.family == socket.AF_UNIX:
        return f"unix:{name}" if protocol == "http" else f"unix:{name} ({protocol})"
    if sock.family == socket.AF_INET6:
        return f"{protocol}://[{name[0]}]:{name[1]}"
    return f"{protocol}://{name[0]}:{name[1]}"


def handoff_address(master_pid: int, application: str) -> str:
    """The abstract unix address of ``application``'s hand-off socket (see handoff.py): no
    file to clean up, and derived from the name, so that every worker can tell any other
    application's. Access is checked by the receiving worker (`handoff.from_sibling`)."""
    import hashlib  # here: only a document with routes has hand-off sockets

    digest = hashlib.sha256(application.encode()).hexdigest()[:24]
    return f"\0corral-{master_pid}-handoff-{digest}"


def bind_handoff(address: str, backlog: int) -> socket.socket:
    """An application's hand-off socket, listening. Not inheritable: it stays with this
    master's workers (a USR2 master binds its own, at its own address)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(address)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot create a hand-off socket: {exc.strerror or exc}") from None
    return sock

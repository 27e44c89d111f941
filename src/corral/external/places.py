"""Where a supervised pool's processes listen: the socket corral binds, or the addresses it
picks for programs that bind their own.

``fd``: one loopback socket, bound and listening in the master, handed to every process of the
pool (they share its queue, as preforked servers do); ``port``: a free loopback port per
process slot; ``unix``: a socket path per slot, in a directory of the master's run directory
that belongs to the program's user. A pool keeps its places for its life, so that its
processes' addresses stay put across their restarts.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket

from corral.external.command import Mode, Place

__all__ = ["Places", "run_directory"]

_RUN_DIRECTORY: list[str] = []
_SERIALS = itertools.count()


def run_directory() -> str:
    """The master's directory for unix sockets of programs that bind their own (made once,
    mode 0711: a program running as another user reaches its own socket file)."""
    if not _RUN_DIRECTORY:
        import tempfile  # here: its import would cost every worker memory (wsgi/input.py)

        path = tempfile.mkdtemp(prefix="corral-external-")
        os.chmod(path, 0o711)
        _RUN_DIRECTORY.append(path)
    return _RUN_DIRECTORY[0]


def free_port() -> int:
    """A loopback port no socket holds now (the program binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Places:
    """One pool's places: the shared socket (``fd``) or an address per slot."""

    def __init__(self, name: str, mode: Mode, owner: tuple[int, int] = (-1, -1)) -> None:
        self.name = name
        self.mode = mode
        self.owner = owner  # the uid and gid its programs run as (-1: corral's)
        self.serial = next(_SERIALS)
        self.socket: socket.socket | None = None  # fd mode: the listening socket handed over
        self._slots: dict[int, Place] = {}

    def at(self, slot: int) -> Place:
        """The place of ``slot``'s process (chosen once, then the same for its restarts)."""
        place = self._slots.get(slot)
        if place is None:
            place = self._slots[slot] = self._new(slot)
        return place

    def _new(self, slot: int) -> Place:
        if self.mode == "fd":
            if self.socket is None:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", 0))
                sock.listen(socket.SOMAXCONN)
                self.socket = sock
            port = self.socket.getsockname()[1]
            return Place("fd", f"127.0.0.1:{port}", port=port)
        if self.mode == "port":
            port = free_port()
            return Place("port", f"127.0.0.1:{port}", port=port)
        directory = os.path.join(run_directory(), self.name)
        if not os.path.isdir(directory):  # the program's, which creates its socket there
            os.mkdir(directory, 0o700)
            os.chown(directory, *self.owner)
        # a successor's paths are its own: the one it replaces removes its files when it goes
        path = os.path.join(directory, f"{self.serial}.{slot}.sock")
        return Place("unix", f"unix:{path}", path=path)

    def clear(self, slot: int) -> None:
        """Before ``slot``'s process starts: a socket file its predecessor left is removed,
        else the program's bind would fail."""
        place = self._slots.get(slot)
        if place is not None and place.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(place.path)

    @property
    def addresses(self) -> list[str]:
        """Every slot's address, in slot order (one, shared, in fd mode)."""
        found = [self._slots[slot].address for slot in sorted(self._slots)]
        return list(dict.fromkeys(found))

    def close(self) -> None:
        """The pool is gone: its socket closed, its socket files removed."""
        if self.socket is not None:
            self.socket.close()
            self.socket = None
        for slot in self._slots:
            self.clear(slot)

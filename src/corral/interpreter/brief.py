"""What the master passes to a worker it spawns on another interpreter: a `Brief`.

A forked worker finds its pool in memory (`corral.master.fork.Fork`): sockets, the compiled
routes, TLS contexts, the tables the workers share. None of that survives an exec, so the brief
holds what they are made from: the document (as JSON builtins, validated again on the other
side), which application and slot, and the numbers of the descriptors the exec keeps open
(its heartbeat pipe, stacks and orders sockets, the pool's listeners by address, its hand-off
socket, the memfds of the shared tables). It is written to a memfd whose number is the
worker's argument (`write`, `read`): a document may be larger than a pipe holds.

Both interpreters import this module: it must read what either writes, so the two run the
same corral version (the entry point checks it before reading: `corral.interpreter.handover`).
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

__all__ = ["Brief", "read", "write"]


class Brief(msgspec.Struct, frozen=True, kw_only=True):
    """One spawned worker's start, as the master's fork would have given it."""

    document: dict[str, Any]  # the pool's document (config.document.document_builtins)
    application: str  # the pool's name
    slot: int
    seat: int  # its place in the connection counts (master/connlimits.py)
    max_requests: int
    latency_histogram: bool
    start_cwd: str  # where an application's relative chdir and paths start
    beat_fd: int  # the write end of its heartbeat pipe
    stacks_fd: int  # its end of the stacks socket (server/stacks.py)
    orders_fd: int  # its end of the orders socket (master/renewal.py)
    listeners: dict[str, int]  # the pool's listening sockets, by address
    handoff_fd: int | None = None  # its hand-off socket (with routes)
    handoff_addresses: dict[str, str] = {}  # where each application takes hand-offs
    # the memfds of what the pool's workers share, each as the master mapped it (not the
    # tables of rate_limit and limit_conn, which the document refuses: interpreter/limits.py)
    tallies: dict[str, int] = {}  # the refusals' counts, by listener address
    load_board: int | None = None  # a threaded pool's connections per worker (acceptor.py)
    external_board: int | None = None  # the external applications' addresses (external/)

    def descriptors(self) -> list[int]:
        """Every descriptor the exec must keep open."""
        found = [self.beat_fd, self.stacks_fd, self.orders_fd, *self.listeners.values()]
        found += self.tallies.values()
        for fd in (self.handoff_fd, self.load_board, self.external_board):
            if fd is not None:
                found.append(fd)
        return found


def write(brief: Brief) -> int:
    """``brief`` in a new memfd that an exec keeps open, read from its start; its number."""
    fd = os.memfd_create("corral-brief", 0)  # (no MFD_CLOEXEC: the exec keeps it)
    data = memoryview(msgspec.json.encode(brief))
    while data:
        data = data[os.write(fd, data) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def read(fd: int) -> Brief:
    """The brief in the descriptor ``fd`` (closed)."""
    with os.fdopen(fd, "rb") as stream:
        return msgspec.json.decode(stream.read(), type=Brief)

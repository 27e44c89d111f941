"""Where each supervised pool's ready processes listen, for the workers that proxy to them.

The master knows when a process becomes ready, exits or is replaced; the workers that route
requests to it were forked earlier, and a change to an external application does not restart
them. So the master publishes the table (application name: the addresses of its ready
processes) on a page of memory it mapped before forking any worker, and a worker reads it when
it routes a request there: a process that is not ready is never in it (no request reaches a
program before it answers), and one that exits leaves it.

The page is a sequence lock: the master makes the counter odd, writes the table (JSON), makes
it even again; a reader takes the table when the counter was even and the same before and
after it read, and keeps its last parse while the counter has not moved (a request costs the
read of 8 bytes, not a parse).
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
from collections.abc import Iterator

__all__ = ["Board", "board"]

SIZE = 1 << 16  # the page's bytes: thousands of addresses
_HEAD = struct.Struct("<QI")  # the counter, the table's length
_COUNTER = struct.Struct("<Q")
_TRIES = 100  # reads that met a write under way before the reader keeps its last table


class Board:
    """The table on its shared page: `publish` in the master, `ready` in the workers."""

    def __init__(self, fd: int = -1) -> None:
        """``fd``: the master's page, inherited by a worker spawned on another interpreter
        (`corral.interpreter`); -1, a new page (a memfd: that worker can map it)."""
        if fd < 0:
            fd = os.memfd_create("corral-external-board")
            os.ftruncate(fd, SIZE)
        self.fd = fd
        self._page = mmap.mmap(fd, SIZE)  # MAP_SHARED
        self._seen = 0  # the counter the parsed table is of (0: the empty table)
        self._seen_bytes = bytes(_COUNTER.size)  # ... as the page holds it (compared per request)
        self._table: dict[str, list[str]] = {}
        # each application's ready addresses in turn (`next_address`), made again from each
        # table parsed: a request's turn is a `next`, not an index and a counter kept
        self._turns: dict[str, Iterator[str]] = {}

    def publish(self, table: dict[str, list[str]]) -> None:
        """The master's: ``table`` becomes what the workers read."""
        import json  # (here and in _reread: a server without external programs never needs it)

        data = json.dumps(table, separators=(",", ":")).encode()
        if _HEAD.size + len(data) > SIZE:
            raise ValueError(f"too many external addresses for the board ({len(data)} bytes)")
        counter = _COUNTER.unpack_from(self._page, 0)[0]
        _COUNTER.pack_into(self._page, 0, counter + 1)  # odd: a write under way
        self._page[_HEAD.size : _HEAD.size + len(data)] = data
        struct.pack_into("<I", self._page, _COUNTER.size, len(data))
        _COUNTER.pack_into(self._page, 0, counter + 2)

    def ready(self, name: str) -> list[str]:
        """The addresses of ``name``'s ready processes now (empty: none is ready)."""
        if self._page[: _COUNTER.size] != self._seen_bytes:
            self._reread()
        return self._table.get(name, [])

    def next_address(self, name: str) -> str | None:
        """One of ``name``'s ready addresses, each in turn; None when none is ready. (Every
        request routed to an external application asks: the counter's bytes compared, one
        dictionary look-up, one `next`.)"""
        if self._page[: _COUNTER.size] != self._seen_bytes:
            self._reread()
        turns = self._turns.get(name)
        if turns is None:
            addresses = self._table.get(name)
            if not addresses:
                return None
            turns = self._turns[name] = itertools.cycle(addresses)
        return next(turns)

    def _reread(self) -> None:  # (when the board changed: not per request)
        import json

        for _ in range(_TRIES):
            counter, length = _HEAD.unpack_from(self._page, 0)
            if counter % 2:
                continue
            data = self._page[_HEAD.size : _HEAD.size + length]
            if _COUNTER.unpack_from(self._page, 0)[0] == counter:
                self._table = json.loads(data) if data else {}
                self._turns = {}
                self._seen = counter
                self._seen_bytes = _COUNTER.pack(counter)
                return


_BOARD: list[Board] = []


def board(fd: int = -1) -> Board:
    """This process's board: the master makes it before its first fork (`Externals`), the
    workers it forks share it; a worker spawned on another interpreter maps the master's,
    ``fd``, first."""
    if not _BOARD:
        _BOARD.append(Board(fd))
    return _BOARD[0]

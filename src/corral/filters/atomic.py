"""Word operations on memory shared by a pool's processes (`corral.filters.ratelimit`): here
under a lock of the memory's file (``fcntl``: the kernel releases it when its holder dies);
in the compiled core, atomic instructions without a lock (``atomic.pxd``)."""

from __future__ import annotations

import fcntl

__all__ = [
    "add",
    "added",
    "load",
    "lock",
    "mark_of",
    "nanoseconds",
    "store",
    "swap",
    "unlock",
    "words_of",
]


def words_of(view: memoryview) -> memoryview:
    """What the operations below take: the shared memory's 64-bit words (compiled: their
    address, valid while ``view`` is held)."""
    return view


def mark_of(key: str) -> int:
    """A key's word in the table: its keyed hash (the same in every process forked from the
    master), never 0, which marks a free slot."""
    return (hash(key) & 0xFFFF_FFFF_FFFF_FFFF) or 1


def nanoseconds(seconds: float) -> int:
    return int(seconds * 1e9)


def lock(fd: int) -> None:
    fcntl.lockf(fd, fcntl.LOCK_EX)


def unlock(fd: int) -> None:
    fcntl.lockf(fd, fcntl.LOCK_UN)


def load(words: memoryview, index: int) -> int:
    return words[index]


def store(words: memoryview, index: int, value: int) -> None:
    words[index] = value


def swap(words: memoryview, index: int, old: int, new: int) -> bool:
    """Set the word to ``new`` if it is ``old``: whether it was."""
    if words[index] != old:
        return False
    words[index] = new
    return True


def add(words: memoryview, index: int, value: int) -> None:
    words[index] += value


def added(words: memoryview, index: int, value: int) -> int:
    """Add ``value`` (negative: take away) to a count: the count after it."""
    words[index] = count = (words[index] + value) & 0xFFFF_FFFF_FFFF_FFFF
    return count if count < 1 << 63 else count - (1 << 64)

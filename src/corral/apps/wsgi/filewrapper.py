"""``wsgi.file_wrapper``: lets the server send a real file with os.sendfile."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any


class FileWrapper:
    """Iterates a file-like in blocks; the runner sends real files with sendfile instead."""

    __slots__ = ("blksize", "close", "filelike")

    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        self.filelike = filelike
        self.blksize = blksize
        if hasattr(filelike, "close"):
            self.close = filelike.close

    def sendfile_range(self) -> tuple[int, int, int] | None:
        """``(fd, offset, count)`` when the file can go out with os.sendfile, else None."""
        try:
            fd = self.filelike.fileno()
            offset = self.filelike.tell()
            size = os.fstat(fd).st_size
        except (AttributeError, OSError, ValueError):
            return None
        if size <= offset:
            return None
        return fd, offset, size - offset

    def __iter__(self) -> Iterator[bytes]:
        read = self.filelike.read
        while True:
            block = read(self.blksize)
            if not block:
                return
            yield block

"""``wsgi.errors``: a text stream into the server's error log."""

from __future__ import annotations

import logging
from collections.abc import Iterable


class ErrorStream:
    """Lines written by the application go to the error log at ERROR level."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._partial = ""

    def write(self, text: str) -> int:
        data = self._partial + text
        *lines, self._partial = data.split("\n")
        for line in lines:
            self._logger.error("%s", line)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._partial:
            self._logger.error("%s", self._partial)
            self._partial = ""

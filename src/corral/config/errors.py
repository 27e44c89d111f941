"""The configuration's two errors, and how they quote a value.

`Invalid` is a value that does not fit, raised by a parser before it knows where the value was
given; `ConfigError` is the one line the user reads, with that place (a flag, a file's key, a
document path). `show` writes a value in either as the user wrote it. Every module of
`corral.config` may import this one: it imports nothing of corral's, so neither the value
parsers nor the readers of other servers' files import the settings or the document for their
errors.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["ConfigError", "Invalid", "show"]


class ConfigError(ValueError):
    """Bad configuration input. `str()` is one line: where the problem is and what was expected.

    Examples: ``--workers: expected int >= 1 or "auto", got "two"``,
    ``config.toml: $.workers: expected int >= 1 or "auto", got "two"``,
    ``$.applications.main.processes.spare: expected int >= 0, got "x"``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split("\n")))


class Invalid(ValueError):
    """A value that does not fit; `where` is added by the caller (a flag or a document path).

    `at` is a sub-path inside the value (``"[2]"``, ``".FOO"``) for values that are lists or
    tables; `message` replaces the ``expected ..., got ...`` text when given.
    """

    def __init__(
        self, expected: str = "", value: Any = ..., at: str = "", message: str = ""
    ) -> None:
        super().__init__(expected)
        self.expected = expected
        self.value = value
        self.at = at
        self.message = message

    def __str__(self) -> str:
        if self.message:
            return self.message
        if self.value is ...:
            return f"expected {self.expected}"
        return f"expected {self.expected}, got {show(self.value)}"


def show(value: Any, limit: int = 60) -> str:
    """A value as a user writes it (JSON spelling), on one line, shortened past `limit`."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return repr(value)  # JSON would say null
        if value.is_integer():
            value = int(value)
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

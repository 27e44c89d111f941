"""A setting's value as a source gave it: its own module so that the readers of each kind of
source (``sources.py``: flags, TOML, JSON, Python; ``uwsgi.py``: ini files) share it without
importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Given"]


@dataclass(frozen=True, slots=True)
class Given:
    """A setting's value as given (input form, already type-checked) and where it came from."""

    value: Any
    where: str  # "--workers", "APP" or "config.toml: $.workers"
    nested: bool = False  # whether errors inside the value append a sub-path to `where`

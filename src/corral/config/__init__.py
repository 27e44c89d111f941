"""Configuration: the one schema (settings declared once), its sources and the document.

Public surface (import from here, not from the submodules):

- `load(argv) -> Document`: the document a command line describes (flags, -c FILE);
- `Document`, `Listener`, `Application`, `Settings`: the validated document (frozen structs);
- `validate_document(data) -> Document`: validate a whole document given as parsed JSON;
- `dump_document(doc) -> str`: indented JSON; `document_builtins(doc)`: the builtins it shows
  (file modes in octal);
- `parse_bind(text) -> BindAddress`; `LogLevel`; `ConfigError` (one-line message);
- `SETTINGS`, `Setting`, `Scope`: the declarations everything else is generated from.

Importing this package costs msgspec and the stdlib only: the command-line machinery
(argparse, file parsing) in `corral.config.sources` is imported on first use of `load`,
`parse_command_line` or `format_help`.
"""

from typing import TYPE_CHECKING, Any

from corral.config.document import (
    Application,
    Document,
    Listener,
    Settings,
    document_builtins,
    dump_document,
    validate_document,
)
from corral.config.errors import ConfigError
from corral.config.listening import DEFAULT_BIND, BindAddress, parse_bind
from corral.config.settings import SETTINGS, Scope, Setting
from corral.config.values import LogLevel

if TYPE_CHECKING:
    from corral.config.sources import CommandLine, format_help, load, parse_command_line

__all__ = [
    "DEFAULT_BIND",
    "SETTINGS",
    "Application",
    "BindAddress",
    "CommandLine",
    "ConfigError",
    "Document",
    "Listener",
    "LogLevel",
    "Scope",
    "Setting",
    "Settings",
    "document_builtins",
    "dump_document",
    "format_help",
    "load",
    "parse_bind",
    "parse_command_line",
    "validate_document",
]

_LAZY = frozenset({"CommandLine", "format_help", "load", "parse_command_line"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from corral.config import sources

        return getattr(sources, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

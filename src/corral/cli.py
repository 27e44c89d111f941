"""The `corral` command: argv in, exit code out.

This module owns what the command prints and its exit codes, nothing else: parsing and
validation live in `corral.config`, serving in `corral.master.arbiter` (imported only when the
server actually starts). Exit codes: 0 for --help, --version and a valid --check-config; 2 for
any configuration error, reported as one line on stderr (``corral: error: ...``), never a
traceback; otherwise whatever `serve` returns.
"""

import sys

from corral import __version__
from corral.config import ConfigError, dump_document, format_help, parse_command_line

__all__ = ["main"]

EXIT_CONFIG_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    """Run the command with `argv` (default: ``sys.argv[1:]``) and return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        command = parse_command_line(args)
        if command.help:
            sys.stdout.write(format_help())
            return 0
        if command.version:
            print(f"corral {__version__}")
            return 0
        doc = command.document()
    except ConfigError as exc:
        print(f"corral: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    if command.check_config:
        print(dump_document(doc))
        return 0
    from corral.master.arbiter import Origin, serve

    return serve(doc, Origin(command.document, list(args), config_file=command.config))

"""The `corral` command: argv in, exit code out.

This module owns what the command prints and its exit codes, nothing else: parsing and
validation live in `corral.config`, serving in `corral.master.arbiter` (imported only when the
server actually starts), the control API's client in `corral.control.ctl` (``corral ctl ...``).
Exit codes: 0 for --help, --version and a valid --check-config; 2 for any configuration
error, reported as one line on stderr (``corral: error: ...``), never a traceback; otherwise
whatever `serve` returns. What is read but not acted on (a uWSGI option corral lacks) is one
warning line each, and the command goes on: ``corral: warning: ...`` on standard error at
start-up, the error log on a reload.

Without an APP and a config file, `--state-dir` or `--control` start the server from the
configuration saved in the state directory (empty at first), to be configured through the
control API.
"""

import logging
import sys
from functools import partial

from corral import __version__
from corral.config import ConfigError, Document, dump_document, format_help, parse_command_line
from corral.observe.errorlog import LOGGER_NAME

__all__ = ["main"]

EXIT_CONFIG_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    """Run the command with `argv` (default: ``sys.argv[1:]``) and return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["ctl"]:
        from corral.control.ctl import main as ctl_main

        return ctl_main(args[1:])
    try:
        command = parse_command_line(args)
        if command.help:
            sys.stdout.write(format_help())
            return 0
        if command.version:
            print(f"corral {__version__}")
            return 0
        control = None
        if command.control is not None or command.state_dir is not None:
            from corral.control import options, state

            control = options.resolve(
                command.control,
                command.control_token,
                command.state_dir,
                command.names_an_application,
            )
        if control is not None and control.owns_config:
            saved = state.load(control.state_file)
            doc = command.document(base=saved if saved is not None else Document())
        else:
            doc = command.document()
    except ConfigError as exc:
        print(f"corral: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    if command.check_config:
        print(dump_document(doc))
        return 0
    from corral.master.arbiter import Origin, serve

    if control is not None and control.owns_config:
        # the saved document is its own source: a reload restarts it as it runs
        return serve(doc, Origin(None, list(args)), control)
    # a reload reads the file again: its warnings go to the error log then
    reread = partial(command.document, warn=logging.getLogger(LOGGER_NAME).warning)
    return serve(doc, Origin(reread, list(args), config_file=command.config_path), control)

"""The `corral` command: argv in, exit code out.

This module owns what the command prints and its exit codes, nothing else: parsing and
validation live in `corral.config`, serving in `corral.master.startup` (imported only when the
server actually starts), the control API's client in `corral.control.ctl` (``corral ctl ...``).
Exit codes: 0 for --help, --version and a valid --check-config; 2 for any configuration
error, reported as one line on stderr (``corral: error: ...``), never a traceback; otherwise
whatever `serve` returns. What is read but not acted on (a uWSGI option corral lacks) is one
warning line each, and the command goes on: ``corral: warning: ...`` on standard error at
start-up, the error log on a reload.

Without an APP and a config file, `--state-dir` or `--control` start the server from the
configuration saved in the state directory (empty at first), to be configured through the
control API. With `daemon` (``-D``) the command detaches the server (`corral.master.daemon`)
and exits once it serves. Warnings about what a source gives that corral ignores are one line
each: ``corral: warning: ...`` on standard error at start-up, the error log on a reload.
"""

import logging
import os
import sys
from functools import partial

from corral import __version__, core
from corral.config import ConfigError, Document, document_builtins, format_help, parse_command_line
from corral.config.sources import CommandLine
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
            _output(format_help())
            return 0
        if command.version:
            _output(f"corral {__version__} ({core.NAME})\n")
            return 0
        control = None
        if command.control is not None or command.state_dir is not None:
            from corral.control import options, state

            control = options.resolve(
                command.control,
                command.control_token,
                command.state_dir,
                command.names_an_application or command.emperor_directory() is not None,
            )
        emperor = command.emperor_directory()
        # the vassal files, or the saved document, are their own source: a reload restarts
        # them as they are, and there is no config file to read again
        own_source = emperor is not None or (control is not None and control.owns_config)
        if emperor is not None:
            doc = _emperor_base(command, emperor)
        elif control is not None and control.owns_config:
            saved = state.load(control.state_file)
            doc = command.document(base=saved if saved is not None else Document())
        else:
            doc = command.document()
        if doc.settings.watch_config:
            _check_watched(command, own_source)
    except ConfigError as exc:
        print(f"corral: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    if command.check_config:
        if command.config_note is not None:
            print(f"corral: {command.config_note}", file=sys.stderr)
        _output(_shown(doc) + "\n")
        return 0
    from corral.config.parser import forget

    forget()  # parsed: the master (and every worker) need not keep the parser
    from corral.master.generation import Origin
    from corral.master.startup import serve

    if own_source:
        origin = Origin(None, list(args))
    else:
        reread = partial(command.document, warn=logging.getLogger(LOGGER_NAME).warning)
        origin = Origin(
            reread, list(args), config_file=command.config_path, config_note=command.config_note
        )
    detached = None
    if doc.settings.daemon:  # (corral.master.daemon is imported only then)
        from corral.master import daemon

        if daemon.wanted(doc.settings):
            outcome = daemon.detach(doc.settings.enable_stdio_inheritance)
            if isinstance(outcome, int):  # the foreground process: the daemon served, or not
                return outcome
            detached = outcome
    started = detached.ready if detached else None
    code = serve(doc, origin, control, started=started, emperor=emperor, fd=command.fd)
    if detached is not None:
        detached.exited(code)
    return code


def _check_watched(command: CommandLine, document_is_its_own_source: bool) -> None:
    """``watch_config`` needs a config file that a reload reads again."""
    if document_is_its_own_source:
        raise ConfigError(
            "watch_config: the configuration is the control API's saved document or the "
            "emperor's files, not a config file a reload reads"
        )
    path = command.config_path
    if path is None or path.startswith("python:"):
        raise ConfigError("watch_config: there is no config file to watch: give one with -c FILE")


def _output(text: str) -> None:
    """``text`` to standard output, which may be a pipe whose reader has gone (``corral
    --check-config | head``): the output just ends there, without a traceback."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # the interpreter flushes standard output once more at exit: give it /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _emperor_base(command: CommandLine, directory: str) -> Document:
    """The emperor's own document: its server-wide flags and file options, no application."""
    if command.state_dir is not None:
        raise ConfigError(
            "--emperor: the configuration is the files of DIR, not a state directory "
            "(--control serves the API)"
        )
    if command.ini is None and command.config is not None and command.emperor is not None:
        raise ConfigError("--emperor: the applications are the vassal files: give no -c")
    if not os.path.isdir(directory):
        where = "--emperor" if command.emperor is not None else f"{command.config_path}: emperor"
        raise ConfigError(f"{where}: {directory}: not a directory")
    return command.emperor_document()


def _shown(doc: Document) -> str:
    """The document as --check-config prints it: indented JSON, secrets masked."""
    import msgspec

    from corral.config.values import masked

    text = msgspec.json.encode(masked(document_builtins(doc)))
    return msgspec.json.format(text, indent=2).decode()

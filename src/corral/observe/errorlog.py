"""The error log: stdlib logging, one handler, one line per event (tracebacks follow).

The master sets it up (`setup_error_log`, then the user's `apply_log_config` over it, which
may reconfigure the ``corral`` logger itself); the workers inherit both through the fork.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any, TextIO

LOGGER_NAME = "corral"
_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"
# ANSI colours of the levels (`use_colors`), Uvicorn's
_COLORS = {"DEBUG": "36", "INFO": "32", "WARNING": "33", "ERROR": "31", "CRITICAL": "91"}


class _ColoredLevels(logging.Formatter):
    """The level of each line in its colour; the record itself is left as it was."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        color = _COLORS.get(record.levelname)
        if color is None:
            return super().formatMessage(record)
        shown = logging.makeLogRecord(record.__dict__)
        shown.levelname = f"\033[{color}m{record.levelname}\033[0m"
        return super().formatMessage(shown)


def setup_error_log(target: str | None, level: str, colors: bool = False) -> logging.Logger:
    """Send the ``corral`` logger to ``target`` (``-`` or None: stderr; else a file path),
    the levels coloured with ``colors``."""
    logger = logging.getLogger(LOGGER_NAME)
    for old in list(logger.handlers):
        logger.removeHandler(old)
        old.close()
    if target in (None, "", "-"):
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
    else:
        handler = logging.FileHandler(target, encoding="utf-8")
    formatter = _ColoredLevels if colors else logging.Formatter
    handler.setFormatter(formatter(_FORMAT, "%Y-%m-%d %H:%M:%S %z"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return logger


def setup_logging(settings: Any) -> logging.Logger:
    """The error log as the document's server-wide ``settings`` ask: `setup_error_log`, then
    their ``log_config`` over it (`ValueError`: it cannot be applied)."""
    logger = setup_error_log(settings.error_logfile, str(settings.log_level), settings.use_colors)
    if settings.log_config is not None:
        apply_log_config(settings.log_config)
    return logger


def logging_changed(new: Any, old: Any) -> bool:
    """Whether a reload from the ``old`` settings to the ``new`` sets the error log up anew:
    what `setup_logging` reads changed, or a log config file is named (read again: edited,
    then HUP, as Gunicorn reads it)."""
    read = ("error_logfile", "log_level", "use_colors", "log_config")
    return new.log_config is not None or any(getattr(new, k) != getattr(old, k) for k in read)


def apply_log_config(path: str) -> None:
    """Apply a logging configuration file (`log_config`): JSON or YAML for
    `logging.config.dictConfig`, an ini file for `fileConfig`; loggers already made stay
    enabled unless it says otherwise. `ValueError` with one line saying what is wrong."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    import logging.config  # only for a log_config: 7 ms of imports no other server needs

    try:
        if path.endswith((".yaml", ".yml")):
            logging.config.dictConfig(_defaults(_yaml(path, text)))
        elif path.endswith(".json") or text.lstrip().startswith("{"):
            import json

            logging.config.dictConfig(_defaults(json.loads(text)))
        else:
            logging.config.fileConfig(path, disable_existing_loggers=False)
    except ValueError as exc:  # json's, dictConfig's: they say what and where
        raise ValueError(f"{path}: {exc}") from None
    except Exception as exc:  # fileConfig's: configparser's, KeyError for a missing section
        raise ValueError(f"{path}: {type(exc).__name__}: {exc}") from None


def _yaml(path: str, text: str) -> Any:
    try:
        yaml = importlib.import_module("yaml")  # PyYAML, an optional dependency
    except ImportError:
        raise ValueError(f"{path}: a YAML file needs PyYAML: pip install pyyaml") from None
    return yaml.safe_load(text)


def _defaults(config: Any) -> Any:
    if isinstance(config, dict):
        config.setdefault("version", 1)
        config.setdefault("disable_existing_loggers", False)
    return config


def reopen_error_log() -> None:
    """USR1 (logrotate): reopen the error log file at its path; stderr stays as it is."""
    for handler in logging.getLogger(LOGGER_NAME).handlers:
        if isinstance(handler, logging.FileHandler):
            handler.acquire()
            try:
                handler.close()
                handler.stream = handler._open()
            finally:
                handler.release()


def error_log_stream() -> TextIO:
    """The file the error log writes to, for writers below logging (faulthandler)."""
    for handler in logging.getLogger(LOGGER_NAME).handlers:
        stream = getattr(handler, "stream", None)
        if stream is not None:
            return stream
    return sys.stderr

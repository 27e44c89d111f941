"""The error log: stdlib logging, one handler, one line per event (tracebacks follow)."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

LOGGER_NAME = "corral"
_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"


def setup_error_log(target: str | None, level: str) -> logging.Logger:
    """Send the ``corral`` logger to ``target`` (``-`` or None: stderr; else a file path)."""
    logger = logging.getLogger(LOGGER_NAME)
    for old in list(logger.handlers):
        logger.removeHandler(old)
        old.close()
    if target in (None, "", "-"):
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
    else:
        handler = logging.FileHandler(target, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT, "%Y-%m-%d %H:%M:%S %z"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return logger


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

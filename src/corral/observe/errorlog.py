"""The error log: stdlib logging, one handler, one line per event (tracebacks follow)."""

from __future__ import annotations

import logging
import sys

LOGGER_NAME = "corral"
_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"


def setup_error_log(target: str | None, level: str) -> logging.Logger:
    """Send the ``corral`` logger to ``target`` (``-`` or None: stderr; else a file path)."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    if target in (None, "", "-"):
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
    else:
        handler = logging.FileHandler(target, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT, "%Y-%m-%d %H:%M:%S %z"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return logger

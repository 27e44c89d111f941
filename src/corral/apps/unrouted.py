"""The application of a worker pool whose document has none: no request ever reaches it.

A document whose listeners only serve files or ``return`` answers still needs workers to run
its routes, so the master gives it a pool of its own (`corral.master.generation.ROUTES_POOL`);
a worker is built around an application, and that pool's is this one. No route passes to it:
the document names no application, and a pass built from variables to one it does not have
is answered 404 by the router. An answer from here would be corral's own bug: 500, and one
line in the error log that says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from corral.observe.errorlog import LOGGER_NAME

__all__ = ["application"]


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    logging.getLogger(LOGGER_NAME).error(
        "%s %s reached the pool of a document without an application: routes never pass "
        "there (a bug of corral's)",
        environ.get("REQUEST_METHOD"),
        environ.get("PATH_INFO"),
    )
    start_response("500 Internal Server Error", [("Content-Length", "0")])
    return [b""]

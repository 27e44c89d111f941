"""A worker's adapter, WSGI or ASGI (the one request cycle of `corral.server.connection`),
made from what its spec and settings say. Each imports its own modules when it is made: a
WSGI worker never imports ASGI's, nor an ASGI worker WSGI's."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.apps.asgi.adapter import AsgiAdapter
    from corral.apps.wsgi.runner import WsgiAdapter

# what each interface's worker imports (`corral.server.worker.prepare` too, before a fork's
# user switch)
MODULES = {
    "wsgi": ("corral.apps.wsgi.runner", "corral.apps.wsgi.environ"),
    "asgi": ("corral.apps.asgi.adapter", "corral.apps.asgi.websocket", "corral.apps.asgi.lifespan"),
}


def wsgi_adapter(
    app: Any,
    prefix: str,
    more_targets: Any,
    watchdog: Any,
    spec: Any,
    log: logging.Logger,
    hooks: Any,
) -> WsgiAdapter:
    """``app``'s adapter at ``prefix`` (NGINX Unit's further targets: ``more_targets``), its
    requests timed by ``watchdog`` (apps/deadline.py) if any."""
    from corral.apps.wsgi.environ import set_unsafe_fields
    from corral.apps.wsgi.runner import WsgiAdapter

    application, settings = spec.application, spec.settings
    set_unsafe_fields(settings.discard_unsafe_fields)
    return WsgiAdapter(
        app,
        prefix=prefix,
        more_targets=more_targets,
        threads=application.threads,
        thread_scheduling=application.thread_scheduling,
        body_buffer_size=settings.body_buffer_size,
        response_buffer_size=settings.response_buffer_size,
        response_spool_size=settings.response_spool_size,
        request_buffering=settings.request_buffering,
        body_temp_dir=settings.body_temp_dir,
        multiprocess=spec.multiprocess,
        log=log,
        watchdog=watchdog,
        hooks=hooks,
    )


def asgi_adapter(
    app: Any, prefix: str, more_targets: Any, spec: Any, log: logging.Logger, hooks: Any
) -> AsgiAdapter:
    """``app``'s adapter, as `wsgi_adapter`'s; its WebSocket options from the settings."""
    from corral.apps.asgi.adapter import AsgiAdapter
    from corral.apps.asgi.websocket import WebSocketOptions

    application, settings = spec.application, spec.settings
    if application.threads > 1 and spec.slot == 0:
        # said once per pool, not by every worker; the setting still applies to WSGI
        log.warning("ASGI application: threads does not apply (its tasks run on the loop)")
    return AsgiAdapter(
        app,
        log=log,
        prefix=prefix,
        more_targets=more_targets,
        request_timeout=application.request_timeout,
        request_timeout_grace=application.request_timeout_grace,
        hooks=hooks,
        websocket=None
        if settings.ws == "none"
        else WebSocketOptions(
            max_size=settings.ws_max_size,
            max_queue=settings.ws_max_queue,
            ping_interval=settings.ws_ping_interval,
            ping_timeout=settings.ws_ping_timeout,
            close_timeout=settings.ws_close_timeout,
            per_message_deflate=settings.ws_per_message_deflate,
        ),
    )

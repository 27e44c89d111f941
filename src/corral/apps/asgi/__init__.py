"""The ASGI side of a worker: `corral.apps.asgi.adapter.AsgiAdapter` (HTTP, each request a
cycle of `corral.apps.asgi.runner`; WebSocket sessions in `corral.apps.asgi.websocket_session`)."""

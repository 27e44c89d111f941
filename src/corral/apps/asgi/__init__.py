"""The ASGI side of a worker: `corral.apps.asgi.runner.AsgiAdapter` (HTTP; WebSocket
sessions in `corral.apps.asgi.websocket_session`)."""

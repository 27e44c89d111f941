"""The ASGI side of a worker: `corral.apps.asgi.runner.AsgiAdapter` (HTTP only for now)."""

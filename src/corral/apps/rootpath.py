"""Uvicorn's ``root_path`` (the application setting): the path a proxy took off, put back.

A proxy that serves an application under ``/api`` and passes ``/api/items`` on as ``/items``
leaves the application unaware of where it is mounted, so its links miss ``/api``. With
``root_path = "/api"`` the application is told, as Uvicorn tells it:

- ASGI (HTTP and WebSocket scopes): ``root_path`` starts with it, and so do ``path`` and
  ``raw_path`` (the spec's ``path`` includes ``root_path``): ``/api/items``;
- WSGI: ``SCRIPT_NAME`` starts with it; ``PATH_INFO`` stays ``/items`` (Uvicorn's own WSGI
  wrapper puts it in both, which no WSGI router reads right).

NGINX Unit's ``prefix`` (matched in the request's path, corral/apps/wsgi/environ.py `Mounted`,
corral/apps/asgi/scope.py) applies first: its part comes after the root path. The wrappers
here are made only for an application that sets ``root_path``: the others pay nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["behind"]


def behind(app: Any, root_path: str, interface: str) -> Any:
    """``app`` told that it is mounted at ``root_path`` ("/api") by a proxy in front."""
    if interface == "asgi":
        from corral.apps.asgi.legacy import as_asgi3

        return _AsgiRooted(as_asgi3(app), root_path)
    return _WsgiRooted(app, root_path)


class _WsgiRooted:
    __slots__ = ("app", "root")

    def __init__(self, app: Any, root_path: str) -> None:
        self.app = app
        self.root = root_path.encode("utf-8").decode("latin-1")  # PEP 3333's native string

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        environ["SCRIPT_NAME"] = self.root + environ["SCRIPT_NAME"]
        return self.app(environ, start_response)


class _AsgiRooted:
    __slots__ = ("app", "raw", "root")

    def __init__(self, app: Any, root_path: str) -> None:
        self.app = app
        self.root = root_path
        self.raw = root_path.encode("utf-8")

    def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "lifespan":
            scope["root_path"] = self.root + scope["root_path"]
            scope["path"] = self.root + scope["path"]
            scope["raw_path"] = self.raw + scope["raw_path"]
        return self.app(scope, receive, send)

"""The control API's endpoints: a request (method, path, body) in, a `Reply` out.

No socket here (`server.py` speaks HTTP); the arbiter is the only state. Endpoints:

- ``/config`` and any path inside it: GET, PUT, POST (append to an array), DELETE. A change
  is computed on the running document inside `Arbiter.apply`, so concurrent changes apply
  one after the other, each on the result of the one before; the whole new document is
  validated, then applied; the answer comes once it serves or was rolled back.
- ``/status`` and its sub-paths: GET; what the master knows of its workers.
- ``/control/applications/NAME/restart``: GET (as in Unit); new workers for the same document.
- ``/``: GET; ``{"config": ..., "status": ...}``.

Answers are Unit's: ``{"success": "Reconfiguration done."}``, or
``{"error": TITLE, "detail": ..., "path": ...}`` with 400, 404, 405 (and ``Allow``) or 500.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec

from corral.config import ConfigError, Document, validate_document
from corral.control import tree
from corral.master.arbiter import ApplyFailed, Arbiter

DONE = "Reconfiguration done."
_CONFIG_METHODS = ("GET", "PUT", "POST", "DELETE")
_READ_ONLY = ("GET",)
_APPLY_TITLES = {
    400: "Invalid configuration.",
    500: "Failed to apply new configuration.",
    503: "The server is stopping.",
}


@dataclass
class Reply:
    """One answer: the status, the JSON value of the body, extra header fields."""

    status: int
    body: Any
    headers: list[tuple[str, str]] = field(default_factory=list)


def error(status: int, title: str, detail: str = "", path: str = "", **extra: Any) -> Reply:
    body: dict[str, Any] = {"error": title}
    if detail:
        body["detail"] = detail
    if path:
        body["path"] = path
    body.update(extra)
    return Reply(status, body)


def not_allowed(method: str, path: str, allow: tuple[str, ...]) -> Reply:
    reply = error(405, "Method isn't allowed.", f"{method} is not allowed on {path}", path)
    reply.headers.append(("Allow", ", ".join(allow)))
    return reply


async def handle(arbiter: Arbiter, method: str, target: str, body: bytes) -> Reply:
    """The answer to one request; ``target`` is the request target (path and query)."""
    path = target.partition("?")[0]
    try:
        if path == "/config" or path.startswith("/config/"):
            return await _config(arbiter, method, path, tree.split(path[7:]), body)
        if path == "/status" or path.startswith("/status/"):
            if method != "GET":
                return not_allowed(method, path, _READ_ONLY)
            return Reply(200, tree.get(status(arbiter), tree.split(path[7:])))
        if path.startswith("/control/"):
            return await _control(arbiter, method, path, tree.split(path[8:]))
        if path == "/":
            if method != "GET":
                return not_allowed(method, path, _READ_ONLY)
            return Reply(200, {"config": _tree(arbiter.current.doc), "status": status(arbiter)})
        raise tree.NotFound(f"{path} does not exist", path)
    except tree.InvalidJson as exc:
        location = {"offset": exc.offset, "line": exc.line, "column": exc.column}
        if exc.offset is None:
            return error(400, exc.title, exc.detail)
        return error(400, exc.title, exc.detail, location=location)
    except tree.NotAllowed as exc:
        return not_allowed(method, exc.path or path, exc.allow)
    except tree.TreeError as exc:
        return error(exc.status, exc.title, exc.detail, exc.path or path)
    except ConfigError as exc:
        message = str(exc)
        return error(400, "Invalid configuration.", message, tree.api_path(message))
    except ApplyFailed as exc:
        title = _APPLY_TITLES.get(exc.status, _APPLY_TITLES[500])
        return error(exc.status, title, exc.detail)


def _tree(doc: Document) -> Any:
    return msgspec.to_builtins(doc)


async def _config(
    arbiter: Arbiter, method: str, path: str, segments: list[str], body: bytes
) -> Reply:
    if method == "GET":
        return Reply(200, tree.get(_tree(arbiter.current.doc), segments))
    operation: Callable[[Any], Any]
    if method == "PUT":
        operation = partial(tree.put, segments=segments, value=tree.decode(body))
    elif method == "POST":
        if not segments:
            return not_allowed(method, path, ("GET", "PUT", "DELETE"))
        operation = partial(tree.post, segments=segments, value=tree.decode(body))
    elif method == "DELETE":
        operation = partial(tree.delete, segments=segments)
    else:
        return not_allowed(method, path, _CONFIG_METHODS)

    def change(doc: Document) -> Document:
        return validate_document(operation(_tree(doc)))

    await arbiter.apply(change, f"{method} {path}")
    return Reply(200, {"success": DONE})


async def _control(arbiter: Arbiter, method: str, path: str, segments: list[str]) -> Reply:
    if len(segments) != 3 or segments[0] != "applications" or segments[2] != "restart":
        raise tree.NotFound(f"{path} does not exist", path)
    if method != "GET":
        return not_allowed(method, path, _READ_ONLY)
    name = segments[1]

    def same(doc: Document) -> Document:
        if name not in doc.applications:
            where = tree.join(["applications", name])
            raise tree.NotFound(f"{where} does not exist", where)
        return doc

    await arbiter.apply(same, f"restart of {name}", restart=True)
    return Reply(200, {"success": "Ok"})


def status(arbiter: Arbiter) -> dict[str, Any]:
    """Per application: its processes running (ready), starting and idle (ready, no request
    in progress at their last heartbeat), and the requests its workers served (as of their
    last heartbeat, exited workers included)."""
    applications: dict[str, Any] = {}
    total = 0
    for name in arbiter.current.doc.applications:
        running = starting = idle = 0
        served = arbiter.served_by_gone.get(name, 0)
        for worker in arbiter.workers.values():
            if worker.generation.app_name != name:
                continue
            served += worker.served
            if worker.retiring:
                continue
            if worker.ready:
                running += 1
                idle += worker.request is None
            else:
                starting += 1
        total += served
        applications[name] = {
            "processes": {"running": running, "starting": starting, "idle": idle},
            "requests": {"total": served},
        }
    return {"requests": {"total": total}, "applications": applications}

"""A share served the way the share action will serve it: a routes value compiled, a request
routed, `StaticFiles.serve` on the action, the fallback taken when the answer says so, the
body read from memory or from its descriptor (then closed). For the static tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from corral.routing import Router, RouteRequest, Share, compile_routes
from corral.static.files import StaticFiles


class Reply:
    """What a client would get: the status, the fields (a name's first value by its lower-case
    name, and all in order), the body bytes (none for HEAD)."""

    def __init__(self, status: int, fields: list[tuple[str, str]], body: bytes, length: int):
        self.status = status
        self.all = fields
        self.fields = {}
        for name, value in fields:
            self.fields.setdefault(name.lower(), value)
        self.body = body
        self.length = length

    def __repr__(self) -> str:
        return f"<Reply {self.status} {self.all} {self.body[:40]!r}>"


class Site:
    """``routes`` (a Unit routes value) served by one `StaticFiles`."""

    def __init__(self, routes: Any, files: StaticFiles | None = None) -> None:
        self.router: Router = compile_routes(routes)
        self.files = files if files is not None else StaticFiles(valid=0)

    def get(
        self,
        target: str | bytes,
        headers: list[tuple[bytes, bytes]] | None = None,
        method: str = "GET",
        host: str = "localhost",
    ) -> Reply:
        raw = target.encode("latin-1") if isinstance(target, str) else target
        fields = [(b"Host", host.encode()), *(headers or [])]
        request = RouteRequest(method, raw, fields)
        action = self.router.resolve("routes", request)
        while isinstance(action, Share):
            answer = self.files.serve(action, request)
            if not answer.fallback:
                try:
                    body = answer.body
                    if answer.fd >= 0 and method != "HEAD":
                        body = os.pread(answer.fd, answer.count, answer.offset)
                        assert len(body) == answer.count
                finally:
                    answer.close()
                assert method != "HEAD" or not body or answer.status != 200
                return Reply(answer.status, answer.fields, body, answer.length)
            if action.fallback is None:
                return Reply(answer.status, answer.fields, b"", 0)
            action = self.router.resolve_fallback(action, request)
        status = getattr(action, "status", 0)
        return Reply(status, [("X-Action", repr(action))], b"", 0)


def tree(root: Path, files: dict[str, bytes | str]) -> Path:
    """Files under ``root`` (made), by relative path: bytes are a file's content, a str
    starting with ``->`` a symlink to the rest."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and content.startswith("->"):
            path.symlink_to(content[2:])
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))

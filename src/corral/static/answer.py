"""What serving a share gives its caller: :class:`StaticAnswer`, one answer to write, or the
word that the share could not serve the request (take its ``fallback``, else answer the
status).

The caller (the share action) writes ``status``, ``fields`` and a body of ``length`` bytes:
``body`` itself, or ``count`` bytes of the descriptor ``fd`` from ``offset`` (sendfile), and
then calls :meth:`StaticAnswer.close`. It frames the answer (``Content-Length: length``, no
body for HEAD and 304) and adds ``Date`` and ``Server``: the fields here are the answer's own.

Answers that carry no descriptor are shared between requests (a cached file's 200, 304 and
HEAD answers are made once): never change one; ``close`` does nothing for them.
"""

from __future__ import annotations

import os

__all__ = ["BAD_TARGET", "NOT_ALLOWED", "SERVER_ERROR", "StaticAnswer", "not_served"]


class StaticAnswer:
    """One answer of a share (the module's docstring). ``fallback``: the share serves no file
    for this request; ``status`` (403, 404, 405) is what to answer when it has no fallback."""

    __slots__ = (
        "body",
        "count",
        "fallback",
        "fd",
        "fields",
        "length",
        "offset",
        "status",
        "wire",
    )

    def __init__(
        self,
        status: int,
        fields: list[tuple[str, str]],
        body: bytes = b"",
        length: int | None = None,
        fd: int = -1,
        offset: int = 0,
        count: int = 0,
        fallback: bool = False,
    ) -> None:
        self.status = status
        self.fields = fields
        self.body = body
        self.fd = fd
        self.offset = offset
        self.count = count
        # the representation's length: Content-Length, HEAD included
        self.length = (count if fd >= 0 else len(body)) if length is None else length
        self.fallback = fallback
        # what its writer makes of it once (`corral.actions.share`: the status text, the
        # fields with Content-Length, the body and its length), kept with a shared answer for
        # the next request
        self.wire: tuple[str, list[tuple[str, str]], bytes, int] | None = None

    def close(self) -> None:
        """Release the descriptor (once the body is sent, or if it never will be)."""
        fd = self.fd
        if fd >= 0:
            self.fd = -1
            os.close(fd)

    def __repr__(self) -> str:
        body = (
            f"fd={self.fd}, offset={self.offset}, count={self.count}"
            if self.fd >= 0
            else (f"body={len(self.body)} bytes")
        )
        extra = ", fallback" if self.fallback else ""
        return f"<StaticAnswer {self.status} {self.fields!r} {body}, length={self.length}{extra}>"


def not_served(status: int) -> StaticAnswer:
    """The share serves no file: its fallback, else ``status``."""
    return StaticAnswer(status, [], fallback=True)


# a method other than GET and HEAD (Unit: fallback, else 405, which names the methods allowed)
NOT_ALLOWED = StaticAnswer(405, [("Allow", "GET, HEAD")], fallback=True)
SERVER_ERROR = StaticAnswer(500, [])  # an error opening a file that is not the request's fault
BAD_TARGET = StaticAnswer(400, [])  # a target that does not decode (a 301 needs its path)

"""Protocol errors, each carrying the HTTP status it must be answered with.

Every error the request side can raise is an :class:`HttpError`; the connection
turns it into a response in exactly one place (:func:`error_response`) and then
closes the connection, because after a framing error nothing that follows on the
wire can be trusted.
"""

from __future__ import annotations

from corral.http.response import reason, server_head


class HttpError(Exception):
    """A request that cannot be served; ``status`` is the answer it gets."""

    status: int = 400

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if status is not None:
            self.status = status


class BadRequest(HttpError):
    status = 400


class RequestTimeout(HttpError):
    status = 408


class ContentTooLarge(HttpError):
    status = 413


class UriTooLong(HttpError):
    status = 414


class HeaderFieldsTooLarge(HttpError):
    status = 431


class VersionNotSupported(HttpError):
    status = 505


_ERROR_BODIES: dict[int, tuple[str, bytes]] = {}


def error_response(status: int, prefix: str, fields: str = "") -> bytes:
    """The complete response for a protocol error: short text body, connection closed.

    ``prefix`` is the server's ``Date`` and ``Server`` fields (``ServerState.prefix``), as in
    every other answer; ``fields`` more of the server's own (``Allow: GET\r\n``), each line
    CRLF-terminated; the fields and body after them are built once per status.
    """
    cached = _ERROR_BODIES.get(status)
    if cached is None:
        body = f"{status} {reason(status)}\n".encode("ascii")
        framing = f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        cached = _ERROR_BODIES[status] = (framing, body)
    return server_head(status, prefix, fields + cached[0], True) + cached[1]

"""Protocol errors, each carrying the HTTP status it must be answered with.

Every error the request side can raise is an :class:`HttpError`; the connection
turns it into a response in exactly one place (:func:`error_response`) and then
closes the connection, because after a framing error nothing that follows on the
wire can be trusted.
"""

from __future__ import annotations

from http import HTTPStatus


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


_ERROR_CACHE: dict[int, bytes] = {}


def error_response(status: int) -> bytes:
    """The complete response for a protocol error: short text body, connection closed.

    It carries no Date header on purpose: the bytes are built once per status and
    RFC 9110 lets an origin without a reliable clock omit it; these answers are
    for broken clients, not caches.
    """
    cached = _ERROR_CACHE.get(status)
    if cached is None:
        phrase = HTTPStatus(status).phrase
        body = f"{status} {phrase}\n".encode("ascii")
        cached = (
            f"HTTP/1.1 {status} {phrase}\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("ascii") + body
        _ERROR_CACHE[status] = cached
    return cached

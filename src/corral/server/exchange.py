"""One request and its response on a connection: what the connection queues, and how its
answer's body is framed.

The adapters (WSGI, ASGI) and the actions routes take (`corral.actions`) answer through one
small interface: `HttpConnection.begin` (the status and fields: the head) or
`HttpConnection.whole` (a whole answer at once), then the exchange's `Exchange.frame` for each
body piece, `Exchange.frame_file` around a file range sent by sendfile, and `Exchange.end`
(the end, with trailers when the answer has them). These return the bytes for the wire; the
caller writes them where it writes (the connection on the loop thread, or a bridge from an
application thread). The framing they apply is decided here and by the listener plan's body
steps (`corral.server.plan`), never by an adapter: Content-Length (what the application said,
checked: a body longer is cut, one shorter closes the connection) or chunked
(`corral.http.chunked`), none for HEAD and for 1xx/204/304, and a body step's encoding
(compression) between the application's bytes and the framing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from corral.http.chunked import END_OF_DATA, LAST, chunk, last, size_line
from corral.http.head import RequestHead
from corral.observe.errorlog import LOGGER_NAME
from corral.server import clock

_log = logging.getLogger(LOGGER_NAME)


class Exchange:
    """One request and its response on a connection."""

    def __init__(self, head: RequestHead, body: Any) -> None:
        self.head = head
        # read per request, not from the coarse clock: the master times a request out from it
        # (its age in the heartbeat), and the access log and the histogram time it (about 20
        # instructions compiled: clock.pxd)
        self.request_start = clock.now()
        # seconds its answer waited for the client to read it (HttpConnection.send_wait), up
        # to the wait under way: the master's timeout counts the application's time only
        self.client_time = 0.0
        self.body = body
        self.complete = False  # the whole request body has arrived
        self.started = False  # handed to the adapter (or to its action)
        self.streaming = False  # the adapter reads the body while it arrives
        self.continue_sent = False
        # what answers it other than the worker's application (an action of a route:
        # corral.actions); None: the adapter
        self.action: Any = None
        # NGINX Unit's application target (its position), set by routing only
        self.target = 0
        # what a trusted proxy's headers said (forwarded.ForwardedClient), on listeners with
        # `forwarded` only
        self.forwarded: Any = None
        # -- the response: what the access log and the hooks read
        self.status = 0
        # body bytes sent (after any encoding), chunk framing included as on the wire: what
        # the access log and post_request's `sent` say
        self.response_bytes = 0
        self.response_headers: list[tuple[str, str]] | None = None
        # -- its framing, set by HttpConnection.begin (head_sent: the head is made)
        self.keep_alive = True  # the answer allows keep-alive (the request may not: head)
        self.discard = head.method == "HEAD"  # no body goes on the wire
        self.head_sent = False
        self.chunked = False
        self.ended = False  # the last chunk went: only trailer fields may follow
        self.remaining: int | None = None  # body bytes the Content-Length still allows
        self.encoder: Any = None  # a body step's (compression), set by its begin
        # its connection is encrypted (TLS): a file goes through the transport, never by
        # sendfile, which would send it around the encryption
        self.copies_files = False
        # a rate limit let it in over the rate: started no sooner (clock seconds); 0: now
        self.not_before = 0.0
        # why the server refused it itself ("rate_limit"), for the access log; None: it did not
        self.refusal: str | None = None

    def due(self, loop: Any, then: Callable[[], object]) -> bool:
        """Whether it may start, let in over its rate by a rate limit (`not_before`): not
        before its time, when ``loop`` calls ``then`` back, once (a negative ``not_before``:
        the timer is set)."""
        at = abs(self.not_before)
        now = clock.now()
        if now + 0.002 >= at:  # (the loop's timers are coarser: one may come a little early)
            self.not_before = 0.0
            return True
        if self.not_before > 0:
            self.not_before = -at
            loop.call_later(at - now, then)
        return False

    def where(self) -> str:
        """The request, for a log line: ``GET /path``."""
        head = self.head
        return f"{head.method} {head.target.decode('latin-1')}"

    def frame(self, data: bytes) -> bytes:
        """A piece of the body as it goes on the wire (b"": nothing to send)."""
        if self.discard:
            return b""
        encoder = self.encoder
        if encoder is not None:
            data = encoder.feed(data)
        return self._framed(data)

    def _framed(self, data: bytes) -> bytes:
        remaining = self.remaining
        if remaining is not None:
            if len(data) > remaining:
                _log.error(
                    "application sent more than its Content-Length; truncated (%s)", self.where()
                )
                data = data[:remaining]
                self.keep_alive = False
            self.remaining = remaining - len(data)
            self.response_bytes += len(data)
            return data
        if self.chunked:
            data = chunk(data)
        self.response_bytes += len(data)
        return data

    def end(self, trailer_lines: str = "", more: bool = False) -> bytes:
        """The end of the body: what an encoder still holds, then the last chunk with
        ``trailer_lines`` (CRLF-terminated; ``more``: further trailer fields follow, given to
        later calls)."""
        if self.discard:
            return b""
        if self.ended:  # trailer fields after the first ones
            return last(trailer_lines, False, more) if self.chunked else b""
        self.ended = True
        out = b""
        encoder = self.encoder
        if encoder is not None:
            self.encoder = None
            out = self._framed(encoder.finish())
        if self.remaining:
            _log.error("application sent less than its Content-Length; closing (%s)", self.where())
            self.keep_alive = False
        if not self.chunked:
            return out
        if trailer_lines or more:
            return out + last(trailer_lines, True, more)
        return out + LAST

    def frame_file(self, count: int) -> tuple[int, bytes]:
        """A file range of ``count`` bytes about to be sent by sendfile (possible only while
        `sends_files`): the count the framing allows, and the bytes that go before it
        (`file_sent` gives those after)."""
        remaining = self.remaining
        if remaining is not None:
            if count > remaining:
                count = remaining
            self.remaining = remaining - count
        if self.chunked and count:
            before = size_line(count)
            self.response_bytes += count + len(before) + len(END_OF_DATA)
            return count, before
        self.response_bytes += count
        return count, b""

    def file_sent(self, count: int) -> bytes:
        """What follows a file range of ``count`` bytes sent by sendfile."""
        return END_OF_DATA if self.chunked and count else b""

    @property
    def sends_files(self) -> bool:
        """A file range may go by sendfile: no encoding (a body step's, or TLS) stands between
        it and the wire."""
        return self.encoder is None and not self.discard and not self.copies_files

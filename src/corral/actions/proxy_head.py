"""The head of a request as the proxy sends it upstream, and the fields of an upstream's answer
as the proxy passes them to the client.

Toward the upstream (`request_head`): the request line in origin form (an absolute-form target
is reduced to its path and query, RFC 9112 3.2.2), the client's fields but the hop-by-hop ones
(RFC 9110 7.6.1: ``Connection`` and every field it names, ``Keep-Alive``, ``Proxy-Connection``,
``TE``, ``Transfer-Encoding``, ``Upgrade``) and those the proxy writes itself (``Content-Length``,
``Expect``: 100-continue is answered by corral, ``X-Forwarded-Proto``, ``X-Forwarded-Host``),
then ``Via`` (RFC 9110 7.6.3, appended), ``X-Forwarded-For`` (the client's address appended to
the list it came with), ``X-Forwarded-Proto`` and ``X-Forwarded-Host`` (set), ``Forwarded``
(RFC 7239, an element appended), the body's framing (its length, or chunked), and for an
upgrade ``Connection: upgrade`` with its ``Upgrade``. Every value comes from the request
parser, which refuses CR, LF and NUL in one, or from the proxy itself: nothing can split the
head.

Toward the client (`answer_fields`): the upstream's fields but the hop-by-hop ones, decoded as
latin-1 for the connection's response path (`HttpConnection.begin`, which checks them again and
frames the body itself), and ``Via``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["answer_fields", "request_head"]

VIA = "1.1 corral"

# hop-by-hop (RFC 9110 7.6.1) and what the proxy writes itself, lower-case
_NOT_FORWARDED = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
        b"expect",
        b"x-forwarded-proto",
        b"x-forwarded-host",
    }
)
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"transfer-encoding", b"upgrade"}
)


def _named_by_connection(headers: list[tuple[bytes, bytes]]) -> set[bytes]:
    named: set[bytes] = set()
    for name, value in headers:
        if len(name) == 10 and name.lower() == b"connection":  # (no lower case made for others)
            named.update(option.strip(b" \t").lower() for option in value.split(b","))
    named.discard(b"host")  # a client's Connection does not take the request's Host away
    return named


def _forwarded_node(address: str) -> str:
    """RFC 7239 6: an IPv6 address is quoted and bracketed."""
    return f'"[{address}]"' if ":" in address else address


def request_head(
    head: Any, client: str, scheme: str, upgrade: bytes | None, chunked: bool
) -> bytes:
    """The head sent upstream for the request ``head`` (corral.http.head.RequestHead) of
    ``client`` (its address, or "unknown") over ``scheme``; ``upgrade``: the ``Upgrade``
    value of a request that upgrades (None otherwise); ``chunked``: its body goes chunked
    (else by its length, when it has one)."""
    target = head.target
    absolute = head.absolute
    if absolute is not None:
        target = (absolute.path or b"/") + (b"?" + absolute.query if absolute.query else b"")
    named = _named_by_connection(head.headers)
    # the head's pieces, joined once (a %-format per line cost more than the rest of it)
    lines = [head.method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    host = b""
    forwarded_for = b""
    via = b""
    forwarded = b""
    for name, value in head.headers:
        lower = name.lower()
        if lower in _NOT_FORWARDED or lower in named:
            continue
        if lower == b"host":
            host = value
        elif lower == b"x-forwarded-for":
            forwarded_for = value if not forwarded_for else forwarded_for + b", " + value
            continue
        elif lower == b"via":
            via = value if not via else via + b", " + value
            continue
        elif lower == b"forwarded":
            forwarded = value if not forwarded else forwarded + b", " + value
            continue
        lines += (name, b": ", value, b"\r\n")
    address = client.encode("latin-1")
    via_line = (via + b", " if via else b"") + VIA.encode()
    lines.append(b"Via: %s\r\n" % via_line)
    lines.append(
        b"X-Forwarded-For: %s\r\n" % (forwarded_for + b", " + address if forwarded_for else address)
    )
    lines.append(b"X-Forwarded-Proto: %s\r\n" % scheme.encode())
    if host:
        lines.append(b"X-Forwarded-Host: %s\r\n" % host)
    element = f"for={_forwarded_node(client)};proto={scheme}".encode("latin-1")
    if host:
        element += b';host="%s"' % host.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    lines.append(b"Forwarded: %s\r\n" % (forwarded + b", " + element if forwarded else element))
    if upgrade is not None:
        lines.append(b"Connection: upgrade\r\nUpgrade: %s\r\n" % upgrade)
    elif chunked:
        lines.append(b"Transfer-Encoding: chunked\r\n")
    elif head.content_length:
        lines.append(b"Content-Length: %d\r\n" % head.content_length)
    elif head.method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: 0\r\n")  # RFC 9110 8.6: a body is expected, none came
    lines.append(b"\r\n")
    return b"".join(lines)


def upgrade_of(head: Any) -> bytes | None:
    """The ``Upgrade`` value of a request that asks for one (``Connection: upgrade``)."""
    named = _named_by_connection(head.headers)
    if b"upgrade" not in named:
        return None
    for name, value in head.headers:
        if name.lower() == b"upgrade":
            return value
    return None


def answer_fields(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """The upstream's fields the client gets (the connection frames the body: the upstream's
    ``Content-Length`` stays, as the length it announces), then ``Via``."""
    named = _named_by_connection(headers)
    fields = []
    via = ""
    for name, value in headers:
        lower = name.lower()
        if lower in _HOP_BY_HOP or lower in named:
            continue
        if lower == b"via":
            via += value.decode("latin-1") + ", "
            continue
        fields.append((name.decode("latin-1"), value.decode("latin-1")))
    fields.append(("Via", via + VIA))
    return fields

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

Toward the client (`answer_fields`, and `answer_of` with the status line's text): the
upstream's fields but the hop-by-hop ones, decoded as latin-1 for the connection's response
path (`HttpConnection.begin`, which checks them again and frames the body itself), and ``Via``.

Both run for every proxied request, so what depends only on a name's spelling or on a whole
answer head is worked out once and kept (bounded tables, emptied when full): a field name's
kind by its spelling, an answer's status text and fields by its head's content.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["answer_fields", "answer_of", "request_head", "upgrade_of"]

VIA = "1.1 corral"

# what a request's field is to the proxy: forwarded as it is, dropped (hop-by-hop, RFC 9110
# 7.6.1, or one the proxy writes itself), or one of those the proxy adds to
_FORWARD = 0
_DROP = 1
_HOST = 2
_FORWARDED_FOR = 3
_VIA = 4
_FORWARDED = 5
_KIND_OF_LOWER = {
    b"connection": _DROP,
    b"keep-alive": _DROP,
    b"proxy-connection": _DROP,
    b"te": _DROP,
    b"transfer-encoding": _DROP,
    b"upgrade": _DROP,
    b"content-length": _DROP,
    b"expect": _DROP,
    b"x-forwarded-proto": _DROP,
    b"x-forwarded-host": _DROP,
    b"host": _HOST,
    b"x-forwarded-for": _FORWARDED_FOR,
    b"via": _VIA,
    b"forwarded": _FORWARDED,
}
# the kind by the name as a client spells it: its lower case made once per spelling
_kinds: dict[bytes, int] = {}
_KINDS_KEPT = 256
# the request line's start by method ("GET" -> b"GET ")
_openings: dict[str, bytes] = {}
_OPENINGS_KEPT = 64
# the lines the proxy adds for a client that sent none of its own, by (address, scheme, Host):
# the same for every request of a connection
_added_lines: dict[tuple[str, str, bytes], bytes] = {}
_ADDED_KEPT = 256

_BODY_EXPECTED = frozenset({"POST", "PUT", "PATCH"})  # (RFC 9110 8.6: a length even when 0)
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"transfer-encoding", b"upgrade"}
)

# `answer_of`'s results by the answer head's status, reason and fields (an upstream answers
# most requests with the same few heads; a Date changes once a second): heads up to
# _ANSWER_SIZE bytes of names and values, _ANSWERS_KEPT of them
_answers: dict[tuple[Any, ...], tuple[str, list[tuple[str, str]]]] = {}
_ANSWERS_KEPT = 64
_ANSWER_SIZE = 2048
# the last head `answer_of` was asked for, and its answer: compared field by field (by identity
# first) before any key is made
_last_status = 0
_last_reason = b""
_last_fields: tuple[Any, ...] = ()
_last_answer: tuple[str, list[tuple[str, str]]] = ("", [])


def _kind(name: bytes) -> int:
    kind = _kinds.get(name)
    if kind is None:
        kind = _KIND_OF_LOWER.get(name.lower(), _FORWARD)
        if len(_kinds) >= _KINDS_KEPT:
            _kinds.clear()
        _kinds[name] = kind
    return kind


def _named_by_connection(headers: Sequence[tuple[bytes, bytes]]) -> set[bytes] | None:
    """The field names (lower case) a ``Connection`` field names; None without one."""
    named: set[bytes] | None = None
    for name, value in headers:
        if len(name) == 10 and name.lower() == b"connection":  # (no lower case made for others)
            if named is None:
                named = set()
            for option in value.split(b","):
                named.add(option.strip(b" \t").lower())
    if named is not None:
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
    method = head.method
    opening = _openings.get(method)
    if opening is None:
        opening = method.encode("ascii") + b" "
        if len(_openings) >= _OPENINGS_KEPT:
            _openings.clear()
        _openings[method] = opening
    headers = head.headers
    named = _named_by_connection(headers)
    # the head's pieces, joined once (a %-format per line cost more than the rest of it)
    lines = [opening, target, b" HTTP/1.1\r\n"]
    host = b""
    forwarded_for = b""
    via = b""
    forwarded = b""
    for name, value in headers:
        kind = _kind(name)
        if kind == _DROP or (named is not None and name.lower() in named):
            continue
        if kind in (_FORWARD, _HOST):
            if kind == _HOST:
                host = value
            lines.append(name)
            lines.append(b": ")
            lines.append(value)
            lines.append(b"\r\n")
        elif kind == _FORWARDED_FOR:
            forwarded_for = value if not forwarded_for else forwarded_for + b", " + value
        elif kind == _VIA:
            via = value if not via else via + b", " + value
        else:
            forwarded = value if not forwarded else forwarded + b", " + value
    if forwarded_for or via or forwarded:
        lines.append(_added(client, scheme, host, forwarded_for, via, forwarded))
    else:  # (the lines of a client that came straight: the same for each of its requests)
        key = (client, scheme, host)
        added = _added_lines.get(key)
        if added is None:
            added = _added(client, scheme, host, b"", b"", b"")
            if len(_added_lines) >= _ADDED_KEPT:
                _added_lines.clear()
            _added_lines[key] = added
        lines.append(added)
    if upgrade is not None:
        lines.append(b"Connection: upgrade\r\nUpgrade: " + upgrade + b"\r\n\r\n")
    elif chunked:
        lines.append(b"Transfer-Encoding: chunked\r\n\r\n")
    elif head.content_length:
        lines.append(b"Content-Length: " + str(head.content_length).encode("ascii") + b"\r\n\r\n")
    elif method in _BODY_EXPECTED:
        # RFC 9110 8.6: a body is expected, none came
        lines.append(b"Content-Length: 0\r\n\r\n")
    else:
        lines.append(b"\r\n")
    return b"".join(lines)


def _added(
    client: str, scheme: str, host: bytes, forwarded_for: bytes, via: bytes, forwarded: bytes
) -> bytes:
    """The lines the proxy adds: ``Via``, ``X-Forwarded-For``, ``-Proto``, ``-Host`` and
    ``Forwarded``, each after what the client's own said (``forwarded_for``, ``via``,
    ``forwarded``: its values, joined)."""
    address = client.encode("latin-1")
    proto = scheme.encode("latin-1")
    lines = [b"Via: ", via + b", " if via else b"", VIA.encode(), b"\r\n"]
    lines += (b"X-Forwarded-For: ", forwarded_for + b", " if forwarded_for else b"", address)
    lines += (b"\r\nX-Forwarded-Proto: ", proto, b"\r\n")
    if host:
        lines += (b"X-Forwarded-Host: ", host, b"\r\n")
    lines += (b"Forwarded: ", forwarded + b", " if forwarded else b"", b"for=")
    lines += (_forwarded_node(client).encode("latin-1"), b";proto=", proto)
    if host:
        lines += (b';host="', host.replace(b"\\", b"\\\\").replace(b'"', b'\\"'), b'"')
    lines.append(b"\r\n")
    return b"".join(lines)


def upgrade_of(head: Any) -> bytes | None:
    """The ``Upgrade`` value of a request that asks for one (``Connection: upgrade``)."""
    named = _named_by_connection(head.headers)
    if named is None or b"upgrade" not in named:
        return None
    for name, value in head.headers:
        if name.lower() == b"upgrade":
            return value
    return None


def answer_fields(headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """The upstream's fields the client gets (the connection frames the body: the upstream's
    ``Content-Length`` stays, as the length it announces), then ``Via``."""
    named = _named_by_connection(headers)
    fields = []
    via = ""
    for name, value in headers:
        lower = name.lower()
        if lower in _HOP_BY_HOP or (named is not None and lower in named):
            continue
        if lower == b"via":
            via += value.decode("latin-1") + ", "
            continue
        fields.append((name.decode("latin-1"), value.decode("latin-1")))
    fields.append(("Via", via + VIA))
    return fields


def answer_of(
    status: int, reason: bytes, headers: Sequence[tuple[bytes, bytes]]
) -> tuple[str, list[tuple[str, str]]]:
    """The status line's text ("200 OK") and `answer_fields` of an upstream's answer head
    (``headers``: its fields as parsed, `ResponseHead.fields`): for a head seen lately, the
    same status text and field tuples as then (which the response head's own cache then finds
    by identity), in a list of its own (its user may change it)."""
    global _last_status, _last_reason, _last_fields, _last_answer
    if (
        status == _last_status
        and (reason is _last_reason or reason == _last_reason)
        and (headers is _last_fields or headers == _last_fields)
    ):
        # (the parser's own table hands the same fields again; a tuple's == sees identity
        # first)
        known = _last_answer
    else:
        fields = tuple(headers)
        key = (status, reason, fields)
        kept = _answers.get(key)
        if kept is None:
            known = (f"{status} {reason.decode('latin-1')}", answer_fields(headers))
            if sum([len(name) + len(value) for name, value in fields]) <= _ANSWER_SIZE:
                if len(_answers) >= _ANSWERS_KEPT:
                    _answers.clear()
                _answers[key] = known
        else:
            known = kept
        _last_status = status
        _last_reason = reason
        _last_fields = fields
        _last_answer = known
    fields_given = known[1]
    return known[0], fields_given[:]

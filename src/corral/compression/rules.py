"""Which answers are compressed, with which coding, and what their fields become.

This module owns the decision for one answer (`CompressionRules.decide`), made from what the
response path holds when the application has given its status and fields: the request's
method and ``Accept-Encoding``, the status, the fields, and the body's length when it is
known. It does no I/O and compresses nothing itself: the `Outcome` names the `Codec` and the
fields to send, and the response path compresses and frames the body.

The rules (RFC 9110 §12.5.3 and §8.4, NGINX Unit's ``settings.http.compression``):

- never compressed: an answer without a body (1xx, 204, 304), a partial one (206, or any
  answer with ``Content-Range``), one whose body is already encoded (``Content-Encoding``),
  one with ``Cache-Control: no-transform``, one whose ``Content-Type`` is missing or not
  among ``types`` (every type when ``types`` is absent or empty), one whose known length is
  below every compressor's ``min_length``, and an empty body;
- an application turns compression off for one answer (a page that echoes a secret beside
  what an attacker sends: BREACH) with ``Content-Encoding: identity``, which is dropped from
  an answer these rules would otherwise read (RFC 9110 keeps ``identity`` out of
  ``Content-Encoding``; an answer left alone sooner keeps it), or with ``Cache-Control:
  no-transform``, which also forbids every proxy on the way to transform it;
- otherwise the answer could be compressed for some request, so it carries ``Vary:
  Accept-Encoding`` whatever this request gets (a HEAD's answer too, which is never
  compressed: it has no body; its fields are the GET's);
- the coding is the one the client weighs highest among the compressors whose
  ``min_length`` the known length reaches (all of them for a body of unknown length) and
  ``identity``, ties going to the order of ``compressors`` (`corral.http.accept.choose`);
  ``identity`` chosen, or nothing acceptable (``identity;q=0`` and no coding of ours), the
  body goes as it is, as nginx does: an application's answer is never replaced by a 406;
- a 304 gets the fields the 200 would have for the same request (RFC 9110 §15.4.5):
  ``Vary``, and its ``ETag`` weak when that 200 would be compressed (a client revalidating
  what it got compressed sends the weak tag: the server answering 304 compares weakly, as
  RFC 9110 §13.1.2 says ``If-None-Match`` does);
- a compressed answer gets ``Content-Encoding``, loses ``Content-Length`` (the response
  path frames the compressed body: its length when it compresses a whole body, chunks
  otherwise) and ``Accept-Ranges`` (ranges of the compressed body are not served), and its
  strong ``ETag`` becomes weak (``W/``): the compressed bytes are not the identity's.

Cost: a listener without compression has no `CompressionRules` at all. With it, an answer
whose known length is below every ``min_length`` costs one comparison; any other one pass
over its fields, with a dictionary lookup per field name and one per ``Content-Type`` value
(both cached); ``Accept-Encoding`` is looked for in the request only by an answer that
gets that far, and parsed once per distinct value (`corral.http.accept`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from corral.compression.codecs import Codec, make_codec
from corral.http.accept import choose, parse_accept_encoding

if TYPE_CHECKING:
    from corral.config.values import Compression

__all__ = ["CompressionRules", "Outcome", "build_rules"]

# the kinds of field names the decision reads; every other name is 0
_TYPE, _ENCODING, _CACHE_CONTROL, _RANGE, _ETAG, _VARY, _LENGTH, _ACCEPT_RANGES = range(1, 9)
_KIND_BY_LOWER_NAME = {
    "content-type": _TYPE,
    "content-encoding": _ENCODING,
    "cache-control": _CACHE_CONTROL,
    "content-range": _RANGE,
    "etag": _ETAG,
    "vary": _VARY,
    "content-length": _LENGTH,
    "accept-ranges": _ACCEPT_RANGES,
}
_CACHE_LIMIT = 256  # distinct field names, and Content-Type values, remembered
_kinds: dict[str, int] = {}
# statuses of answers never compressed (those below 200 too): no body, or a part of one (a
# 304 has no body either, but the fields a 200 would have had: `decide` says which)
_NEVER = frozenset((204, 206))
_NOT_MODIFIED = 304


def _kind(name: str) -> int:
    kind = _KIND_BY_LOWER_NAME.get(name.lower(), 0)
    if len(_kinds) >= _CACHE_LIMIT:
        _kinds.clear()
    _kinds[name] = kind
    return kind


class Outcome:
    """What becomes of one answer that `CompressionRules.decide` changes.

    ``headers``: the fields to send instead of the application's (a new list; the
    application's is not changed). ``codec``: the `Codec` to compress the body with
    (`Codec.whole` for a body known in full, then framed by its compressed length;
    `Codec.stream` for one that comes in pieces), or None when the body goes as it is and
    only the fields changed (``Vary`` added, ``Content-Encoding: identity`` dropped)."""

    __slots__ = ("codec", "headers")

    def __init__(self, headers: list[tuple[str, str]], codec: Codec | None) -> None:
        self.headers = headers
        self.codec = codec

    def __repr__(self) -> str:
        return f"Outcome({self.headers!r}, {self.codec!r})"


class CompressionRules:
    """A worker's ``settings.http.compression``, made once (`build_rules`)."""

    __slots__ = (
        "_codecs",
        "_minimums",
        "_most",
        "_offers",
        "_type_matches",
        "_types",
        "least_length",
    )

    def __init__(
        self,
        types: Callable[[str], Any] | None,
        compressors: Sequence[tuple[Codec, int]],
    ) -> None:
        """``types``: the predicate of the ``types`` patterns on a media type (lower-case,
        without parameters), None for every type; ``compressors``: each codec with its
        ``min_length``, in the server's order of preference."""
        self._types = types
        self._type_matches: dict[str, bool] = {}
        self._codecs = {codec.coding: codec for codec, _ in compressors}
        self._minimums = tuple((codec.coding, least) for codec, least in compressors)
        self._offers = (*self._codecs, "identity")
        # a known length below this one is never compressed (the caller may test it first:
        # `decide` returns None for it); from `_most` on, every coding may be
        self.least_length = max(1, min(least for _, least in compressors))
        self._most = max(least for _, least in compressors)

    def decide(
        self,
        method: str,
        status: int,
        headers: list[tuple[str, str]],
        accept_encoding: str | bytes | Sequence[tuple[bytes, bytes]] | None,
        length: int | None,
    ) -> Outcome | None:
        """What becomes of an answer: None when it goes as the application gave it (the
        common case, nothing made), else its `Outcome`. ``accept_encoding``: the request's
        field value (several joined with ``", "``), None without one, or the request's
        header list as parsed (``(name, value)`` bytes, names in any case), searched only
        for an answer that gets as far as the negotiation; ``length``: the body's length
        when known (the application's ``Content-Length``, or a whole body), None when it
        comes in pieces of unknown total (and for a 304, unless the representation's is
        known)."""
        if length is not None and length < self.least_length and status != _NOT_MODIFIED:
            return None
        if status < 200 or status in _NEVER:
            return None
        type_matches = False
        identity = etag = vary = -1
        kinds = _kinds
        for index, (name, value) in enumerate(headers):
            kind = kinds.get(name)
            if kind is None:
                kind = _kind(name)
            if kind:
                if kind == _TYPE:
                    type_matches = self._type_listed(value)
                elif kind == _ENCODING:
                    if value.strip(" \t").lower() != "identity":
                        return None  # already encoded
                    identity = index
                elif kind == _CACHE_CONTROL:
                    if _no_transform(value):
                        return None
                elif kind == _RANGE:
                    return None
                elif kind == _ETAG:
                    etag = index
                elif kind == _VARY:
                    vary = index
        if identity >= 0:  # the application turned compression off for this answer
            return Outcome([h for i, h in enumerate(headers) if i != identity], None)
        if not type_matches:
            return None
        if method == "HEAD" and status != _NOT_MODIFIED:
            return Outcome(_with_vary(list(headers), vary), None)
        if length is None or length >= self._most:
            offers = self._offers
        else:
            offers = (*(coding for coding, least in self._minimums if length >= least), "identity")
        if accept_encoding is not None and not isinstance(accept_encoding, str | bytes):
            accept_encoding = _field_value(accept_encoding)
        coding = choose(offers, parse_accept_encoding(accept_encoding))
        if coding is None or coding == "identity":
            return Outcome(_with_vary(list(headers), vary), None)
        if status == _NOT_MODIFIED:
            # the 200 this request would get is compressed: its ETag is weak, and a 304
            # carries the ETag and Vary of that 200 (RFC 9110 §15.4.5), no Content-Encoding
            return Outcome(_with_vary(_weak_etag(list(headers), etag), vary), None)
        return Outcome(_compressed_fields(headers, coding, etag, vary), self._codecs[coding])

    def _type_listed(self, content_type: str) -> bool:
        matches = self._type_matches.get(content_type)
        if matches is None:
            media_type = content_type.partition(";")[0].strip(" \t").lower()
            types = self._types
            matches = bool(media_type) and (types is None or bool(types(media_type)))
            if len(self._type_matches) >= _CACHE_LIMIT:
                self._type_matches.clear()
            self._type_matches[content_type] = matches
        return matches

    @property
    def codecs(self) -> tuple[Codec, ...]:
        """The configured codecs, in the server's order of preference."""
        return tuple(self._codecs.values())


def _field_value(request_headers: Sequence[tuple[bytes, bytes]]) -> bytes | None:
    """The request's ``Accept-Encoding`` value, its fields joined (RFC 9110 §5.3)."""
    values = [
        value
        for name, value in request_headers
        if len(name) == 15 and name.lower() == b"accept-encoding"
    ]
    if not values:
        return None
    return values[0] if len(values) == 1 else b", ".join(values)


def _no_transform(cache_control: str) -> bool:
    """Whether a ``Cache-Control`` value has the ``no-transform`` directive."""
    if "no-transform" not in cache_control.lower():
        return False
    return any(
        directive.strip(" \t").lower() == "no-transform" for directive in cache_control.split(",")
    )


def _weak(etag: str) -> str:
    """An entity tag made weak (``W/``): the compressed bytes are not the identity's."""
    value = etag.strip(" \t")
    return value if value.startswith("W/") else f"W/{value}"


def _weak_etag(headers: list[tuple[str, str]], etag: int) -> list[tuple[str, str]]:
    """``headers`` (a list of the caller's own) with the ``ETag`` at index ``etag`` weak."""
    if etag >= 0:
        headers[etag] = (headers[etag][0], _weak(headers[etag][1]))
    return headers


def _with_vary(headers: list[tuple[str, str]], vary: int) -> list[tuple[str, str]]:
    """``headers`` (a list of the caller's own) saying that the answer varies with
    ``Accept-Encoding``: merged into the ``Vary`` field at index ``vary`` (-1: none)."""
    if vary < 0:
        headers.append(("Vary", "Accept-Encoding"))
        return headers
    for name, value in headers:
        if name.lower() == "vary":
            tokens = {token.strip(" \t").lower() for token in value.split(",")}
            if "*" in tokens or "accept-encoding" in tokens:
                return headers  # already says so (or that it varies with everything)
    name, value = headers[vary]
    headers[vary] = (name, f"{value}, Accept-Encoding" if value.strip() else "Accept-Encoding")
    return headers


def _compressed_fields(
    headers: list[tuple[str, str]], coding: str, etag: int, vary: int
) -> list[tuple[str, str]]:
    """The fields of the answer compressed with ``coding``: ``Content-Encoding`` added,
    ``Content-Length`` and ``Accept-Ranges`` dropped, a strong ``ETag`` weak, ``Vary``."""
    fields: list[tuple[str, str]] = []
    kinds = _kinds
    merged_vary = -1
    for index, header in enumerate(headers):
        kind = kinds.get(header[0])
        if kind is None:
            kind = _kind(header[0])
        if kind in (_LENGTH, _ACCEPT_RANGES):
            continue
        if index == etag:
            header = (header[0], _weak(header[1]))
        elif index == vary:
            merged_vary = len(fields)
        fields.append(header)
    fields.append(("Content-Encoding", coding))
    return _with_vary(fields, merged_vary)


def build_rules(compression: Compression | None) -> CompressionRules | None:
    """A worker's rules from ``settings.http.compression`` (validated), None when it is not
    configured (then the response path has no compression step). Imports each compressor's
    library, once."""
    if compression is None:
        return None
    from corral.routing.patterns import MIME_TYPE_PATTERNS

    types = compression.types
    rule = None
    if types:  # NGINX Unit: no types, or an empty list, is every type
        rule = MIME_TYPE_PATTERNS.rule(types, "$.settings.http.compression.types")
    compressors = compression.compressors
    if not isinstance(compressors, list):
        compressors = [compressors]
    return CompressionRules(
        rule,
        [(make_codec(c.encoding, c.level), c.min_length) for c in compressors],
    )

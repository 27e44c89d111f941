"""Accept-Encoding (RFC 9110 §12.5.3): which content codings a client takes, and which of the
ones a server can offer it prefers.

Used by every answer that could carry a coding: a file with precompressed siblings
(`corral.static`) and an answer compressed on the fly (`corral.compression`). Both ask the
same two questions, so both use these two functions:

- :func:`parse_accept_encoding` reads a field value into an :class:`AcceptEncoding`;
- :func:`choose` picks, of a server's offers in its order of preference, the one the client
  weighs highest (ties go to the server's order), or ``None`` when it takes none of them.

RFC 9110's rules, kept exactly:

- a coding's weight is its ``q`` (0 to 1, three decimals at most; kept here in thousandths,
  an int); no ``q`` is 1; ``q=0`` means "not acceptable";
- ``*`` weighs every coding the field does not name, ``identity`` included;
- ``identity`` (no coding) is acceptable unless the field says ``identity;q=0``, or ``*;q=0``
  without naming ``identity``; unnamed, it weighs less than any coding the client named (the
  RFC gives it no weight; servers all prefer the coding the client asked for);
- names compare without case, and ``x-gzip`` is ``gzip`` (§8.4.1.3);
- an element whose weight is not a valid qvalue is ignored (the others still count); a
  coding named twice keeps its highest weight;
- an empty field value accepts ``identity`` only. No field at all would allow any coding by
  the letter of the RFC, but no server compresses for a client that did not ask (nginx, Unit
  and Apache all send identity): :func:`parse_accept_encoding` of ``None`` is that, too.

Cost: a parse is cached per field value (clients send a handful of distinct values), and a
choice per offer tuple on the parsed value, so a request with a value seen before pays two
dict lookups. The caches are bounded: a client sending a new value each time only makes
itself pay for the parse.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["IDENTITY_ONLY", "AcceptEncoding", "choose", "parse_accept_encoding"]

# how many distinct field values stay parsed, and how many offer tuples each remembers
_CACHE_LIMIT = 256
_CHOICES_LIMIT = 16

# identity's weight when the field names neither it nor '*': acceptable, below any coding the
# client named (a client that says "gzip;q=0.5" still prefers gzip to nothing)
_IDENTITY_UNNAMED = 1
_QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")
_ALIASES = {"x-gzip": "gzip", "x-compress": "compress"}


class AcceptEncoding:
    """One parsed Accept-Encoding value: each named coding's weight (thousandths), and the
    weight of ``*`` (``None`` when absent)."""

    __slots__ = ("_choices", "star", "weights")

    def __init__(self, weights: dict[str, int], star: int | None) -> None:
        self.weights = weights
        self.star = star
        self._choices: dict[tuple[str, ...], str | None] = {}

    def weight(self, coding: str) -> int:
        """The client's weight for ``coding`` (lower-case), in thousandths: 0 means refused."""
        weight = self.weights.get(coding)
        if weight is not None:
            return weight
        if self.star is not None:
            return self.star
        return _IDENTITY_UNNAMED if coding == "identity" else 0

    def __repr__(self) -> str:
        return f"AcceptEncoding({self.weights!r}, star={self.star!r})"


IDENTITY_ONLY = AcceptEncoding({}, None)
"""What a missing or empty field means: no coding but identity."""

_parsed: dict[str | bytes, AcceptEncoding] = {}


def parse_accept_encoding(value: str | bytes | None) -> AcceptEncoding:
    """The codings a field value accepts. ``value``: the field's value (``str`` or the raw
    ``bytes``; several fields joined with ``", "``), or ``None`` when the request has none."""
    if not value:
        return IDENTITY_ONLY
    parsed = _parsed.get(value)
    if parsed is None:
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        parsed = _parse(text)
        if len(_parsed) >= _CACHE_LIMIT:
            _parsed.clear()
        _parsed[value] = parsed
    return parsed


def _parse(text: str) -> AcceptEncoding:
    weights: dict[str, int] = {}
    star: int | None = None
    for element in text.split(","):
        coding, _, params = element.partition(";")
        coding = coding.strip(" \t").lower()
        if not coding:
            continue
        weight = 1000
        for param in params.split(";") if params else ():
            name, _, raw = param.partition("=")
            if name.strip(" \t").lower() == "q":
                weight = _qvalue(raw.strip(" \t"))
                break
        if weight < 0:
            continue  # not a qvalue: this element says nothing
        coding = _ALIASES.get(coding, coding)
        if coding == "*":
            star = weight
        elif coding not in weights or weight > weights[coding]:
            weights[coding] = weight
    return AcceptEncoding(weights, star)


def _qvalue(raw: str) -> int:
    """A qvalue in thousandths, or -1 when ``raw`` is not one (``0[.ddd]`` or ``1[.000]``)."""
    if _QVALUE.fullmatch(raw) is None:
        return -1
    head, _, decimals = raw.partition(".")
    return int(head) * 1000 + int(decimals.ljust(3, "0"))


def choose(offers: Sequence[str], accepted: AcceptEncoding) -> str | None:
    """Of ``offers`` (lower-case coding names, ``"identity"`` for none, in the server's order
    of preference), the one ``accepted`` weighs highest, the server's order breaking ties;
    ``None`` when it refuses every one. Pass a tuple that lives as long as the server does
    (a constant): the choice is cached on ``accepted`` by it."""
    key = offers if isinstance(offers, tuple) else tuple(offers)
    choices = accepted._choices
    if key in choices:
        return choices[key]
    best: str | None = None
    best_weight = 0
    for offer in key:
        weight = accepted.weight(offer)
        if weight > best_weight:
            best, best_weight = offer, weight
    if len(choices) >= _CHOICES_LIMIT:
        choices.clear()
    choices[key] = best
    return best

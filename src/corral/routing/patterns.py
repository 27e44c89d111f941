"""Unit's string patterns, compiled into the cheapest Python test that means the same.

Every string property of a route (``method``, ``host``, ``uri``, ``query``, ``arguments``,
``headers``, ``cookies``) and a share's ``types`` take the same pattern syntax; each
property differs only in how its text is decoded and case-folded, which a
:class:`PatternCompiler` of its own says. A compiled pattern list is one predicate, so a
request pays one call per condition: an exact pattern is one ``==``, a list of exact ones one
``frozenset`` lookup, ``x*``/``*x`` one ``startswith``/``endswith`` (a list of them one call
with a tuple), ``*x*`` one ``in``, other wildcards a ``startswith``/``endswith`` and one
``find`` per inner piece (linear: no backtracking), a regex one ``search``.

Unit's rules, kept exactly:

- a pattern is exact; or has ``*`` wildcards anywhere (``**`` is refused); or starts with
  ``~`` and is a regular expression searched (not anchored) in the value, with Python's
  ``re`` in ASCII mode standing in for PCRE (case-sensitive, like Unit's). ``""`` matches
  the empty value only, ``"!"`` any non-empty one;
- a list of patterns matches when no negated (``!``) pattern matches and, if there are
  non-negated ones, at least one of them does: a list of negations only is "none of these".
  An empty list matches everything;
- patterns for ``uri``, ``query`` and ``arguments`` (names too) are percent-decoded like
  the values, after the split on ``*`` (so ``%2A`` is a literal star);
- ``method`` patterns are upper-cased and ``host`` patterns lower-cased (so both match
  regardless of case); header names and values compare case-insensitively (ASCII);
  ``uri``, ``query``, ``arguments`` and ``cookies`` are case-sensitive. Regexes never fold;
- strings are compared as bytes: JSON text is UTF-8, request bytes are latin-1 ``str``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

from corral.jsonpath import describe_value
from corral.routing.errors import RouteError
from corral.routing.request import BAD_ESCAPE

__all__ = [
    "ARGUMENT_PATTERNS",
    "COOKIE_PATTERNS",
    "HEADER_PATTERNS",
    "HOST_PATTERNS",
    "METHOD_PATTERNS",
    "MIME_TYPE_PATTERNS",
    "PLUS_DECODE",
    "QUERY_PATTERNS",
    "URI_PATTERNS",
    "PatternCompiler",
    "always",
    "as_bytes_str",
    "decode_pattern",
    "pattern_matcher",
]


_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _ascii_lower(text: str) -> str:
    # str.lower() would also fold latin-1 letters, which Unit (bytes) does not
    return text.lower() if text.isascii() else text.translate(_LOWER)


def _ascii_upper(text: str) -> str:
    return text.upper() if text.isascii() else text.translate(_UPPER)


def as_bytes_str(text: str) -> str:
    """JSON text as the bytes Unit compares (UTF-8), in corral's latin-1 ``str`` form."""
    return text if text.isascii() else text.encode("utf-8").decode("latin-1")


# How pattern text is decoded before comparing: Unit decodes uri patterns, and query and
# argument patterns with '+' as a space; an invalid escape is a configuration error.
NO_DECODE, URI_DECODE, PLUS_DECODE = 0, 1, 2


def decode_pattern(text: str, decode: int) -> str:
    if decode == NO_DECODE:
        return text
    if decode == PLUS_DECODE and "+" in text:
        text = text.replace("+", " ")
    if "%" in text:
        if BAD_ESCAPE.search(text):
            raise ValueError("'%' must be followed by two hex digits (write %25 for '%')")
        text = unquote_to_bytes(text.encode("latin-1")).decode("latin-1")
    return text


def always(_value: Any) -> bool:
    """The test of an empty list of patterns (or of tables): anything matches."""
    return True


def _glob(pieces: list[str]) -> tuple[str, Any]:
    """A wildcard pattern split on ``*``, as (kind, data) for :func:`_any_of`."""
    if len(pieces) == 1:
        return ("exact", pieces[0])
    if len(pieces) == 2:
        head, tail = pieces
        if not head and not tail:
            return ("any", None)
        if not tail:
            return ("prefix", head)
        if not head:
            return ("suffix", tail)
        least = len(head) + len(tail)
        return ("fn", lambda v: len(v) >= least and v.startswith(head) and v.endswith(tail))
    head, *middle, tail = pieces
    if len(pieces) == 3 and not head and not tail:
        return ("contains", middle[0])
    least = sum(map(len, pieces))
    start = len(head)
    cut = len(tail)

    def glob(value: str) -> bool:
        # Unit's algorithm: fixed ends, then each inner piece at its leftmost place; greedy
        # leftmost is exact for '*'-only patterns and never backtracks.
        if len(value) < least or not value.startswith(head) or not value.endswith(tail):
            return False
        position = start
        end = len(value) - cut
        for piece in middle:
            found = value.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True

    return ("fn", glob)


def _any_of(matchers: list[tuple[str, Any]]) -> Callable[[str], Any] | None:
    """One predicate for "any of these matches", each kind in its cheapest form."""
    if not matchers:
        return None
    if any(kind == "any" for kind, _ in matchers):
        return always
    exact = frozenset(data for kind, data in matchers if kind == "exact")
    prefixes = tuple(data for kind, data in matchers if kind == "prefix")
    suffixes = tuple(data for kind, data in matchers if kind == "suffix")
    checks: list[Callable[[str], Any]] = []
    if len(exact) == 1:
        checks.append(next(iter(exact)).__eq__)
    elif exact:
        checks.append(exact.__contains__)
    if prefixes and suffixes:
        checks.append(lambda v: v.startswith(prefixes) or v.endswith(suffixes))
    elif prefixes:
        checks.append(lambda v: v.startswith(prefixes))
    elif suffixes:
        checks.append(lambda v: v.endswith(suffixes))
    for kind, data in matchers:
        if kind == "contains":
            checks.append(lambda v, part=data: part in v)  # type: ignore[misc]
        elif kind == "fn":
            checks.append(data)
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)

    def any_check(value: str) -> bool:
        for check in every:  # noqa: SIM110 (any() over a generator costs a frame per call)
            if check(value):
                return True
        return False

    return any_check


class PatternCompiler:
    """Compiles pattern strings for one kind of property."""

    __slots__ = ("case", "decode", "folded")

    def __init__(self, *, decode: int = NO_DECODE, case: str = "", folded: bool = False) -> None:
        self.decode = decode
        self.case = case  # "upper"/"lower": how non-regex patterns are stored
        self.folded = folded  # values compare case-insensitively (lowered before matching)

    def one(self, raw: Any, path: str) -> tuple[bool, bool, Any]:
        """(negative, is_regex, matcher) of one pattern string."""
        if not isinstance(raw, str):
            raise RouteError(path, f"expected a pattern string, got {describe_value(raw)}")
        text = as_bytes_str(raw)
        negative = text.startswith("!")
        if negative:
            text = text[1:]
        if text.startswith("~"):
            try:
                return negative, True, re.compile(text[1:], re.ASCII).search
            except re.error as exc:
                raise RouteError(path, f"invalid regular expression {raw!r}: {exc}") from None
        if "**" in text:
            raise RouteError(path, f"pattern {raw!r} has '**'; one '*' already matches any run")
        pieces = []
        for piece in text.split("*"):
            try:
                piece = decode_pattern(piece, self.decode)
            except ValueError as exc:
                raise RouteError(path, f"pattern {raw!r}: {exc}") from None
            if self.case == "upper":
                piece = _ascii_upper(piece)
            elif self.case == "lower" or self.folded:
                piece = _ascii_lower(piece)
            pieces.append(piece)
        return negative, False, _glob(pieces)

    def rule(self, value: Any, path: str) -> Callable[[str], Any]:
        """The predicate of a pattern string or an array of them."""
        if isinstance(value, str):
            compiled = [self.one(value, path)]
        elif isinstance(value, list):
            compiled = [self.one(item, f"{path}[{i}]") for i, item in enumerate(value)]
        else:
            raise RouteError(
                path, f"expected a pattern string or an array of them, got {describe_value(value)}"
            )
        if not compiled:
            return always  # Unit: an empty list of patterns matches anything
        positive = self._side([(r, m) for neg, r, m in compiled if not neg])
        negative = self._side([(r, m) for neg, r, m in compiled if neg])
        if negative is None:
            return positive  # type: ignore[return-value]
        if positive is None:
            return lambda v: not negative(v)
        return lambda v: not negative(v) and positive(v)

    def _side(self, items: list[tuple[bool, Any]]) -> Callable[[str], Any] | None:
        plain = _any_of([m for is_regex, m in items if not is_regex])
        regexes = _any_of([("fn", m) for is_regex, m in items if is_regex])
        if plain is not None and self.folded:
            folded = plain

            def plain(value: str) -> Any:
                return folded(_ascii_lower(value))

        if plain is None:
            return regexes
        if regexes is None:
            return plain
        return lambda v: plain(v) or regexes(v)


def pattern_matcher(patterns: str | list[str]) -> Callable[[str], bool]:
    """Unit's string-pattern semantics over plain values (case-sensitive, no decoding), for
    filters outside routes and for tests."""
    rule = PatternCompiler().rule(patterns, "$")
    return lambda value: bool(rule(value))


# how each property's patterns are read (the rules in this module's docstring)
METHOD_PATTERNS = PatternCompiler(case="upper")
HOST_PATTERNS = PatternCompiler(case="lower")
URI_PATTERNS = PatternCompiler(decode=URI_DECODE)
QUERY_PATTERNS = PatternCompiler(decode=PLUS_DECODE)
ARGUMENT_PATTERNS = PatternCompiler(decode=PLUS_DECODE)
HEADER_PATTERNS = PatternCompiler(folded=True)
COOKIE_PATTERNS = PatternCompiler()
MIME_TYPE_PATTERNS = PatternCompiler(case="lower", folded=True)

"""The fields a share adds to its files' answers: nginx's ``expires``, ``immutable`` for hashed
names, and Unit's ``response_headers``, compiled once per configuration into a
:class:`ShareHeaders` that the share action carries.

- ``expires`` takes nginx's values: ``off`` (nothing, the default), ``epoch``
  (``Expires: Thu, 01 Jan 1970 00:00:01 GMT``, ``Cache-Control: no-cache``), ``max``
  (``Expires: Thu, 31 Dec 2037 23:55:55 GMT``, ``Cache-Control: max-age=315360000``), or a
  time: a number of seconds, or nginx's units (``30s``, ``10m``, ``24h``, ``7d``, ``1w``,
  ``1M`` for 30 days, ``1y`` for 365, summed: ``1h 30m``), ``Expires`` being now plus that
  and ``Cache-Control: max-age`` that (``no-cache`` when negative). nginx's ``modified`` and
  ``@`` forms are refused: a share has no such need.
- ``immutable``: ``true`` gives every file ``Cache-Control: max-age=31536000, immutable``;
  ``"hashed"`` only the files whose name carries a content hash (`is_hashed_name`: Django's
  ManifestStaticFilesStorage and WhiteNoise write ``app.3f2a9c81b7de.css``, bundlers
  ``app-3f2a9c81.js``); such a file ignores ``expires``.
- ``response_headers`` (Unit's): each name set to its value, or removed when ``null``,
  applied last to every answer the share gives, replacing a field of the same name (without
  case). The framing and connection fields are the server's: refused, as the ``headers``
  setting refuses them. Values are constants (a ``$`` is written ``$dollar``): Unit's values
  may name response-time variables, which corral's routes do not have.

Not on the per-request path but through caches: a file's answer keeps the fields made here;
only an ``Expires`` from a time is made again, once a second.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from corral.http.fields import http_date

__all__ = [
    "IMMUTABLE_ALL",
    "IMMUTABLE_HASHED",
    "ShareHeaders",
    "is_hashed_name",
    "parse_expires",
    "parse_immutable",
]

EXPIRES_EPOCH = "epoch"
EXPIRES_MAX = "max"
IMMUTABLE_ALL = 1
IMMUTABLE_HASHED = 2

_YEAR = 31536000
_IMMUTABLE_FIELD = ("Cache-Control", f"max-age={_YEAR}, immutable")
_EPOCH_FIELDS = (("Expires", "Thu, 01 Jan 1970 00:00:01 GMT"), ("Cache-Control", "no-cache"))
_MAX_FIELDS = (("Expires", "Thu, 31 Dec 2037 23:55:55 GMT"), ("Cache-Control", "max-age=315360000"))
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000, "y": _YEAR}
_TIME_PART = re.compile(r"\s*([0-9]+)([smhdwMy]?)")
# a name with a content hash before its extension: '.' or '-', 8 to 64 hex digits with a
# letter among them (so that a date, "report-20240101.csv", is no hash), '.'
_HASHED = re.compile(r"[.-](?=[0-9]*[a-f])[0-9a-f]{8,64}\.[^/]+\Z")
_FIELD_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
# the framing and connection fields, the server's (corral.http.fields.OWNED, Date and Server
# aside: an answer may give its own)
_SERVERS_FIELDS = frozenset(
    ("content-length", "connection", "keep-alive", "transfer-encoding", "upgrade", "te")
)
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def is_hashed_name(path: str) -> bool:
    """Whether the last component of ``path`` carries a content hash before its extension
    (``app.3f2a9c81b7de.css``, ``chunk-3f2a9c81.js``)."""
    return _HASHED.search(path, path.rfind("/") + 1) is not None


def parse_expires(value: Any) -> int | str | None:
    """nginx's ``expires`` value: seconds (an int, maybe negative), `EXPIRES_EPOCH`,
    `EXPIRES_MAX`, or None for ``off``. Raises ``ValueError`` saying what is accepted."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("expected a time ('30s', '24h', '7d'...), seconds, max, epoch or off")
    if isinstance(value, int):
        return value
    text = value.strip()
    if text in ("off", "epoch", "max"):
        return None if text == "off" else text
    if text.startswith(("modified", "@")):
        raise ValueError(f"nginx's {text.split()[0]!r} form is not supported")
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    seconds, position = 0, 0
    while position < len(text):
        part = _TIME_PART.match(text, position)
        if part is None or part.end() == position:
            raise ValueError(
                f"invalid time {value!r}: write a number with an optional unit among "
                "s, m, h, d, w, M, y ('24h', '1h 30m'), or max, epoch, off"
            )
        seconds += int(part.group(1)) * _UNITS[part.group(2) or "s"]
        position = part.end()
        while position < len(text) and text[position] == " ":
            position += 1
    if not text:
        raise ValueError("expected a time, not an empty string")
    return sign * seconds


def parse_immutable(value: Any) -> int:
    """``immutable``: ``false`` (0), ``true`` (`IMMUTABLE_ALL`), ``"hashed"``
    (`IMMUTABLE_HASHED`). Raises ``ValueError``."""
    if value is False:
        return 0
    if value is True:
        return IMMUTABLE_ALL
    if value == "hashed":
        return IMMUTABLE_HASHED
    raise ValueError('expected true, false or "hashed"')


def check_response_headers(value: Any) -> tuple[tuple[str, str | None], ...]:
    """Unit's ``response_headers`` object as (name, value or None) pairs, in order, the values
    as given (JSON text). Raises ``ValueError`` for a name that is no token or is the
    server's, or a value with a control character."""
    if not isinstance(value, dict):
        raise ValueError("expected an object of field names and values (null removes one)")
    rules: list[tuple[str, str | None]] = []
    for name, field in value.items():
        if not _FIELD_NAME.match(name):
            raise ValueError(f"{name!r} is not a field name")
        if name.lower() in _SERVERS_FIELDS:
            raise ValueError(f"{name!r} is the server's own field")
        if field is not None and not isinstance(field, str):
            raise ValueError(f"{name}: expected a string, or null to remove the field")
        if field is not None and _BAD_VALUE.search(field):
            raise ValueError(f"{name}: a field value cannot hold control characters")
        rules.append((name, field))
    return tuple(rules)


class ShareHeaders:
    """What a share adds to its answers (the module's docstring): compiled once, compared by
    value (actions are values)."""

    __slots__ = ("_expires_cache", "_hash", "expires", "immutable", "removed", "rules", "timed")

    def __init__(
        self,
        expires: int | str | None = None,
        immutable: int = 0,
        rules: Iterable[tuple[str, str | None]] = (),
    ) -> None:
        self.expires = expires
        self.immutable = immutable
        self.rules = tuple(rules)
        self.removed = frozenset(name.lower() for name, _ in self.rules)
        # whether the fields change with the clock: an Expires made from now
        self.timed = isinstance(expires, int)
        self._expires_cache: tuple[int, tuple[tuple[str, str], ...]] = (-1, ())
        # a file's prebuilt answers are found by this object, once per request: hashed once
        self._hash = hash(self._key())

    def _key(self) -> tuple[Any, ...]:
        return (self.expires, self.immutable, self.rules)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShareHeaders) and other._key() == self._key()

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return "ShareHeaders(expires={!r}, immutable={!r}, rules={!r})".format(*self._key())

    def caching(self, hashed: bool, now: int) -> tuple[tuple[str, str], ...]:
        """Cache-Control and Expires for a file (``hashed``: its name carries a content
        hash), ``now`` being the time in whole seconds."""
        if self.immutable == IMMUTABLE_ALL or (hashed and self.immutable == IMMUTABLE_HASHED):
            return (_IMMUTABLE_FIELD,)
        expires = self.expires
        if expires is None:
            return ()
        if expires == EXPIRES_EPOCH:
            return _EPOCH_FIELDS
        if expires == EXPIRES_MAX:
            return _MAX_FIELDS
        stamp, fields = self._expires_cache
        if stamp != now:
            seconds = int(expires)
            control = f"max-age={seconds}" if seconds >= 0 else "no-cache"
            fields = (
                ("Expires", http_date(now + seconds)),
                ("Cache-Control", control),
            )
            self._expires_cache = (now, fields)
        return fields

    def apply(self, fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``fields`` with ``response_headers`` applied: the names it lists removed, then its
        values added in order."""
        if not self.rules:
            return fields
        removed = self.removed
        kept = [field for field in fields if field[0].lower() not in removed]
        kept.extend((name, value) for name, value in self.rules if value is not None)
        return kept

"""Validators and conditional requests for files (RFC 9110 §8.8, §13, §14): what a file's
``ETag`` and ``Last-Modified`` are, what ``If-Match``, ``If-Unmodified-Since``,
``If-None-Match``, ``If-Modified-Since`` and ``If-Range`` decide, and which bytes ``Range``
asks for.

RFC 9110's rules, kept:

- a file's entity tag is strong: its modification time (nanoseconds), size and inode, so a
  file changed or replaced has another one; ``Last-Modified`` is its modification time;
- §13.2.2's order: ``If-Match`` (strong comparison; ``*`` any) failing is 412; else
  ``If-Unmodified-Since`` (when no ``If-Match``) failing is 412; then ``If-None-Match`` (weak
  comparison; ``*`` any) matching is 304 for GET and HEAD (412 otherwise); else
  ``If-Modified-Since`` (when no ``If-None-Match``, GET and HEAD only) not modified since is
  304. A date that is not an HTTP-date is ignored, as its field is;
- ``Range`` counts for GET only, in ``bytes``: one range (``a-b``, ``a-``, ``-n``) is a 206,
  a range past the end is 416; several ranges get the whole file (200: the RFC lets a server
  ignore Range; nginx would answer multipart); a ``Range`` that does not parse is ignored;
- ``If-Range`` lets ``Range`` count only when it holds: a strong entity tag equal to the
  file's, or a date equal to its ``Last-Modified``.

Field values arrive as the request's bytes; what is compared most (the client sending back
the ``ETag`` or ``Last-Modified`` it got) is one ``bytes`` equality.
"""

from __future__ import annotations

import re

__all__ = [
    "ALL",
    "UNSATISFIABLE",
    "byte_range",
    "entity_tag",
    "etag_matches",
    "parse_http_date",
]

_TAG = re.compile(rb'\s*(W/)?("[\x21\x23-\x7e\x80-\xff]*")\s*(?:,|\Z)')
_IMF_FIXDATE = re.compile(
    rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{2}) ([A-Za-z]{3}) ([0-9]{4}) "
    rb"([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT"
)
_RFC850 = re.compile(
    rb"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), "
    rb"([0-9]{2})-([A-Za-z]{3})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT"
)
_ASCTIME = re.compile(
    rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Za-z]{3}) ([ 0-9][0-9]) "
    rb"([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{4})"
)
_MONTHS = {
    name.encode(): number
    for number, name in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}
_DIGITS = 18  # a position longer than this is past any file (and int() refuses 4,300 digits)
_DATE_CACHE_LIMIT = 256
_dates: dict[bytes, int | None] = {}

ALL = None  # byte_range: the whole file
UNSATISFIABLE = (-1, -1)


def entity_tag(mtime_ns: int, size: int, inode: int) -> str:
    """A file's strong entity tag, quoted."""
    return f'"{mtime_ns:x}-{size:x}-{inode:x}"'


def parse_http_date(value: bytes) -> int | None:
    """An HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, RFC 850 or asctime, the whole value) as a
    POSIX time; None if it is none. Cached per value: clients send back the dates they got."""
    if value in _dates:
        return _dates[value]
    stamp: int | None = None
    found = _IMF_FIXDATE.fullmatch(value) or _RFC850.fullmatch(value)
    if found is not None:
        day, month, year, hour, minute, second = found.groups()
    else:
        found = _ASCTIME.fullmatch(value)
        if found is not None:
            month, day, hour, minute, second, year = found.groups()
    if found is not None and month in _MONTHS:
        number = int(year)
        if number < 100:  # RFC 850: a two-digit year more than 50 years ahead is in the past
            number += 2000 if number < 70 else 1900
        stamp = _timegm(number, _MONTHS[month], int(day), int(hour), int(minute), int(second))
    if len(_dates) >= _DATE_CACHE_LIMIT:
        _dates.clear()
    _dates[value] = stamp
    return stamp


def _timegm(year: int, month: int, day: int, hour: int, minute: int, second: int) -> int | None:
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    # days from civil (proleptic Gregorian), without the calendar module's import
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return days * 86400 + hour * 3600 + minute * 60 + second


def etag_matches(value: bytes, etag: bytes, weak: bool) -> bool:
    """Whether the list of entity tags ``value`` (``If-Match``, ``If-None-Match``) holds
    ``etag`` (a strong tag, quoted): ``*`` holds any; ``weak`` comparison lets a ``W/`` tag
    match, strong comparison does not."""
    if value == etag:
        return True
    if value.strip() == b"*":
        return True
    position = 0
    end = len(value)
    while position < end:
        tag = _TAG.match(value, position)
        if tag is None:
            # an element that is no entity tag: skip to the next comma
            comma = value.find(b",", position)
            if comma < 0:
                return False
            position = comma + 1
            continue
        if tag.group(2) == etag and (weak or tag.group(1) is None):
            return True
        position = tag.end()
    return False


def byte_range(value: bytes, size: int) -> tuple[int, int] | None:
    """The one range ``value`` (a ``Range`` field) asks of ``size`` bytes, as (first, last)
    inclusive: `ALL` (None) when the field is to be ignored (another unit, several ranges, a
    syntax error), `UNSATISFIABLE` when the range starts past the end (416)."""
    unit, eq, spec = value.partition(b"=")
    if not eq or (unit != b"bytes" and unit.strip(b" \t").lower() != b"bytes"):
        return ALL
    first, dash, last = spec.partition(b"-")
    if not dash or b"," in last:
        return ALL
    first = first.strip(b" \t")
    last = last.strip(b" \t")
    # bytes.isdigit: ASCII digits only
    if (first and not first.isdigit()) or (last and not last.isdigit()):
        return ALL
    if first:
        if len(first) > _DIGITS:
            return UNSATISFIABLE  # past any file
        start = int(first)
        if last:
            stop = int(last) if len(last) <= _DIGITS else 10**_DIGITS
            if stop < start:
                return ALL  # an invalid range-set is ignored
            stop = min(stop, size - 1)
        else:
            stop = size - 1
        if start >= size:
            return UNSATISFIABLE
        return (start, stop)
    if not last:
        return ALL  # "-" alone
    suffix = int(last) if len(last) <= _DIGITS else size
    if suffix == 0 or size == 0:
        return UNSATISFIABLE
    return (max(size - suffix, 0), size - 1)

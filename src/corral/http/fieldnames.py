"""Which request header fields the application sees, by name: ``discard_unsafe_fields``.

A WSGI environ (and any CGI-style interface) names a field ``HTTP_`` + its name upper-cased
with ``-`` written ``_``. Two spellings then share one key: ``X_Foo`` and ``X-Foo`` are both
``HTTP_X_FOO``, a known way to pose as a header a proxy in front set or checked (nginx and
Gunicorn drop names with ``_`` for this reason). The three policies, from the setting:

- null (corral's default, Gunicorn's ``header_map = "drop"``): a name with ``_`` is dropped;
  every other token character is kept (``X.Custom|Pipe`` is ``HTTP_X.CUSTOM|PIPE``): only
  ``_`` can collide after the mapping;
- ``true`` (NGINX Unit's ``discard_unsafe_fields``, Unit's default): only letters, digits
  and ``-`` are kept; any other character drops the name;
- ``false`` (Unit's ``false``, Gunicorn's ``header_map = "dangerous"``): every name the parser
  accepted is kept, ``_`` included.

A dropped field does not exist for the application nor for ``forwarded`` (Unit drops it
before anything reads it); routes and the access log still see every field. Callers judge
each name once and cache the verdict: nothing here runs per request.
"""

from __future__ import annotations

from collections.abc import Callable

# the characters of a name NGINX Unit keeps (deleted by translate: what is left is unsafe)
_UNIT_SAFE = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"


def _has_underscore(name: bytes) -> bool:
    return b"_" in name


def _unit_unsafe(name: bytes) -> bool:
    return not name or bool(name.translate(None, _UNIT_SAFE))


def _never(name: bytes) -> bool:
    return False


def discards(policy: bool | None) -> Callable[[bytes], bool]:
    """Whether a field of a given name is dropped, under ``discard_unsafe_fields`` = ``policy``."""
    if policy is None:
        return _has_underscore
    return _unit_unsafe if policy else _never


__all__ = ["discards"]

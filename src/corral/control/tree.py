"""Path operations on the JSON form of the configuration, and JSON bodies with their errors.

Pure functions on builtins (dicts, lists, scalars: ``msgspec.to_builtins(doc)``); nothing here
knows HTTP or the server. Invariants:
- the tree given is never changed: every operation returns a new tree, copying only the
  containers on the path (the rest is shared, and nobody mutates it);
- a path is a list of keys, already percent-decoded (`split`): an object member's name, or an
  array index written in decimal (``0``, ``12``; no sign, no leading zero);
- as in NGINX Unit: GET needs the value to exist; PUT creates or replaces an object member, or
  replaces an existing array element, and needs the parent to exist; POST appends to an array
  and is not allowed on anything else; DELETE needs the value to exist.
  Missing values raise `NotFound`, a method that does not apply raises `NotAllowed`;
- `decode` accepts exactly one JSON value (a UTF-8 byte order mark is skipped) and reports a
  failure as `InvalidJson` with the offset, line and column (1-based) of the fault; a value
  nested deeper than `MAX_DEPTH` is refused the same way (a whole document is about 8 levels
  deep; thousands would exhaust the recursion of the decoder or of what walks the value), and
  so is an object with two members of one name.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, unquote

import msgspec

__all__ = [
    "InvalidJson",
    "NotAllowed",
    "NotFound",
    "TreeError",
    "api_path",
    "decode",
    "delete",
    "get",
    "join",
    "post",
    "put",
    "split",
]


class TreeError(Exception):
    """A path operation that cannot be done; `status` is the HTTP answer it gets."""

    status = 400
    title = ""

    def __init__(self, detail: str, path: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.path = path


class NotFound(TreeError):
    status = 404
    title = "Value doesn't exist."


class NotAllowed(TreeError):
    status = 405
    title = "Method isn't allowed."

    def __init__(self, detail: str, path: str = "", allow: tuple[str, ...] = ()) -> None:
        super().__init__(detail, path)
        self.allow = allow


class InvalidJson(TreeError):
    status = 400
    title = "Invalid JSON."

    def __init__(self, detail: str, offset: int | None, line: int = 0, column: int = 0) -> None:
        super().__init__(detail)
        self.offset = offset
        self.line = line
        self.column = column


# ---------------------------------------------------------------------------------------------
# Paths.


def split(path: str) -> list[str]:
    """``"/applications/a%2Fb/workers"`` → ``["applications", "a/b", "workers"]``.

    One trailing slash is ignored; ``""`` and ``"/"`` are the root (``[]``).
    """
    if path.endswith("/"):
        path = path[:-1]
    if not path:
        return []
    if not path.startswith("/"):
        raise NotFound(f"a path starts with '/': {path!r}", path)
    try:
        return [unquote(segment, errors="strict") for segment in path[1:].split("/")]
    except UnicodeDecodeError:
        raise NotFound("a percent-encoded segment is not UTF-8", path) from None


def join(segments: list[str], prefix: str = "/config") -> str:
    """The API path of ``segments``: each percent-encoded where it must be (``/``, ``%``)."""
    return prefix + "".join("/" + quote(segment, safe="!$&'()*+,;=:@[]") for segment in segments)


_INDEX = re.compile(r"0|[1-9][0-9]*")


def _child(node: Any, key: str, segments: list[str], depth: int) -> Any:
    if isinstance(node, dict) and key in node:
        return node[key]
    if isinstance(node, list) and _INDEX.fullmatch(key) and int(key) < len(node):
        return node[int(key)]
    raise NotFound(f"{join(segments[: depth + 1])} does not exist", join(segments))


def get(tree: Any, segments: list[str]) -> Any:
    """The value at ``segments``."""
    node = tree
    for depth, key in enumerate(segments):
        node = _child(node, key, segments, depth)
    return node


def _rebuilt(tree: Any, segments: list[str], change: Any) -> Any:
    """``tree`` with the parent of the last segment replaced by ``change(parent, key)``."""
    parents = [tree]
    for depth, key in enumerate(segments[:-1]):
        parents.append(_child(parents[-1], key, segments, depth))
    value = change(parents[-1], segments[-1])
    for parent, key in zip(reversed(parents[:-1]), reversed(segments[:-1]), strict=True):
        value = _set(parent, key, value)
    return value


def _set(container: Any, key: str, value: Any) -> Any:
    if isinstance(container, dict):
        return {**container, key: value}
    copy = list(container)
    copy[int(key)] = value
    return copy


def put(tree: Any, segments: list[str], value: Any) -> Any:
    """``tree`` with ``value`` at ``segments`` (an object member created if missing)."""
    if not segments:
        return value

    def change(parent: Any, key: str) -> Any:
        if isinstance(parent, dict):
            return {**parent, key: value}
        if isinstance(parent, list) and _INDEX.fullmatch(key) and int(key) < len(parent):
            return _set(parent, key, value)
        raise NotFound(f"{join(segments)} does not exist", join(segments))

    return _rebuilt(tree, segments, change)


def post(tree: Any, segments: list[str], value: Any) -> Any:
    """``tree`` with ``value`` appended to the array at ``segments``."""
    target = get(tree, segments)
    if not isinstance(target, list):
        raise NotAllowed(
            f"POST appends to an array; {join(segments)} is not one", join(segments), _NO_POST
        )
    return put(tree, segments, [*target, value])


_NO_POST = ("GET", "PUT", "DELETE")


def delete(tree: Any, segments: list[str]) -> Any:
    """``tree`` without the value at ``segments``; the root deleted is an empty object."""
    if not segments:
        return {}
    get(tree, segments)  # it must exist

    def change(parent: Any, key: str) -> Any:
        if isinstance(parent, dict):
            return {name: item for name, item in parent.items() if name != key}
        return parent[: int(key)] + parent[int(key) + 1 :]

    return _rebuilt(tree, segments, change)


_JSON_STEP = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[("(?:[^"\\]|\\.)*")\]|\[(\d+)\]')


def api_path(text: str) -> str:
    """The API path of the JSON path that begins ``text`` (a `ConfigError`'s place):
    ``$.applications["my.app"].processes: expected ...`` →
    ``/config/applications/my.app/processes``; ``""`` when ``text`` does not begin with one."""
    if not text.startswith("$"):
        return ""
    segments: list[str] = []
    position = 1
    while step := _JSON_STEP.match(text, position):
        name, quoted, index = step.groups()
        segments.append(name or index or msgspec.json.decode(quoted))
        position = step.end()
    if position < len(text) and text[position] != ":":
        return ""
    return join(segments)


# ---------------------------------------------------------------------------------------------
# Bodies.

MAX_DEPTH = 64  # arrays and objects inside one another in a control API body


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests arrays and objects more than `MAX_DEPTH` levels (no recursion)."""
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        level = [
            item
            for node in level
            if isinstance(node, (dict, list))
            for item in (node.values() if isinstance(node, dict) else node)
        ]
        if not level:
            return False
    return any(isinstance(node, (dict, list)) for node in level)


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise InvalidJson(f"duplicate object member {json.dumps(name)}", None)
            seen.add(name)
    return members


def _refuse_duplicate_members(body: bytes) -> None:
    """msgspec keeps the last of two members of one name; NGINX Unit, and this API, refuse
    the body (RFC 8259 4: the names "SHOULD be unique", and which one counts is unsaid). The
    standard library's parser is the one that shows every member; ``body`` is known valid."""
    json.loads(body, object_pairs_hook=_unique_members)


_AT_BYTE = re.compile(r"(?P<what>.*?) \(byte (?P<offset>\d+)\)")


def decode(body: bytes) -> Any:
    """The JSON value in ``body``; raises `InvalidJson` saying where it broke."""
    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:]
    too_deep = InvalidJson(f"the JSON value is nested deeper than {MAX_DEPTH} levels", None)
    try:
        value = msgspec.json.decode(body)
    except RecursionError:
        raise too_deep from None
    except msgspec.DecodeError as exc:
        text = str(exc)
    else:
        if _too_deep(value):
            raise too_deep
        if isinstance(value, (dict, list)):
            _refuse_duplicate_members(body)
        return value
    offset: int | None
    if match := _AT_BYTE.fullmatch(text):
        text, offset = match["what"], int(match["offset"])
        if text.endswith("trailing characters") and offset > 0:
            offset -= 1  # msgspec names the byte after the first one that should not be there
    elif text == "Input data was truncated":
        text, offset = "unexpected end of the JSON text", len(body)
    elif text.startswith("Invalid UTF-8"):
        try:
            body.decode("utf-8")
            offset = None
        except UnicodeDecodeError as bad:
            offset = bad.start
    else:
        offset = None
    if offset is None:
        raise InvalidJson(text, None)
    line, column = position(body, offset)
    raise InvalidJson(f"{text} at line {line}, column {column}", offset, line, column)


def position(data: bytes, offset: int) -> tuple[int, int]:
    """Line and column (both from 1; the column counts characters) of byte ``offset``."""
    before = data[:offset]
    line = before.count(b"\n") + 1
    start = before.rfind(b"\n") + 1
    return line, len(before[start:].decode("utf-8", "replace")) + 1

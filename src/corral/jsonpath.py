"""How a validation message names the place in a JSON document where a value went wrong.

The configuration document (`corral.config.document`), the routes (`corral.routing`) and the
address patterns (`corral.net.addresses`) all report an invalid value as one line,
``PATH: what was expected``. A user reads PATH to find the value in their file or in the
control API's tree, so it is spelled one way whichever part found the problem: ``$`` for the
document, ``.name`` for a member whose name is a plain ASCII identifier, ``["name"]`` (JSON's
spelling of the name) for any other, ``[0]`` for an array's item:
``$.listeners["127.0.0.1:8080"].pass``, ``$.routes["my-site"][0].match.uri``.

Stdlib only, like `corral.routing`, which imports no msgspec.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PathError", "describe_value", "member"]

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LONGEST_NAME = 60  # characters of a quoted name shown, as `corral.config.errors.show`
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


class PathError(ValueError):
    """An invalid value at ``path``: ``str()`` is one line, ``PATH: what was expected``."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


def describe_value(value: Any) -> str:
    """What was found, for ``got ...``: JSON's ``null``/``true``/``false``, ``an object``,
    ``an array``, else the value's repr, shortened."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def member(key: str) -> str:
    """A JSON-path step for `key`: ``.workers``, or ``["myproj.wsgi"]`` when not a plain name."""
    if _PLAIN_NAME.fullmatch(key):
        return f".{key}"
    quoted = _json_string(key)
    if len(quoted) > _LONGEST_NAME:
        quoted = quoted[: _LONGEST_NAME - 3] + "..."
    return f"[{quoted}]"


def _json_string(text: str) -> str:
    """`text` as JSON writes it, UTF-8 left as it is (the `json` module is not imported for
    this: importing the configuration stays cheap); a lone surrogate, which no UTF-8 text
    holds, is escaped."""
    out = []
    for char in text:
        escape = _ESCAPES.get(char)
        if escape is not None:
            out.append(escape)
        elif char < " " or "\ud800" <= char <= "\udfff":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'

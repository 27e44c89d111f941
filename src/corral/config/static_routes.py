"""Static files from the command line, and from uWSGI's and Granian's settings, as NGINX Unit's
``share`` routes in front of the one application of a command-line document.

This module owns the reading of the settings of the "Static files" section (`parse_mounts`,
`parse_index`, `check_expires`, `parse_expires_uri`, which `corral.config.settings` declares)
and `static_routes`, the route steps they become; `corral.config.sources` puts those steps in
the document (each HTTP listener then passes to ``routes``, the last step to the application),
so a command line's static files are served exactly as a document's own shares are
(`corral.routing` compiles them, the workers serve them), and ``--check-config`` shows them.

A mount ``URL=DIR`` serves ``DIR/x.css`` for ``URL/x.css``: a share of DIR followed by the
request's path without URL (``${uri_after:URL}``, `corral.routing.variables`; plain ``$uri``
when DIR already ends with URL, as nginx's ``root``), with ``chroot`` at DIR so that no path
leaves it. URL matches at a segment boundary (``/static`` and ``/static/...``, never
``/staticx``); a mount of a file serves that file for URL exactly. The most specific mount
decides (nginx's longest prefix). What a mount does not have:

- answered 404 (nginx, Granian), except under ``/``, the whole site, which tries the file and
  passes the rest to the application (nginx's ``try_files $uri @app``);
- with ``fallback`` (uWSGI's ``static-map``), tried in every other mount that covers the
  request, in the order given, then passed to the application. A step that can pass to the
  application matches GET and HEAD only: another method goes to the application at once, as
  uWSGI does, rather than a share's 405.

``expires_uri`` (uWSGI's ``static-expires-uri``): for each rule ``(REGEX, EXPIRES)`` and each
mount a step before the mount's own, matching the request's path against REGEX (Unit's ``~``
pattern, searched) restricted to the mount by a lookahead, whose shares carry that
``expires``; the first rule that matches wins, as in uWSGI.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import msgspec

from corral.jsonpath import member

__all__ = [
    "Mount",
    "StaticError",
    "check_expires",
    "parse_expires_uri",
    "parse_index",
    "parse_mounts",
    "static_routes",
]

_METHODS = ["GET", "HEAD"]  # what a share answers; a step that may pass on matches them only


class StaticError(ValueError):
    """A value that does not fit, in one line; `at` is where inside the setting's value
    (``[2]``); `corral.config.values` makes it its `Invalid` (this module does not import
    the values: they import it)."""

    def __init__(self, message: str, at: str = "") -> None:
        super().__init__(message)
        self.at = at


def _show(value: Any) -> str:
    """A value as JSON spells it."""
    return msgspec.json.encode(value).decode()


@dataclass(frozen=True, slots=True)
class Mount:
    """One URL prefix served from a directory, or one URL served by a file."""

    url: str  # the URL path without a trailing "/": "" is the whole site
    path: str  # absolute
    is_file: bool

    def covers(self, url: str, is_file: bool) -> bool:
        """Whether every request a step for (url, is_file) matches is under this mount."""
        if self.is_file:
            return is_file and url == self.url
        return not self.url or url == self.url or url.startswith(self.url + "/")


# ---------------------------------------------------------------------------------------------
# Reading the settings (each raises `StaticError`).


def parse_mounts(value: list[str] | dict[str, str]) -> list[Mount]:
    """``static_map``: ``URL=DIR`` strings, or a table of URL to DIR; DIR must exist (a
    directory, or a file) and is made absolute against the directory corral starts in."""
    pairs: list[tuple[str, str, str]] = []  # (URL, DIR, where in the value)
    if isinstance(value, dict):
        pairs = [(url, directory, member(url)) for url, directory in value.items()]
    for index, item in enumerate(value if isinstance(value, list) else []):
        url, equals, directory = item.partition("=")
        if not equals:
            raise StaticError(
                f'expected "URL=DIR" (such as "/static=./static"), got {_show(item)}', f"[{index}]"
            )
        pairs.append((url, directory, f"[{index}]"))
    mounts = []
    for url, directory, at in pairs:
        mounts.append(_mount(url.strip(), directory.strip(), at))
    return mounts


def _mount(url: str, directory: str, at: str) -> Mount:
    if not url.startswith("/") or "}" in url or "\0" in url:
        raise StaticError(f"{_show(url)}: the URL is a path starting with '/'", at)
    if not directory or "\0" in directory:
        raise StaticError(f"{_show(url)}: give the directory after '='", at)
    if not os.path.exists(directory):
        raise StaticError(f"{_show(directory)}: no such directory", at)
    return Mount(url.rstrip("/"), os.path.abspath(directory), not os.path.isdir(directory))


def parse_index(value: list[str] | str) -> list[str]:
    """``static_index``: file names a directory is served by, tried in order."""
    names = [value] if isinstance(value, str) else value
    for index, name in enumerate(names):
        if not name or "/" in name or "\0" in name or name in (".", ".."):
            at = f"[{index}]" if isinstance(value, list) else ""
            raise StaticError(f"expected a file name (without '/'), got {_show(name)}", at)
    return names


def check_expires(value: int | str) -> int | str:
    """``static_expires``: whatever a share's ``expires`` takes (nginx's ``24h``, ``max``,
    ``off``, seconds), as the route compiler reads it: one meaning, checked in one place."""
    from corral.routing import RouteError, compile_routes

    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # a flag's seconds
    try:
        compile_routes([{"action": {"share": "/", "expires": value}}])
    except RouteError as exc:
        raise StaticError(exc.detail) from None
    return value


def parse_expires_uri(value: dict[str, int | str] | list[str]) -> list[tuple[str, int | str]]:
    """``static_expires_uri``: a table of REGEX to expires, or ``"REGEX TIME"`` strings
    (uWSGI's, whose TIME is seconds), in the order they are tried."""
    if isinstance(value, dict):
        items: list[tuple[str, int | str, str]] = [
            (regex, expires, member(regex)) for regex, expires in value.items()
        ]
    else:
        items = []
        for index, text in enumerate(value):
            regex, _, time = text.strip().rpartition(" ")
            if not regex.strip():
                raise StaticError(f'expected "REGEX TIME", got {_show(text)}', f"[{index}]")
            items.append((regex.strip(), time, f"[{index}]"))
    rules = []
    for regex, expires, at in items:
        try:
            re.compile(regex, re.ASCII)
        except re.error as exc:
            raise StaticError(f"{_show(regex)}: not a regular expression: {exc}", at) from None
        try:
            rules.append((regex, check_expires(expires)))
        except StaticError as exc:
            raise StaticError(str(exc), at) from None
    return rules


# ---------------------------------------------------------------------------------------------
# The routes.


def static_routes(
    mounts: list[Mount],
    application: str,
    *,
    index: list[str] | None = None,
    expires: int | str | None = None,
    expires_uri: list[tuple[str, int | str]] | None = None,
    fallback: bool = False,
) -> list[dict[str, Any]]:
    """The route steps that serve ``mounts`` and pass every other request to ``application``
    (Unit's ``routes`` array, as JSON values); `StaticError` for a URL mounted twice without
    ``fallback`` (the second could never serve)."""
    steps: list[dict[str, Any]] = []
    for url, is_file in _step_keys(mounts, fallback):
        if fallback:
            chain = [mount for mount in mounts if mount.covers(url, is_file)]
        else:
            chain = [next(m for m in mounts if (m.url, m.is_file) == (url, is_file))]
        to_app = fallback or not url
        match: dict[str, Any] = {"method": list(_METHODS)} if to_app else {}
        app = {"pass": f"applications/{application}"} if to_app else None
        for regex, rule_expires in expires_uri or ():
            steps.append(
                {
                    "match": {**match, "uri": "~" + _within(url, is_file) + f"(?:{regex})"},
                    "action": _chain(chain, index or [], rule_expires, app),
                }
            )
        if url:
            match["uri"] = _pattern(url) if is_file else [_pattern(url), _pattern(url) + "/*"]
        step: dict[str, Any] = {"match": match} if match else {}
        step["action"] = _chain(chain, index or [], expires, app)
        steps.append(step)
    steps.append({"action": {"pass": f"applications/{application}"}})
    return steps


def _step_keys(mounts: list[Mount], fallback: bool) -> list[tuple[str, bool]]:
    """One step per mounted URL: files first (exact URLs), then the longest URL first."""
    keys: list[tuple[str, bool]] = []
    for mount in mounts:
        key = (mount.url, mount.is_file)
        if key in keys and not fallback:
            raise StaticError(f"{_show(mount.url or '/')} is mounted twice")
        if key not in keys:
            keys.append(key)
    return sorted(keys, key=lambda key: (not key[1], -len(key[0])))


def _chain(
    chain: list[Mount], index: list[str], expires: int | str | None, last: dict[str, Any] | None
) -> dict[str, Any]:
    """The share of each mount of ``chain`` (one per index name), each the fallback of the one
    before, then ``last`` (the application; None: 404)."""
    action = last
    for mount in reversed(chain):
        for name in reversed(index if index and not mount.is_file else [None]):
            share: dict[str, Any] = {"share": _template(mount)}
            if not mount.is_file:
                share["chroot"] = _literal(mount.path)
            if name is not None:
                share["index"] = name
            if expires is not None:
                share["expires"] = expires
            if action is not None:
                share["fallback"] = action
            action = share
    assert action is not None
    return action


def _template(mount: Mount) -> str:
    """The share path: DIR and the request's path under the mount."""
    path = _literal(mount.path)
    if mount.is_file:
        return path
    if not mount.url:
        return path + "$uri"
    if mount.path.endswith(mount.url) and "$" not in mount.url:  # nginx's root: pure Unit
        return path[: -len(mount.url)] + "$uri"
    return f"{path}${{uri_after:{mount.url}}}"


def _literal(path: str) -> str:
    """A path in a share template: a ``$`` of its own is ``${dollar}``."""
    return path.replace("$", "${dollar}")


def _pattern(url: str) -> str:
    """A URL as a Unit ``uri`` pattern that matches it literally (patterns are decoded)."""
    return url.replace("%", "%25").replace("*", "%2A")


def _within(url: str, is_file: bool) -> str:
    """A regex start that holds only for a path the step's mount covers, then skips to where
    the rule's own regex is searched from."""
    if not url:
        return ""
    end = "$" if is_file else "(?:/|$)"
    return f"^(?={re.escape(url)}{end})[\\s\\S]*?"

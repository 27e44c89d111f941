"""The values of where corral listens and whom it trusts there, as a user writes them.

Owns the bind address (`BindAddress`, `parse_bind`: the listener keys of the document), the
PROXY protocol's modes, and the lists of client addresses a setting trusts or serves
(`address_list`, Gunicorn's `forwarded_allow_ips`). Each parser takes a setting's input form
and gives its document form or raises `Invalid`, as `corral.config.values`' do; the settings
declare them (`corral.config.settings`).

Rules kept here: stdlib and msgspec only (workers import this module); no I/O except
`parse_bind`'s name lookup for a host name that is not an IP literal or ``localhost``.
"""

from __future__ import annotations

import enum
import re
import socket
from dataclasses import dataclass
from typing import Literal

from corral.config.errors import Invalid, show
from corral.config.values import parse_path_list

__all__ = [
    "ANY_ADDRESS",
    "BIND_EXPECT",
    "DEFAULT_BIND",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "BindAddress",
    "ProxyMode",
    "address_list",
    "parse_allow_ips",
    "parse_bind",
    "parse_binds",
    "parse_optional_binds",
    "proxy_mode",
]

DEFAULT_HOST = "127.0.0.1"  # nothing listens beyond loopback unless asked to
DEFAULT_PORT = 8000
DEFAULT_BIND = f"{DEFAULT_HOST}:{DEFAULT_PORT}"


class ProxyMode(enum.StrEnum):
    """Which PROXY protocol headers a listener takes (Gunicorn's `--proxy-protocol` modes)."""

    OFF = "off"
    V1 = "v1"  # the text header only
    V2 = "v2"  # the binary header only
    AUTO = "auto"  # either


@dataclass(frozen=True, slots=True)
class BindAddress:
    """One address to listen on; `str()` gives the normalized form used as the listener key."""

    kind: Literal["tcp", "unix"]
    host: str  # "" for unix sockets
    port: int  # 0 for unix sockets (and for an ephemeral TCP port)
    path: str | None  # the socket path for unix sockets
    family: socket.AddressFamily

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        if self.family == socket.AF_INET6:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"

    @property
    def sockaddr(self) -> tuple[str, int] | str:
        """The address as `socket.bind` takes it."""
        return self.path if self.path is not None else (self.host, self.port)


BIND_EXPECT = "HOST:PORT, [IPV6]:PORT, :PORT, PORT or unix:PATH"
_HOSTNAME = r"[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?)*"


def parse_bind(text: str) -> BindAddress:
    """Parse one bind address.

    ``HOST:PORT``, ``[IPV6]:PORT``, ``unix:PATH`` (also ``unix://PATH``), ``HOST`` (port 8000),
    ``PORT`` alone (on 127.0.0.1: nothing listens beyond loopback unless asked to), ``:PORT``
    (all IPv4 interfaces, 0.0.0.0, as in Gunicorn) and ``*:PORT`` (the same, as NGINX Unit
    writes it). ``localhost`` means 127.0.0.1; any other host
    name is resolved now, so every listener key is a literal address. Port 0 asks the kernel
    for a free port.
    """
    if not isinstance(text, str):
        raise Invalid(BIND_EXPECT, text)
    s = text.strip()
    if s.startswith("unix:"):
        path = s[5:].removeprefix("//")
        if not path or "\0" in path:
            raise Invalid("unix:PATH with a non-empty path", text)
        return BindAddress("unix", "", 0, path, socket.AF_UNIX)
    if s.startswith("fd://"):
        raise Invalid(message=f"{show(text)}: fd:// addresses are not supported")
    s = s.removeprefix("tcp://")
    if s.startswith("["):
        host, sep, rest = s[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise Invalid(BIND_EXPECT, text)
        return _tcp(text, host, rest[1:] if rest else str(DEFAULT_PORT), socket.AF_INET6)
    if s.isascii() and s.isdigit():
        return _tcp(text, DEFAULT_HOST, s, socket.AF_INET)
    if ":" not in s:
        return _tcp(text, s, str(DEFAULT_PORT), None)
    host, _, port = s.partition(":")
    if host == "*":
        host = "0.0.0.0"
    if ":" in port:
        raise Invalid(f"{BIND_EXPECT} (IPv6 addresses go in brackets)", text)
    return _tcp(text, host or "0.0.0.0", port, None)


def _tcp(text: str, host: str, port_text: str, family: int | None) -> BindAddress:
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        raise Invalid(f"{BIND_EXPECT} with a port from 0 to 65535", text)
    port = int(port_text)
    host = host.lower()
    if host == "localhost":
        host = "127.0.0.1"
    families = (family,) if family is not None else (socket.AF_INET, socket.AF_INET6)
    for fam in families:
        try:
            packed = socket.inet_pton(fam, host)
        except (OSError, ValueError):
            continue
        return BindAddress(
            "tcp", socket.inet_ntop(fam, packed), port, None, socket.AddressFamily(fam)
        )
    if family is not None or not re.fullmatch(_HOSTNAME, host):
        raise Invalid(BIND_EXPECT, text)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise Invalid(message=f"cannot resolve host {show(host)}: {exc}") from None
    fam, _, _, _, sockaddr = infos[0]
    return BindAddress("tcp", str(sockaddr[0]), port, None, socket.AddressFamily(fam))


def parse_binds(value: list[str] | str) -> list[BindAddress]:
    items = [value] if isinstance(value, str) else value
    if not items:
        raise Invalid("at least one address", value)
    seen: dict[str, BindAddress] = {}
    for index, item in enumerate(items):
        try:
            address = parse_bind(item)
        except Invalid as exc:
            exc.at = f"[{index}]"
            raise
        if str(address) in seen:
            same = "" if item == str(address) else f" ({show(item)})"
            raise Invalid(message=f"{address}{same} is given twice", at=f"[{index}]")
        seen[str(address)] = address
    return list(seen.values())


def parse_optional_binds(value: list[str] | str) -> list[BindAddress]:
    """`uwsgi_socket`, `insecure_bind`: like `bind`, but none at all is the default."""
    return parse_binds(value) if value else []


def proxy_mode(value: ProxyMode | bool) -> ProxyMode:
    """`proxy_protocol` as a mode: Gunicorn's older boolean is ``auto`` or ``off``."""
    if isinstance(value, bool):
        return ProxyMode.AUTO if value else ProxyMode.OFF
    return ProxyMode(value)


def address_list(value: list[str] | str) -> list[str]:
    """`proxy_allow_from`: a list, or Gunicorn's comma-separated string; each an address, a
    CIDR network or Unit's address pattern, ``*`` for any, checked as the listener's is."""
    found = parse_path_list(value)
    if not found:
        raise Invalid(message="expected at least one address, or '*'")
    _check_addresses(value, found, unit_message=True)
    return found


def _check_addresses(value: list[str] | str, items: list[str], *, unit_message: bool) -> None:
    """Each of ``items`` (``value`` split) is an address pattern, or ``*``; the error names the
    item's place in a list, with Unit's own message or Gunicorn's kind of value."""
    from corral.net.addresses import AddressError, address_matcher

    for index, item in enumerate(items):
        if item == "*":
            continue
        try:
            address_matcher(item)
        except AddressError as exc:
            at = f"[{index}]" if isinstance(value, list) else ""
            if unit_message:
                raise Invalid(message=exc.detail, at=at) from None
            raise Invalid("an IP address or a CIDR network", item, at=at) from None


ANY_ADDRESS = ["0.0.0.0/0", "::/0"]


def parse_allow_ips(value: list[str] | str) -> list[str]:
    """Gunicorn's `forwarded_allow_ips` as NGINX Unit's `forwarded.source` patterns."""
    items = parse_path_list(value)
    if "*" in items:
        return list(ANY_ADDRESS)
    _check_addresses(value, items, unit_message=False)
    return items

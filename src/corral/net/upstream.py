"""Where an upstream server is (`parse_address`: Unit's spellings of one) and how the proxy
talks to it (`ProxyOptions`: the ``proxy_*`` settings as one value). Pure: the route compiler
reads these in the master, the proxy (`corral.actions.proxy`) in the workers.
"""

from __future__ import annotations

import socket
from typing import Any

__all__ = ["DEFAULT_OPTIONS", "ProxyOptions", "parse_address"]


class ProxyOptions:
    """The proxy's settings (config/settings.py's ``proxy_*``), as one value."""

    __slots__ = (
        "buffer_size",
        "connect_timeout",
        "fail_timeout",
        "keepalive",
        "keepalive_timeout",
        "max_conns",
        "read_timeout",
        "send_timeout",
        "tunnel_timeout",
    )

    def __init__(
        self,
        connect_timeout: float = 5.0,
        send_timeout: float = 60.0,
        read_timeout: float = 60.0,
        fail_timeout: float = 10.0,
        keepalive: int = 128,
        keepalive_timeout: float = 60.0,
        buffer_size: int = 65536,
        tunnel_timeout: float = 3600.0,
        max_conns: int = 0,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.send_timeout = send_timeout
        self.read_timeout = read_timeout
        self.fail_timeout = fail_timeout
        self.keepalive = keepalive
        self.keepalive_timeout = keepalive_timeout
        self.buffer_size = buffer_size
        self.tunnel_timeout = tunnel_timeout
        self.max_conns = max_conns  # a worker's connections to one server at most (0: any)

    @property
    def shortest(self) -> float:
        """How often a request's clock is looked at: its send or read timeout may run, or its
        wait for a connection to a server at its ``max_conns`` (``connect_timeout``)."""
        return min(self.send_timeout, self.read_timeout, self.connect_timeout)

    @classmethod
    def of(cls, settings: Any) -> ProxyOptions:
        """From a document's settings (None: the defaults)."""
        if settings is None:
            return DEFAULT_OPTIONS
        return cls(
            settings.proxy_connect_timeout,
            settings.proxy_send_timeout,
            settings.proxy_read_timeout,
            settings.proxy_fail_timeout,
            settings.proxy_keepalive,
            settings.proxy_keepalive_timeout,
            settings.proxy_buffer_size,
            settings.proxy_tunnel_timeout,
            settings.proxy_max_conns,
        )

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is ProxyOptions and other._fields() == self._fields()

    def __hash__(self) -> int:
        return hash(self._fields())


DEFAULT_OPTIONS = ProxyOptions()


def parse_address(text: str) -> tuple[int, Any]:
    """An upstream server's address as Unit writes it (``127.0.0.1:8080``, ``[::1]:8080``,
    ``unix:/path``; a bare ``/path`` too), as (socket family, address). Raises ValueError."""
    if text.startswith("unix:") or text.startswith("/"):
        path = text.removeprefix("unix:")
        if not path.startswith("/"):
            raise ValueError(f"expected an absolute unix socket path, got {text!r}")
        return socket.AF_UNIX, path
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port with a port from 1 to 65535, got {text!r}")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"expected [IPv6]:port, got {text!r}")
        host = host[1:-1]
        family = socket.AF_INET6
    else:
        family = socket.AF_INET
    try:
        socket.inet_pton(family, host)
    except OSError:
        raise ValueError(f"expected an IP address (not a name), got {host!r}") from None
    return family, (host, int(port))

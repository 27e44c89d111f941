"""A listener's ``tls`` object, NGINX Unit's shape: which certificates of the store it serves,
its session cache and tickets, and OpenSSL configuration commands; and corral's own
``client_certificate``: the store's CA bundles a client's certificate is checked against.

The shape alone is checked here (every failure a msgspec validation error, which
`corral.config.document` words as one line); whether each certificate is in the store is the
control API's check (`corral.tls.store`), as the store is the master's, not the document's.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = ["ClientCertificate", "Tls", "TlsSession", "settings_files"]

_CERTIFICATE = Annotated[str, Meta(min_length=1)]


def settings_files(settings: Any) -> list[str]:
    """The files the TLS settings name (``certfile``, ``keyfile``, ``ca_certs``): the master
    watches them as touch-reload files, so that a certificate an ACME client renews (certbot
    writes new files) is served without a HUP. Here, not in `corral.tls`, so that a server
    without TLS tells it without importing that package (a master's modules are every forked
    worker's memory too)."""
    return [path for path in (settings.certfile, settings.keyfile, settings.ca_certs) if path]


TICKET_KEY_SIZES = (48, 80)  # bytes: the two sizes of OpenSSL's session ticket keys


class TlsSession(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Unit's ``session``: the size of the session cache (0: none), how long a session may
    be resumed (seconds), and tickets (true, false, or the ticket keys in base64, the last
    one encrypting as in Unit; applied by `corral.tls.session`)."""

    cache_size: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    timeout: Annotated[int, Meta(gt=0)] | UnsetType = UNSET
    tickets: bool | str | list[str] | UnsetType = UNSET

    def __post_init__(self) -> None:
        keys = [self.tickets] if isinstance(self.tickets, str) else self.tickets
        if not isinstance(keys, list):
            return
        for key in keys:
            try:
                size = len(base64.b64decode(key, validate=True))
            except (binascii.Error, ValueError):
                raise ValueError(f"tickets: {_quoted(key)} is not base64") from None
            if size not in TICKET_KEY_SIZES:
                raise ValueError(f"tickets: {_quoted(key)} is {size} bytes: a key is 48 or 80")


class ClientCertificate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """corral's own (Unit has no client certificates): the CA bundles of the store (bundles
    without a key) a client's certificate is checked against, and whether a client must
    give one (``required``, the default) or may (``false``: one given is checked)."""

    ca: _CERTIFICATE | Annotated[list[_CERTIFICATE], Meta(min_length=1)]
    required: bool = True

    @property
    def names(self) -> tuple[str, ...]:
        """The CA bundles' names, in the order given."""
        return _names(self.ca)


class Tls(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Unit's listener ``tls``: the names of certificate bundles in the store, the first one
    the default when SNI names none of them; corral's ``client_certificate``."""

    certificate: _CERTIFICATE | Annotated[list[_CERTIFICATE], Meta(min_length=1)]
    session: TlsSession | UnsetType = UNSET
    conf_commands: dict[str, str] | UnsetType = UNSET
    client_certificate: ClientCertificate | UnsetType = UNSET

    @property
    def names(self) -> tuple[str, ...]:
        """The certificates' names, in the order given."""
        return _names(self.certificate)

    @property
    def authorities(self) -> tuple[str, ...]:
        """The names of the CA bundles client certificates are checked against (none
        without ``client_certificate``)."""
        given = self.client_certificate
        return () if isinstance(given, UnsetType) else given.names


def _names(given: str | list[str]) -> tuple[str, ...]:
    return (given,) if isinstance(given, str) else tuple(given)


def _quoted(key: str) -> str:
    return msgspec.json.encode(key).decode()

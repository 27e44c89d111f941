"""What an HTTPS listener serves, as plain data the master reads: a `ListenerTls`, its `Recipe`
(how its contexts are made) and its `Certificate` s (each a PEM chain and key in memory).

The master builds them (`settings_tls` from the settings' files, `store_tls` from the
certificate store's bundles a listener's ``tls`` names), and `corral.tls.context` makes the
contexts from them, in the master before the fork and, for a renewal, in the running workers,
which cannot read the key's file (they get these bytes from the master: master/renewal.py).
Being data, two of them compare: a reload that reads the same bytes and settings makes the
same `ListenerTls`, one that reads new certificates and nothing else differs only by its
``certificates``, which is what lets the running workers take them without a restart.

Nothing here is a secret in a repr: a key, a password and ticket keys are left out of it.
`cryptography` is imported only where a certificate is read (the master's).
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

__all__ = [
    "Certificate",
    "ListenerTls",
    "Recipe",
    "Renewal",
    "TlsError",
    "settings_tls",
    "store_tls",
]

VERIFY_NAMES = ("none", "optional", "required")  # cert_reqs 0, 1, 2


class TlsError(ValueError):
    """A TLS setting that cannot be served, in one line (a configuration error)."""


@dataclass(frozen=True, slots=True)
class Certificate:
    """One certificate a listener serves."""

    label: str  # what the log and the status call it: the store's name, or the certfile path
    names: tuple[str, ...]  # the leaf's DNS names (else its common name): SNI picks by them
    chain: bytes = field(repr=False)  # PEM: the leaf, then its issuers
    key: bytes = field(repr=False)  # PEM: the private key (b"": it is in ``chain``)
    password: str | None = field(default=None, repr=False)  # of an encrypted key
    until: datetime.datetime | None = None  # when the leaf expires (None: not read)
    keyfile: str | None = None  # the keyfile path, for its errors (a file's certificate)
    stored: bool = False  # from the store (else from the settings' files)

    def describe(self) -> str:
        """One line: the certificate, its names and when it expires."""
        what = f"certificate {self.label!r}" if self.stored else f"certfile {self.label}"
        named = ", ".join(self.names) or "no name"
        if self.until is None:
            return f"{what} ({named}): its expiry could not be read"
        left = (self.until - datetime.datetime.now(datetime.UTC)).days
        return f"{what} ({named}) valid until {self.until:%Y-%m-%d %H:%M} UTC ({left} days)"


@dataclass(frozen=True, slots=True)
class Recipe:
    """How a listener's contexts are made, its certificates apart."""

    minimum: str = "1.2"  # the oldest TLS version: "1.2" or "1.3"
    ciphers: str | None = None  # TLS 1.2's suites (OpenSSL's list), None: the defaults
    # session tickets: True (keys shared by the pool's workers, rotated by the master), False
    # (none), or Unit's own keys (raw, 48 or 80 bytes; the one that encrypts first)
    tickets: bool | tuple[bytes, ...] = field(default=True, repr=False)
    timeout: int | None = None  # seconds a session may be resumed (None: OpenSSL's)
    cache_size: int | None = None  # sessions in the server's cache (0: none; None: OpenSSL's)
    ticket_rotation: float = 43200.0  # seconds between two ticket keys (tls/session.py)
    verify: int = 0  # client certificates: 0 not asked for, 1 optional, 2 required
    client_ca: bytes | None = None  # PEM: the authorities client certificates are checked by
    client_ca_label: str | None = None  # where it came from, for its errors


@dataclass(frozen=True, slots=True)
class ListenerTls:
    """An HTTPS listener's recipe and certificates (the first the default)."""

    recipe: Recipe
    certificates: tuple[Certificate, ...]


@dataclass(frozen=True, slots=True)
class Renewal:
    """New certificates for a running worker (master/renewal.py, server/renewal.py): the
    master's count of renewals (what the worker's ``renewed N`` acknowledges) and what each
    renewed listener of the worker's pool serves from now on, by address."""

    number: int
    listeners: dict[str, ListenerTls]

    def encode(self) -> bytes:
        return msgspec.msgpack.encode(self)

    @staticmethod
    def decode(data: bytes) -> Renewal:
        """(msgspec.ValidationError, a ValueError, for what is not a renewal.)"""
        return msgspec.msgpack.decode(data, type=Renewal)


def settings_tls(settings: Any) -> ListenerTls | None:
    """What the settings' files serve (``certfile`` and the rest), None without a certfile;
    the files are read now. Raises `TlsError`."""
    if settings.certfile is None:
        for name in ("keyfile", "ca_certs"):
            if getattr(settings, name) is not None:
                raise TlsError(f"{name} is set without certfile: give the certificate too")
        return None
    chain = _read("certfile", settings.certfile)
    key = b"" if settings.keyfile is None else _read("keyfile", settings.keyfile)
    client_ca = None
    if settings.cert_reqs:
        if settings.ca_certs is None:
            raise TlsError(
                f"cert_reqs {settings.cert_reqs} asks for client certificates: give ca_certs, "
                "the authorities they are checked against"
            )
        client_ca = _read("ca_certs", settings.ca_certs)
    names, until = _leaf_facts(chain)
    certificate = Certificate(
        settings.certfile, names, chain, key, settings.keyfile_password, until, settings.keyfile
    )
    recipe = Recipe(
        settings.tls_min_version,
        settings.ciphers,
        ticket_rotation=settings.tls_ticket_rotation,
        verify=settings.cert_reqs,
        client_ca=client_ca,
        client_ca_label=None if client_ca is None else f"ca_certs {settings.ca_certs}",
    )
    return ListenerTls(recipe, (certificate,))


def store_tls(tls: Any, bundles: list[Any], authorities: list[Any], settings: Any) -> ListenerTls:
    """What a listener whose ``tls`` (NGINX Unit's: a `corral.config.listener_tls.Tls`) names
    ``bundles`` of the certificate store (`corral.tls.bundle.Bundle`, in its order) serves,
    client certificates checked against the CA bundles ``authorities``. Raises `TlsError`."""
    minimum, ciphers = settings.tls_min_version, settings.ciphers
    commands = {} if tls.conf_commands is msgspec.UNSET else dict(tls.conf_commands)
    for name, value in commands.items():
        if name == "MinProtocol" and value in ("TLSv1.2", "TLSv1.3"):
            minimum = value.removeprefix("TLSv")
        elif name == "CipherString":
            ciphers = value
        else:
            raise TlsError(
                f"conf_commands: {name} {value!r} is not supported by corral (MinProtocol "
                "TLSv1.2 or TLSv1.3, and CipherString, are)"
            )
    session = tls.session
    unset = msgspec.UNSET
    tickets = True if session is unset or session.tickets is unset else session.tickets
    recipe = Recipe(
        minimum,
        ciphers,
        tickets=ticket_keys(tickets),
        timeout=None if session is unset or session.timeout is unset else session.timeout,
        cache_size=None if session is unset or session.cache_size is unset else session.cache_size,
        ticket_rotation=settings.tls_ticket_rotation,
    )
    if authorities:
        clients = tls.client_certificate
        recipe = replace(
            recipe,
            verify=2 if clients.required else 1,
            client_ca=b"".join(bundle.chain_pem for bundle in authorities),
            client_ca_label="client_certificate.ca " + ", ".join(map(repr, clients.names)),
        )
    certificates = tuple(
        Certificate(name, b.names, b.chain_pem, b.key_pem, until=b.not_after, stored=True)
        for name, b in zip(tls.names, bundles, strict=True)
    )
    return ListenerTls(recipe, certificates)


def ticket_keys(tickets: bool | str | list[str]) -> bool | tuple[bytes, ...]:
    """Unit's ``tickets``: a boolean as it is; one key or a list of them (base64, checked by
    `corral.config.listener_tls`) as raw keys, the one that encrypts first: Unit encrypts
    with the last of a list (a new key is appended), and decrypts with every one."""
    if isinstance(tickets, bool):
        return tickets
    keys = [tickets] if isinstance(tickets, str) else tickets
    return tuple(base64.b64decode(key) for key in reversed(keys))


def _read(name: str, path: str) -> bytes:
    """A file a setting ``name`` names, read now (the master's user reads it)."""
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise TlsError(f"{name} {path}: {exc.strerror or exc}") from None


def _leaf_facts(chain: bytes) -> tuple[tuple[str, ...], datetime.datetime | None]:
    """The DNS names (else the subject) and the expiry of the first certificate in ``chain``
    (PEM); ((), None) when it cannot be read (the context's loading says why)."""
    from cryptography import x509  # the master's only: a worker never reads a certificate

    try:
        leaf = x509.load_pem_x509_certificate(chain)
    except ValueError:
        return (), None
    try:
        extension = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        names = tuple(extension.value.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        names = ()
    return names or (leaf.subject.rfc4514_string(),), leaf.not_valid_after_utc

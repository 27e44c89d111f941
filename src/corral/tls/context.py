"""The TLS server contexts of the listeners (`ssl.SSLContext`), made in the master: from the
settings' files for every HTTP listener (`listener_context`), or from the certificate store's
bundles for a listener whose ``tls`` names them (`store_context`: one context per
certificate, SNI choosing among them).

The master reads the certificate and key (as the user it started as: the workers' user never
needs to read the key) and makes the context before it forks the workers, which inherit it
with the rest of its memory. A reload (HUP) reads the files again: the same bytes and the
same settings give the same context object, so the pools are carried over as they were; a
renewed certificate gives a new context, and the pools restart gracefully with it. What
cannot be served (a file that cannot be read, a key that is not the certificate's, a cipher
list OpenSSL refuses) is a `TlsError`, one line naming the setting and the reason: at start
the server stops with it, in a reload the running workers keep serving the old context.

Every context offers TLS 1.2 and 1.3 (``tls_min_version`` raises the floor), never 1.0 or
1.1, no renegotiation and no compression, ``http/1.1`` by ALPN (``h2`` comes with HTTP/2),
and asks the client for a certificate only with ``cert_reqs``.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import ssl
from collections.abc import Sequence
from typing import Any

import msgspec

from corral.config.listener_tls import stored_names
from corral.observe.errorlog import LOGGER_NAME

__all__ = ["TlsError", "expiries", "listener_context", "store_context", "watched_files"]

_MINIMUM = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY = {0: ssl.CERT_NONE, 1: ssl.CERT_OPTIONAL, 2: ssl.CERT_REQUIRED}
_ALPN = ["http/1.1"]


class TlsError(ValueError):
    """A TLS setting that cannot be served, in one line (a configuration error)."""


# the master's last settings' context, what it was made from and when its certificate
# expires (None: unread): a reload that changes nothing of it keeps it (the same object, so
# that the pools' listeners compare equal and carry over)
_made: tuple[tuple[Any, ...], ssl.SSLContext, datetime.datetime | None] | None = None


def watched_files(settings: Any) -> list[str]:
    """The TLS settings' files: the master watches them as touch-reload files, so that a
    certificate an ACME client renews (certbot writes new files) is served without a HUP."""
    return [path for path in (settings.certfile, settings.keyfile, settings.ca_certs) if path]


def listener_context(settings: Any) -> ssl.SSLContext | None:
    """The context of the HTTP listeners for the document's ``settings``; None without a
    ``certfile``. Raises `TlsError`."""
    global _made
    if settings.certfile is None:
        for name in ("keyfile", "ca_certs"):
            if getattr(settings, name) is not None:
                raise TlsError(f"{name} is set without certfile: give the certificate too")
        return None
    key = (
        _fingerprint("certfile", settings.certfile),
        _fingerprint("keyfile", settings.keyfile),
        settings.keyfile_password,
        _fingerprint("ca_certs", settings.ca_certs),
        settings.cert_reqs,
        settings.ciphers,
        settings.tls_min_version,
    )
    if _made is not None and _made[0] == key:
        return _made[1]
    context = _make(settings)
    line, until = _validity(settings.certfile)
    _made = (key, context, until)
    logging.getLogger(LOGGER_NAME).info("TLS: %s", line)
    return context


def expiries(doc: Any, certificates: Any) -> dict[str, datetime.datetime]:
    """When each certificate the document serves expires: the settings' ``certfile`` (by its
    path) and the store's that listeners name (by their names; ``certificates`` is the store,
    None without the control API)."""
    found: dict[str, datetime.datetime] = {}
    if doc.settings.certfile is not None and _made is not None and _made[2] is not None:
        found[doc.settings.certfile] = _made[2]
    for listener in doc.listeners.values() if certificates is not None else ():
        for name in stored_names(listener.tls):
            bundle = certificates.get(name)
            if bundle is not None:
                found[name] = bundle.not_after
    return found


def _validity(certfile: str) -> tuple[str, datetime.datetime | None]:
    """The served certificate (the file's first): one log line with its names and expiry,
    and that expiry (None when it cannot be read)."""
    from cryptography import x509  # the master's only: a worker never reads a certificate

    try:
        with open(certfile, "rb") as file:
            leaf = x509.load_pem_x509_certificate(file.read())
    except (OSError, ValueError) as exc:
        return f"certfile {certfile}: its expiry could not be read ({exc})", None
    until = leaf.not_valid_after_utc
    left = (until - datetime.datetime.now(datetime.UTC)).days
    try:
        names = leaf.extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        ).value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    named = ", ".join(names) or leaf.subject.rfc4514_string()
    line = f"certfile {certfile} ({named}) valid until {until:%Y-%m-%d %H:%M} UTC ({left} days)"
    return line, until


# the contexts of the listeners whose `tls` names certificates of the store, by what each was
# made from; those the last generation did not use are forgotten (`forget_others`)
_from_store: dict[tuple[Any, ...], ssl.SSLContext] = {}


def store_context(tls: Any, bundles: Sequence[Any], settings: Any) -> ssl.SSLContext:
    """The context of a listener whose ``tls`` (NGINX Unit's: a `corral.config.listener_tls.Tls`)
    names ``bundles`` of the certificate store (`corral.tls.bundle.Bundle`, in its order): the
    first one's, which SNI switches to another's when the name a client asks for is one of
    the other's (wildcards included) and not the first's. Raises `TlsError`."""
    session = tls.session
    tickets = True if session is msgspec.UNSET else session.tickets
    commands = {} if tls.conf_commands is msgspec.UNSET else dict(tls.conf_commands)
    key = (
        tuple(bundle.pem for bundle in bundles),
        tickets is not False,
        tuple(sorted(commands.items())),
        settings.tls_min_version,
        settings.ciphers,
    )
    context = _from_store.get(key)
    if context is None:
        contexts = [
            _bundle_context(bundle, tickets is not False, commands, settings) for bundle in bundles
        ]
        context = _from_store[key] = contexts[0]
        if len(contexts) > 1:
            names = [bundle.names for bundle in bundles]
            context.sni_callback = _sni(list(zip(names, contexts, strict=True)))
    return context


def forget_others(kept: Sequence[ssl.SSLContext]) -> None:
    """Forget the store's contexts but ``kept`` (a new generation's): a certificate that no
    listener names any more is not held in the master."""
    for key, context in list(_from_store.items()):
        if not any(context is other for other in kept):
            del _from_store[key]


def _bundle_context(
    bundle: Any, tickets: bool, commands: dict[str, str], settings: Any
) -> ssl.SSLContext:
    minimum = settings.tls_min_version
    ciphers = settings.ciphers
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
    context = _base(minimum, ciphers)
    if not tickets:
        context.options |= ssl.OP_NO_TICKET
    # the store holds the bundle in memory: OpenSSL reads it from a file that is no file
    fd = os.memfd_create("corral-certificate", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as file:
            file.write(bundle.chain_pem + b"\n" + bundle.key_pem)
        context.load_cert_chain(f"/proc/self/fd/{fd}")
    except ssl.SSLError as exc:
        raise TlsError(f"certificate {bundle.names[0]!r}: cannot be used ({exc.reason})") from None
    finally:
        os.close(fd)
    return context


def _sni(choices: list[tuple[Sequence[str], ssl.SSLContext]]) -> Any:
    """The SNI callback choosing among ``choices`` (each bundle's names with its context):
    the first whose names match, the default (the listener's first) when none does."""

    def pick(connection: Any, server_name: str | None, default: ssl.SSLContext) -> None:
        if not server_name:
            return None
        asked = server_name.lower()
        for names, context in choices:
            if any(_matches(name, asked) for name in names):
                if context is not default:
                    connection.context = context
                return None
        return None

    return pick


def _matches(name: str, asked: str) -> bool:
    """Whether certificate name ``name`` covers host ``asked``: equal, or a wildcard of its
    first label only (``*.example.com`` covers ``a.example.com``, not ``example.com``)."""
    name = name.lower()
    if name.startswith("*."):
        head, dot, rest = asked.partition(".")
        return bool(head) and bool(dot) and rest == name[2:]
    return name == asked


def _fingerprint(name: str, path: str | None) -> tuple[str, str] | None:
    """A file named by setting ``name``: its path and a digest of its bytes."""
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            return path, hashlib.sha256(file.read()).hexdigest()
    except OSError as exc:
        raise TlsError(f"{name} {path}: {exc.strerror or exc}") from None


def _base(minimum: str, ciphers: str | None) -> ssl.SSLContext:
    """A server context with what every one has, before its certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _MINIMUM[minimum]
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    context.set_alpn_protocols(_ALPN)
    if ciphers is not None:
        try:
            context.set_ciphers(ciphers)
        except ssl.SSLError:
            raise TlsError(f"ciphers {ciphers!r}: OpenSSL knows no such cipher") from None
    return context


def _make(settings: Any) -> ssl.SSLContext:
    context = _base(settings.tls_min_version, settings.ciphers)
    try:
        context.load_cert_chain(
            settings.certfile, settings.keyfile, password=_password(settings.keyfile_password)
        )
    except OSError as exc:
        if not isinstance(exc, ssl.SSLError):
            raise TlsError(f"certfile {settings.certfile}: {exc.strerror or exc}") from None
        raise TlsError(_chain_problem(settings, exc)) from None
    if settings.cert_reqs:
        if settings.ca_certs is None:
            raise TlsError(
                f"cert_reqs {settings.cert_reqs} asks for client certificates: give ca_certs, "
                "the authorities they are checked against"
            )
        try:
            context.load_verify_locations(settings.ca_certs)
        except ssl.SSLError as exc:
            raise TlsError(
                f"ca_certs {settings.ca_certs}: no certificate in it ({exc.reason})"
            ) from None
        context.verify_mode = _VERIFY[settings.cert_reqs]
    return context


def _password(password: str | None) -> Any:
    # a callable, so that an encrypted key without a password is an error rather than a
    # prompt on the master's terminal
    return lambda: password or ""


def _chain_problem(settings: Any, exc: ssl.SSLError) -> str:
    """What an `ssl.SSLError` of ``load_cert_chain`` means, in the settings' words."""
    reason = exc.reason or str(exc)
    key = settings.keyfile or settings.certfile
    if reason == "KEY_VALUES_MISMATCH":
        return f"keyfile {key}: the private key is not the certificate's ({settings.certfile})"
    if reason in ("BAD_DECRYPT", "BAD_PASSWORD_READ", "PROBLEMS_GETTING_PASSWORD"):
        which = "is wrong" if settings.keyfile_password else "is not given (keyfile_password)"
        return f"keyfile {key}: the key is encrypted and its password {which}"
    if not _has_certificate(settings.certfile):
        return f"certfile {settings.certfile}: no certificate in it (PEM)"
    if settings.keyfile is None:
        return (
            f"certfile {settings.certfile}: no private key in it (PEM; give the key in "
            "keyfile if it is a file of its own)"
        )
    return f"keyfile {key}: no private key in it (PEM)"


def _has_certificate(path: str) -> bool:
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError):
        return False
    return True

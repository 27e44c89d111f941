"""The TLS server context of the listeners: one `ssl.SSLContext`, made in the master.

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

import hashlib
import ssl
from typing import Any

__all__ = ["TlsError", "listener_context"]

_MINIMUM = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY = {0: ssl.CERT_NONE, 1: ssl.CERT_OPTIONAL, 2: ssl.CERT_REQUIRED}
_ALPN = ["http/1.1"]


class TlsError(ValueError):
    """A TLS setting that cannot be served, in one line (a configuration error)."""


# the master's last context and what it was made from: a reload that changes nothing of it
# keeps it (the same object, so that the pools' listeners compare equal and carry over)
_made: tuple[tuple[Any, ...], ssl.SSLContext] | None = None


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
    _made = (key, context)
    return context


def _fingerprint(name: str, path: str | None) -> tuple[str, str] | None:
    """A file named by setting ``name``: its path and a digest of its bytes."""
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            return path, hashlib.sha256(file.read()).hexdigest()
    except OSError as exc:
        raise TlsError(f"{name} {path}: {exc.strerror or exc}") from None


def _make(settings: Any) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _MINIMUM[settings.tls_min_version]
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    context.set_alpn_protocols(_ALPN)
    if settings.ciphers is not None:
        try:
            context.set_ciphers(settings.ciphers)
        except ssl.SSLError:
            raise TlsError(f"ciphers {settings.ciphers!r}: OpenSSL knows no such cipher") from None
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

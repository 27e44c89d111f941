"""The TLS server contexts (`ssl.SSLContext`) of the HTTPS listeners, made from what each
serves (`corral.tls.served.ListenerTls`).

A listener's connections are accepted with its *session context* (`session_context`), made
in the master before it forks the workers, which inherit it: its ticket keys and session
settings are the pool's (tls/tickets.py), so a session resumes on any worker. It is its first
certificate's context; with several, an SNI callback switches a handshake to the context of
the one whose names match what the client asked for (wildcards of one label included). A
*renewal* (`renew`) keeps the session context and makes the callback switch every new
handshake to the new certificates' contexts: OpenSSL takes a connection's certificate from
the context the callback chose, and its tickets and session cache from the one it was
accepted with, so sessions resumed before a renewal still resume after it. The running
workers renew their own copy (master/renewal.py sends them the PEM; they make the contexts
from memory), and the master renews its own, which the workers forked later inherit.

Contexts are made from bytes, never from a file a worker would have to read: OpenSSL reads
the PEM from a memfd (``/proc/self/fd/N``). Every context offers TLS 1.2 and 1.3 (the recipe
may raise the floor), never 1.0 or 1.1, no renegotiation and no compression, ``http/1.1`` by
ALPN (``h2`` comes with HTTP/2), and asks the client for a certificate only when its recipe
says so. What cannot be served (a key that is not the certificate's, a cipher list OpenSSL
refuses) is a `TlsError`, one line naming the setting and the reason: at start the server
stops with it, in a reload or a renewal the running workers keep serving the old context.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import ssl
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from corral.observe.errorlog import LOGGER_NAME
from corral.tls import session
from corral.tls.served import Certificate, ListenerTls, Recipe, TlsError

__all__ = [
    "TlsError",
    "certificate_contexts",
    "expiries",
    "forget_others",
    "renew",
    "session_context",
]

_MINIMUM = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY = {0: ssl.CERT_NONE, 1: ssl.CERT_OPTIONAL, 2: ssl.CERT_REQUIRED}
_ALPN = ["http/1.1"]

# the master's session contexts by what they serve: the same `ListenerTls` gives the same
# object, so that the pools' listeners compare equal and carry over; a renewed context is
# filed under what it serves since (`renew`); those no generation uses are forgotten
_made: dict[ListenerTls, ssl.SSLContext] = {}


def session_context(served: ListenerTls) -> ssl.SSLContext:
    """The context a listener's connections are accepted with (the master's; see the module
    doc). Raises `TlsError`."""
    context = _made.get(served)
    if context is not None:
        return context
    contexts = certificate_contexts(served)
    context = contexts[0]
    session.apply(context, served.recipe)
    if len(contexts) > 1:
        context.sni_callback = _sni(served.certificates, contexts)
    _made[served] = context
    for certificate in served.certificates:
        logging.getLogger(LOGGER_NAME).info("TLS: %s", certificate.describe())
    return context


def certificate_contexts(served: ListenerTls) -> list[ssl.SSLContext]:
    """A context for each certificate of ``served``, in its order. Raises `TlsError`."""
    return [_certificate_context(served.recipe, c) for c in served.certificates]


def renew(context: ssl.SSLContext, served: ListenerTls, contexts: Sequence[ssl.SSLContext]) -> None:
    """Serve ``served``'s certificates (``contexts``, from `certificate_contexts`) to every
    handshake ``context`` accepts from now on (see the module doc); the master files
    ``context`` under ``served``."""
    context.sni_callback = _sni(served.certificates, contexts)
    for key, made in list(_made.items()):
        if made is context:
            del _made[key]
    _made[served] = context


def forget_others(kept: Sequence[ssl.SSLContext]) -> None:
    """Forget the session contexts but ``kept`` (a new generation's): a certificate that no
    listener serves any more is not held in the master."""
    for key, context in list(_made.items()):
        if not any(context is other for other in kept):
            del _made[key]


def expiries(served: Iterable[ListenerTls]) -> dict[str, datetime.datetime]:
    """When each certificate of ``served`` expires, by its label (a store name, or the
    certfile path)."""
    return {
        certificate.label: certificate.until
        for listener in served
        for certificate in listener.certificates
        if certificate.until is not None
    }


def _sni(certificates: Sequence[Certificate], contexts: Sequence[ssl.SSLContext]) -> Any:
    """The SNI callback choosing among ``contexts`` (one per certificate): the first whose
    certificate's names match the name asked for, the first of all when none does (or no name
    was asked for); OpenSSL calls it for every handshake."""
    choices = [(c.names, context) for c, context in zip(certificates, contexts, strict=True)]
    default = contexts[0]

    def pick(connection: Any, server_name: str | None, accepted: ssl.SSLContext) -> None:
        chosen = default
        if server_name and len(choices) > 1:
            asked = server_name.lower()
            for names, context in choices:
                if any(_matches(name, asked) for name in names):
                    chosen = context
                    break
        if chosen is not accepted:
            connection.context = chosen
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


def _certificate_context(recipe: Recipe, certificate: Certificate) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _MINIMUM[recipe.minimum]
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    context.set_alpn_protocols(_ALPN)
    if recipe.ciphers is not None:
        try:
            context.set_ciphers(recipe.ciphers)
        except ssl.SSLError:
            raise TlsError(f"ciphers {recipe.ciphers!r}: OpenSSL knows no such cipher") from None
    if recipe.verify:
        assert recipe.client_ca is not None
        try:
            context.load_verify_locations(cadata=recipe.client_ca.decode("latin-1"))
        except ssl.SSLError as exc:
            raise TlsError(
                f"{recipe.client_ca_label}: no certificate in it ({exc.reason})"
            ) from None
        context.verify_mode = _VERIFY[recipe.verify]
    _load_chain(context, certificate)
    return context


def _load_chain(context: ssl.SSLContext, certificate: Certificate) -> None:
    """Load ``certificate``'s chain and key into ``context`` from memory (a memfd each)."""
    with _memory_file(certificate.chain) as chain, _memory_file(certificate.key) as key:
        if chain is None:
            raise TlsError(_chain_problem(certificate, ssl.SSLError("no certificate")))
        try:
            # a callable, so that an encrypted key without a password is an error rather
            # than a prompt on the master's terminal
            context.load_cert_chain(chain, key, password=lambda: certificate.password or "")
        except ssl.SSLError as exc:
            raise TlsError(_chain_problem(certificate, exc)) from None


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str | None]:
    """A path OpenSSL reads ``data`` from, a file in memory only; None for no data."""
    if not data:
        yield None
        return
    fd = os.memfd_create("corral-tls", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as file:
            file.write(data)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _chain_problem(certificate: Certificate, exc: ssl.SSLError) -> str:
    """What an `ssl.SSLError` of ``load_cert_chain`` means, in the words of where
    ``certificate`` came from."""
    reason = exc.reason or str(exc)
    if certificate.stored:
        return f"certificate {certificate.label!r}: cannot be used ({reason})"
    certfile = certificate.label
    key = certificate.keyfile or certfile
    if reason == "KEY_VALUES_MISMATCH":
        return f"keyfile {key}: the private key is not the certificate's ({certfile})"
    if reason in ("BAD_DECRYPT", "BAD_PASSWORD_READ", "PROBLEMS_GETTING_PASSWORD"):
        which = "is wrong" if certificate.password else "is not given (keyfile_password)"
        return f"keyfile {key}: the key is encrypted and its password {which}"
    if not _has_certificate(certificate.chain):
        return f"certfile {certfile}: no certificate in it (PEM)"
    if certificate.keyfile is None:
        return (
            f"certfile {certfile}: no private key in it (PEM; give the key in "
            "keyfile if it is a file of its own)"
        )
    return f"keyfile {key}: no private key in it (PEM)"


def _has_certificate(chain: bytes) -> bool:
    try:
        ssl.create_default_context(cadata=chain.decode("latin-1"))
    except (ssl.SSLError, ValueError):
        return False
    return True

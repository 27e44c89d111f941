"""What an application is told of a TLS connection: mod_ssl's ``SSL_*`` environ keys for WSGI
(the names uWSGI's and mod_wsgi's applications read: ``SSL_PROTOCOL``, ``SSL_CIPHER``,
``SSL_CLIENT_VERIFY``, ``SSL_CLIENT_S_DN``...) and the ASGI ``tls`` extension (the spec's
"TLS extension"). Made once per connection, on its first request (the handshake is over by
then), from the transport's `ssl.SSLObject`; nothing here runs for a plain connection.

A connection relayed to another application's worker (corral/server/relay.py) reaches it as a
plain socket: the worker that holds the session makes both sets of facts once (`relayed`), they
travel in the hand-off's header, and the receiving worker's adapters find them on the
connection's route (`wsgi_keys_of`, `asgi_extension_of`), as if its transport had them.

A client certificate is only there when the listener asks for one (``cert_reqs``, or a
listener's ``tls`` with client certificates); its names are written as RFC 4514 says
(``CN=alice,O=Example``: the most specific first), as mod_ssl writes them by default.
"""

from __future__ import annotations

import ssl
from typing import Any

__all__ = ["asgi_extension", "asgi_extension_of", "relayed", "wsgi_keys", "wsgi_keys_of"]

# the short names RFC 4514 (and OpenSSL) give the attributes Python's ssl spells out
_SHORT = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_VERSIONS = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}
# each cipher suite's IANA number by OpenSSL's name, from this OpenSSL's own list
_SUITES: dict[str, int] = {}


def wsgi_keys(tls: ssl.SSLObject) -> dict[str, str]:
    """mod_ssl's environ keys of the connection ``tls``."""
    cipher = tls.cipher()
    keys = {
        "SSL_PROTOCOL": tls.version() or "",
        "SSL_CIPHER": cipher[0] if cipher else "",
        "SSL_SESSION_RESUMED": "Resumed" if tls.session_reused else "Initial",
    }
    der = tls.getpeercert(binary_form=True)
    if not der:
        keys["SSL_CLIENT_VERIFY"] = "NONE"
        return keys
    peer = tls.getpeercert()  # decoded only when the certificate was verified
    keys["SSL_CLIENT_VERIFY"] = "SUCCESS" if peer else "GENERIC"
    keys["SSL_CLIENT_CERT"] = ssl.DER_cert_to_PEM_cert(der)
    if peer:
        keys["SSL_CLIENT_S_DN"] = distinguished_name(peer.get("subject", ()))
        keys["SSL_CLIENT_I_DN"] = distinguished_name(peer.get("issuer", ()))
        keys["SSL_CLIENT_M_SERIAL"] = str(peer.get("serialNumber", ""))
        keys["SSL_CLIENT_V_START"] = str(peer.get("notBefore", ""))
        keys["SSL_CLIENT_V_END"] = str(peer.get("notAfter", ""))
    return keys


def asgi_extension(tls: ssl.SSLObject) -> dict[str, Any]:
    """The ASGI ``tls`` extension of the connection ``tls``."""
    der = tls.getpeercert(binary_form=True)
    peer = tls.getpeercert() if der else None
    cipher = tls.cipher()
    return {
        "server_cert": None,  # the spec allows None: Python's ssl does not give it back
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
        "client_cert_name": distinguished_name(peer.get("subject", ())) if peer else None,
        "client_cert_error": None,
        "tls_version": _VERSIONS.get(tls.version() or ""),
        "cipher_suite": _suite(cipher[0]) if cipher else None,
    }


def relayed(tls: ssl.SSLObject) -> dict[str, Any]:
    """Both sets of facts of the connection ``tls``, for a hand-off's header (JSON)."""
    return {"wsgi": wsgi_keys(tls), "asgi": asgi_extension(tls)}


def wsgi_keys_of(conn: Any) -> dict[str, str]:
    """mod_ssl's environ keys of the TLS connection ``conn`` serves: its transport's, or those
    a relay's hand-off brought (empty when neither has any)."""
    tls = conn.transport.get_extra_info("ssl_object")
    if tls is not None:
        return wsgi_keys(tls)
    given = _given(conn)
    return dict(given["wsgi"]) if given is not None else {}


def asgi_extension_of(conn: Any) -> dict[str, Any] | None:
    """The ASGI ``tls`` extension of the TLS connection ``conn`` serves, as `wsgi_keys_of`."""
    tls = conn.transport.get_extra_info("ssl_object")
    if tls is not None:
        return asgi_extension(tls)
    given = _given(conn)
    return dict(given["asgi"]) if given is not None else None


def _given(conn: Any) -> Any:
    route = conn.route
    return route.given_tls if route is not None else None


def distinguished_name(rdns: Any) -> str:
    """A name as ``getpeercert`` gives it (relative names, the least specific first), written
    as RFC 4514 says: the most specific first, ``,`` between relative names, ``+`` within one,
    and ``\\``-escaped specials."""
    parts = []
    for rdn in reversed(rdns):
        parts.append("+".join(f"{_SHORT.get(key, key)}={_escaped(value)}" for key, value in rdn))
    return ",".join(parts)


def _escaped(value: str) -> str:
    out = "".join(f"\\{c}" if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _suite(name: str) -> int | None:
    if not _SUITES:  # every suite this OpenSSL knows, once per process
        every = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        every.set_ciphers("ALL:@SECLEVEL=0")
        for cipher in every.get_ciphers():
            _SUITES[cipher["name"]] = cipher["id"] & 0xFFFF
    return _SUITES.get(name)

"""What Python's `ssl` cannot set on a server context and OpenSSL can: the session timeout,
the server's session cache, and the session ticket keys (a callback). Reached with ctypes,
on the very library the `ssl` module runs.

Why not a compiled helper: an extension linked against OpenSSL at build time may meet another
OpenSSL at run time (a Python with its own, statically linked: python-build-standalone's,
uv's), and a context of one library handed to the other's functions is memory corruption.
Here the functions are looked up in the libssl and libcrypto the process has mapped once
``_ssl`` is imported (/proc/self/maps), so they are the ones that made the context; and the
pure-Python core gets them as the compiled one does.

Why it is safe enough: the ``SSL_CTX`` pointer is read where CPython keeps it in its
``PySSLContext`` (the first field after the object's header, unchanged from 3.7 to 3.14) and
checked before anything is set: OpenSSL's options, verify mode and version floor of that
pointer must be what the `ssl` module says of the same context, on a probe context first (with
unusual values) and then on each context. When anything does not hold (another OpenSSL than
3.x, a Python that keeps it elsewhere, a statically linked one), `OPENSSL` is None and
`UNAVAILABLE` says why in one line: corral then serves with OpenSSL's session defaults, its
ticket keys made at start and not rotated, and refuses what a listener asks of these.
"""

from __future__ import annotations

import ctypes
import os
import ssl
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["OPENSSL", "UNAVAILABLE", "OpenSsl", "Param", "TicketCallback"]

# ssl.h
_SET_SESS_CACHE_SIZE = 42
_SET_SESS_CACHE_MODE = 44
_GET_MIN_PROTO_VERSION = 130
_SESS_CACHE_OFF = 0x0000
_SESS_CACHE_SERVER = 0x0002
# SSL_VERIFY_PEER, and with it SSL_VERIFY_FAIL_IF_NO_PEER_CERT: what each of ssl's modes sets
_VERIFY_PEER_FLAGS = 0x01 | 0x02
_VERIFY_MODES = {ssl.CERT_NONE: 0, ssl.CERT_OPTIONAL: 0x01, ssl.CERT_REQUIRED: 0x01 | 0x02}
# core.h, params.h
PARAM_UTF8_STRING = 4
PARAM_OCTET_STRING = 5
_UNMODIFIED = ctypes.c_size_t(-1).value

_void = ctypes.c_void_p
# int (*)(SSL *, unsigned char *name, unsigned char *iv, EVP_CIPHER_CTX *, EVP_MAC_CTX *, int)
TicketCallback = ctypes.CFUNCTYPE(ctypes.c_int, _void, _void, _void, _void, _void, ctypes.c_int)


class Param(ctypes.Structure):
    """OpenSSL 3's ``OSSL_PARAM``."""

    _fields_ = [
        ("key", ctypes.c_char_p),
        ("data_type", ctypes.c_uint),
        ("data", _void),
        ("data_size", ctypes.c_size_t),
        ("return_size", ctypes.c_size_t),
    ]


class OpenSsl:
    """The functions, bound to the libraries the `ssl` module uses."""

    def __init__(self, libssl: ctypes.CDLL, libcrypto: ctypes.CDLL) -> None:
        self.ctrl = _bind(
            libssl.SSL_CTX_ctrl, ctypes.c_long, _void, ctypes.c_int, ctypes.c_long, _void
        )
        self.get_options = _bind(libssl.SSL_CTX_get_options, ctypes.c_uint64, _void)
        self.get_verify_mode = _bind(libssl.SSL_CTX_get_verify_mode, ctypes.c_int, _void)
        self.set_timeout = _bind(libssl.SSL_CTX_set_timeout, ctypes.c_long, _void, ctypes.c_long)
        self.get_timeout = _bind(libssl.SSL_CTX_get_timeout, ctypes.c_long, _void)
        self.set_ticket_callback = _bind(
            libssl.SSL_CTX_set_tlsext_ticket_key_evp_cb, ctypes.c_int, _void, TicketCallback
        )
        # what a ticket key callback calls (tls/tickets.py)
        self.rand_bytes = _bind(libcrypto.RAND_bytes, ctypes.c_int, _void, ctypes.c_int)
        self.aes_128_cbc = _bind(libcrypto.EVP_aes_128_cbc, _void)()
        self.aes_256_cbc = _bind(libcrypto.EVP_aes_256_cbc, _void)()
        init = (ctypes.c_int, _void, _void, _void, ctypes.c_char_p, _void)
        self.encrypt_init = _bind(libcrypto.EVP_EncryptInit_ex, *init)
        self.decrypt_init = _bind(libcrypto.EVP_DecryptInit_ex, *init)
        self.mac_set_params = _bind(libcrypto.EVP_MAC_CTX_set_params, ctypes.c_int, _void, _void)

    def pointer(self, context: ssl.SSLContext) -> int:
        """``context``'s ``SSL_CTX *``, checked; ValueError when it cannot be trusted."""
        address = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
        if not address or address % ctypes.alignment(ctypes.c_void_p):
            raise ValueError("the context's SSL_CTX is not where CPython keeps it")
        seen = (
            self.get_options(address),
            self.get_verify_mode(address) & _VERIFY_PEER_FLAGS,
            self.ctrl(address, _GET_MIN_PROTO_VERSION, 0, None),
        )
        verify = _VERIFY_MODES[context.verify_mode]
        told = (int(context.options), verify, int(context.minimum_version))
        if seen != told:
            raise ValueError("the context's SSL_CTX does not say what the ssl module says")
        return address

    def session_cache(self, context: ssl.SSLContext, size: int) -> None:
        """The server's session cache holds ``size`` sessions; 0: none is kept."""
        pointer = self.pointer(context)
        if size == 0:
            self.ctrl(pointer, _SET_SESS_CACHE_MODE, _SESS_CACHE_OFF, None)
        else:
            self.ctrl(pointer, _SET_SESS_CACHE_MODE, _SESS_CACHE_SERVER, None)
            self.ctrl(pointer, _SET_SESS_CACHE_SIZE, size, None)

    def session_timeout(self, context: ssl.SSLContext, seconds: int) -> None:
        """A session (and a ticket: its lifetime hint) is resumed for ``seconds`` at most."""
        self.set_timeout(self.pointer(context), seconds)

    def ticket_keys(self, context: ssl.SSLContext, callback: Any) -> None:
        """``callback`` (a `TicketCallback`) encrypts and decrypts ``context``'s session
        tickets; it is kept with the context, which OpenSSL calls it for."""
        context._corral_ticket_callback = callback  # type: ignore[attr-defined]
        self.set_ticket_callback(self.pointer(context), callback)


def _bind(function: Any, result: Any, *arguments: Any) -> Callable[..., Any]:
    function.restype = result
    function.argtypes = list(arguments)
    return function


def _mapped(prefix: str) -> str | None:
    """The path of the library whose file name starts with ``prefix`` in this process."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)  # address, mode, offset, device, inode, path
                if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith(prefix):
                    return fields[5].strip()
    except OSError:
        return None
    return None


def _load() -> tuple[OpenSsl | None, str | None]:
    if sys.implementation.name != "cpython":
        return None, f"{sys.implementation.name} keeps its contexts otherwise"
    if ssl.OPENSSL_VERSION_INFO < (3,):
        return None, f"{ssl.OPENSSL_VERSION} is older than OpenSSL 3"
    libssl, libcrypto = _mapped("libssl.so"), _mapped("libcrypto.so")
    if libssl is None or libcrypto is None:
        return None, "the ssl module's OpenSSL is not a shared library this process maps"
    try:
        found = OpenSsl(ctypes.CDLL(libssl), ctypes.CDLL(libcrypto))
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        probe.minimum_version = ssl.TLSVersion.TLSv1_3
        probe.options |= ssl.OP_NO_TICKET | ssl.OP_NO_RENEGOTIATION
        for mode in (ssl.CERT_OPTIONAL, ssl.CERT_REQUIRED):
            probe.verify_mode = mode
            found.pointer(probe)
    except (OSError, AttributeError, ValueError) as exc:
        return None, f"{libssl}: {exc}"
    return found, None


OPENSSL, UNAVAILABLE = _load()

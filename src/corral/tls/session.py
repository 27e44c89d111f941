"""Session resumption on a listener's session context: ticket keys shared by the pool's
workers and rotated by the master, the server's session cache and the sessions' timeout
(NGINX Unit's ``session``: ``tickets``, ``cache_size``, ``timeout``).

A ticket is the session, encrypted with a key of the server's, that the client hands back to
resume it: any worker that has the key resumes it. OpenSSL's own key is random per context:
the workers forked after the master made the context share it, and nothing ever changes it,
so a key read from one worker's memory would decrypt every ticket until a restart. corral's
(with OpenSSL reachable: tls/openssl.py) live in a *key ring* in memory the master maps before
it forks (an anonymous shared mapping: the workers read what the master writes later), read
by a ticket key callback that encrypts with the current key and decrypts with it or the
previous one (a ticket of the previous key is renewed). Every ``tls_ticket_rotation`` seconds
(12 hours, as Caddy's; nginx's rotate with its session timeout) the master's tick writes a
new key (`rotate_due`): the current one becomes the previous, the previous is forgotten. A
ticket so resumes for one to two periods, and never past its session's timeout.

Unit's keys (``tickets``: one base64 key, or a list whose last encrypts) are used as they are
and never rotated: the operator rotates them by appending a key. ``tickets: false`` issues no
ticket. ``cache_size`` is the server's session cache (0: none; OpenSSL's 20,480 otherwise),
per worker (TLS 1.2 session IDs, and TLS 1.3 sessions without tickets, resume on the worker
that made them); ``timeout`` is a session's life in seconds (OpenSSL's 2 hours otherwise).
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import ssl
import struct
import time
import weakref
from typing import Any

from corral.observe.errorlog import LOGGER_NAME
from corral.tls.openssl import (
    OPENSSL,
    PARAM_OCTET_STRING,
    PARAM_UTF8_STRING,
    UNAVAILABLE,
    OpenSsl,
    Param,
    TicketCallback,
)
from corral.tls.served import Recipe, TlsError

__all__ = ["KEY_SIZE", "KeyRing", "apply", "ring_of", "rotate_due"]

KEY_SIZE = 80  # a key of corral's: its name (16 bytes), HMAC key (32), AES-256 key (32)
_SLOTS = 3  # the current key, the previous, and the next one written before it serves
_INDEX = struct.Struct("<Q")  # the ring's count of keys made so far, less one
_NAME = 16
_UNMODIFIED = ctypes.c_size_t(-1).value

# each session context's ring (the master's rotate them; a worker's are copies it reads)
_rings: weakref.WeakKeyDictionary[ssl.SSLContext, KeyRing] = weakref.WeakKeyDictionary()
_said_unavailable = False


def apply(context: ssl.SSLContext, recipe: Recipe) -> None:
    """Give ``context`` (a session context, the master's, before the fork) ``recipe``'s
    tickets, cache and timeout. Raises `TlsError` for what cannot be applied."""
    if recipe.tickets is False:
        context.options |= ssl.OP_NO_TICKET
    if OPENSSL is None:
        asked = [
            what
            for what, value in (
                ("tickets keys", not isinstance(recipe.tickets, bool)),
                ("cache_size", recipe.cache_size is not None),
                ("timeout", recipe.timeout is not None),
            )
            if value
        ]
        if asked:
            raise TlsError(f"session {' and '.join(asked)}: cannot be set here ({UNAVAILABLE})")
        _say_unavailable()
        return
    try:
        if recipe.cache_size is not None:
            OPENSSL.session_cache(context, recipe.cache_size)
        if recipe.timeout is not None:
            OPENSSL.session_timeout(context, recipe.timeout)
        if recipe.tickets is not False:
            ring = KeyRing(recipe.ticket_rotation) if recipe.tickets is True else None
            given = () if recipe.tickets is True else recipe.tickets
            OPENSSL.ticket_keys(context, _callback(OPENSSL, ring, given))
            if ring is not None:
                _rings[context] = ring
    except ValueError as exc:  # the pointer check failed on this context: OpenSSL's own
        raise TlsError(f"session: cannot be set here ({exc})") from None


def rotate_due(now: float | None = None) -> None:
    """The master's tick: a new key in every ring whose period is over."""
    moment = time.monotonic() if now is None else now
    rotated = [ring for ring in list(_rings.values()) if ring.rotate_if_due(moment)]
    if rotated:
        logging.getLogger(LOGGER_NAME).info(
            "TLS: new session ticket keys (%d listener context(s); the previous ones still "
            "decrypt, every %gs)",
            len(rotated),
            rotated[0].period,
        )


def ring_of(context: ssl.SSLContext) -> KeyRing | None:
    """The key ring of a session context (None: its tickets are not rotated)."""
    return _rings.get(context)


class KeyRing:
    """One session context's keys, in memory shared with the workers forked after it was
    made: the count of keys made (8 bytes), then `_SLOTS` keys, key ``n`` in slot ``n % 3``.
    The master writes the next key in the slot nobody reads (the one before the previous),
    then moves the count: a worker reads the count, then the current and previous slots."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.memory = mmap.mmap(-1, _INDEX.size + _SLOTS * KEY_SIZE)  # MAP_SHARED
        self._write(0, os.urandom(KEY_SIZE))
        self.rotated_at = time.monotonic()  # the master's
        self._seen: tuple[int, list[_Key]] | None = None  # a process's keys, by the count

    def keys(self, openssl: OpenSsl) -> list[_Key]:
        """The current key, then the previous one (when there is one)."""
        (count,) = _INDEX.unpack_from(self.memory, 0)
        seen = self._seen
        if seen is not None and seen[0] == count:
            return seen[1]
        found = [_Key(self._slot(count), openssl)]
        if count:
            found.append(_Key(self._slot(count - 1), openssl))
        self._seen = (count, found)
        return found

    def rotate_if_due(self, now: float) -> bool:
        if now - self.rotated_at < self.period:
            return False
        (count,) = _INDEX.unpack_from(self.memory, 0)
        self._write(count + 1, os.urandom(KEY_SIZE))
        self.rotated_at = now
        return True

    def _slot(self, count: int) -> bytes:
        start = _INDEX.size + (count % _SLOTS) * KEY_SIZE
        return self.memory[start : start + KEY_SIZE]

    def _write(self, count: int, key: bytes) -> None:
        start = _INDEX.size + (count % _SLOTS) * KEY_SIZE
        self.memory[start : start + KEY_SIZE] = key
        _INDEX.pack_into(self.memory, 0, count)


class _Key:
    """One key as the callback uses it: Unit's layouts, 48 bytes (name, AES-128 key, HMAC
    key of 16) or 80 (name, HMAC key of 32, AES-256 key)."""

    __slots__ = ("_digest", "_hmac", "aes", "cipher", "name", "params", "pointer")

    def __init__(self, raw: bytes, openssl: OpenSsl) -> None:
        self.name = raw[:_NAME]
        if len(raw) == 48:
            self.aes, hmac, self.cipher = raw[16:32], raw[32:48], openssl.aes_128_cbc
        else:
            hmac, self.aes, self.cipher = raw[16:48], raw[48:80], openssl.aes_256_cbc
        self._hmac = ctypes.create_string_buffer(hmac, len(hmac))
        self._digest = ctypes.create_string_buffer(b"SHA256")
        self.params = (Param * 3)(
            Param(b"key", PARAM_OCTET_STRING, ctypes.addressof(self._hmac), len(hmac), _UNMODIFIED),
            Param(b"digest", PARAM_UTF8_STRING, ctypes.addressof(self._digest), 6, _UNMODIFIED),
            Param(None, 0, None, 0, 0),
        )
        self.pointer = ctypes.addressof(self.params)


def _callback(openssl: OpenSsl, ring: KeyRing | None, given: tuple[bytes, ...]) -> Any:
    """The ticket key callback of a context: the ring's keys, or Unit's ``given`` ones."""
    fixed = [_Key(key, openssl) for key in given]
    memmove, string_at = ctypes.memmove, ctypes.string_at

    def keys() -> list[_Key]:
        return fixed if ring is None else ring.keys(openssl)

    def callback(_ssl: int, name: int, iv: int, cipher: int, mac: int, encrypt: int) -> int:
        try:
            ours = keys()
            if encrypt == 1:  # a new ticket: the current key
                key = ours[0]
                if openssl.rand_bytes(iv, 16) != 1:
                    return -1
                memmove(name, key.name, _NAME)
                if openssl.encrypt_init(cipher, key.cipher, None, key.aes, iv) != 1:
                    return -1
                return 1 if openssl.mac_set_params(mac, key.pointer) == 1 else -1
            wanted = string_at(name, _NAME)
            place = next((n for n, key in enumerate(ours) if key.name == wanted), None)
            if place is None:
                return 0  # a key of another time or server: a full handshake
            key = ours[place]
            if openssl.decrypt_init(cipher, key.cipher, None, key.aes, iv) != 1:
                return -1
            if openssl.mac_set_params(mac, key.pointer) != 1:
                return -1
            return 1 if place == 0 else 2  # 2: resumed, and a new ticket of the current key
        except Exception:  # OpenSSL must get an answer: -1 fails the ticket
            return -1

    return TicketCallback(callback)


def _say_unavailable() -> None:
    global _said_unavailable
    if not _said_unavailable:
        _said_unavailable = True
        logging.getLogger(LOGGER_NAME).warning(
            "TLS: session ticket keys are OpenSSL's, made at start and never rotated (%s)",
            UNAVAILABLE,
        )

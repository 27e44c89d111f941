"""tls/session.py and tls/openssl.py on real OpenSSL handshakes in memory (no socket): the
ticket keys a context gets, shared by the contexts that share a key ring (a pool's workers),
rotated with the previous key still decrypting; Unit's own keys; what cannot be set."""

from __future__ import annotations

import base64
import os
import ssl
from typing import Any

import pytest
import trustme

from corral.tls import openssl, session
from corral.tls.served import Recipe, TlsError

CA = trustme.CA()
CERTIFICATE = CA.issue_cert("localhost")

pytestmark = pytest.mark.skipif(openssl.OPENSSL is None, reason=str(openssl.UNAVAILABLE))


def server(recipe: Recipe) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    CERTIFICATE.configure_cert(context)
    session.apply(context, recipe)
    return context


CLIENTS = {}
for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
    CLIENTS[version] = ssl.create_default_context()
    CA.configure_trust(CLIENTS[version])
    CLIENTS[version].maximum_version = version


def handshake(context: ssl.SSLContext, client: ssl.SSLContext, resume: Any = None) -> Any:
    """A whole handshake between ``context`` and ``client`` in memory: the client's
    SSLObject (its session, whether it was resumed)."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    back_in, back_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    theirs = context.wrap_bio(to_server, back_out, server_side=True)
    ours = client.wrap_bio(back_in, to_client, server_hostname="localhost", session=resume)
    done = set()
    for _ in range(10):
        for side, name in ((ours, "client"), (theirs, "server")):
            if name not in done:
                try:
                    side.do_handshake()
                    done.add(name)
                except ssl.SSLWantReadError:
                    pass
            to_server.write(to_client.read())
            back_in.write(back_out.read())
    theirs.write(b"x")  # (TLS 1.3: the tickets come after the handshake)
    back_in.write(back_out.read())
    assert ours.read(1) == b"x"
    return ours


@pytest.mark.parametrize("version", list(CLIENTS), ids=["1.2", "1.3"])
def test_a_ring_is_shared_and_rotated_with_the_previous_key_decrypting(version) -> None:
    client = CLIENTS[version]
    one = server(Recipe(ticket_rotation=10))
    keys = session.ring_of(one)
    assert keys is not None
    first = handshake(one, client).session
    assert handshake(one, client, first).session_reused
    keys.rotate_if_due(keys.rotated_at + 5)  # not due
    assert handshake(one, client, first).session_reused
    assert keys.rotate_if_due(keys.rotated_at + 10)
    assert handshake(one, client, first).session_reused  # the previous key
    second = handshake(one, client).session
    assert keys.rotate_if_due(keys.rotated_at + 10)
    assert not handshake(one, client, first).session_reused  # two keys ago
    assert handshake(one, client, second).session_reused


def test_contexts_without_a_shared_ring_do_not_resume_each_others() -> None:
    client = CLIENTS[ssl.TLSVersion.TLSv1_3]
    first = handshake(server(Recipe()), client).session
    assert not handshake(server(Recipe()), client, first).session_reused


@pytest.mark.parametrize("size", [48, 80])
def test_unit_keys_the_first_encrypting(size: int) -> None:
    client = CLIENTS[ssl.TLSVersion.TLSv1_3]
    old, new = os.urandom(size), os.urandom(size)
    first = handshake(server(Recipe(tickets=(old,))), client).session
    # another context (another worker, a later generation) with the same key resumes it
    assert handshake(server(Recipe(tickets=(old,))), client, first).session_reused
    assert handshake(server(Recipe(tickets=(new, old))), client, first).session_reused
    assert not handshake(server(Recipe(tickets=(new,))), client, first).session_reused


def test_the_timeout_and_the_cache() -> None:
    context = server(Recipe(timeout=30, cache_size=0, tickets=False))
    pointer = openssl.OPENSSL.pointer(context)
    assert openssl.OPENSSL.get_timeout(pointer) == 30
    assert context.session_stats()["number"] == 0
    client = CLIENTS[ssl.TLSVersion.TLSv1_2]
    first = handshake(context, client).session
    assert not first.has_ticket and not handshake(context, client, first).session_reused


def test_without_openssl_what_a_listener_asks_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(session, "OPENSSL", None)
    monkeypatch.setattr(session, "UNAVAILABLE", "a statically linked OpenSSL")
    server(Recipe())  # tickets as OpenSSL makes them: served, with a warning
    with pytest.raises(TlsError, match=r"^session timeout: cannot be set here \(a statically"):
        server(Recipe(timeout=5))
    key = base64.b64decode(base64.b64encode(os.urandom(80)))
    with pytest.raises(TlsError, match="session tickets keys and cache_size"):
        server(Recipe(tickets=(key,), cache_size=1))

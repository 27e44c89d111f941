"""nginx's ``allow`` and ``deny`` (issue 34, point 4): ``--allow-from``, ``--deny-from`` and
``--deny-status``, written as NGINX Unit's route ``source`` match in front of the application,
through real corral processes and clients connecting from several loopback addresses."""

from __future__ import annotations

import socket

import pytest

from tests.integration.server import Server, read_response

pytestmark = pytest.mark.usefixtures("each_core")


def status_from(server: Server, source: str, headers: str = "") -> int:
    """A request's status, sent from the loopback address ``source``."""
    with socket.socket() as sock:
        sock.settimeout(10)
        sock.bind((source, 0))
        sock.connect((server.host, server.port))
        sock.sendall(f"GET / HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        return read_response(sock)[0]


def test_only_the_allowed_clients_are_served() -> None:
    with Server("basic:application", "--allow-from", "127.0.0.2", "--allow-from", "::1") as server:
        assert status_from(server, "127.0.0.2") == 200
        assert status_from(server, "127.0.0.1") == 403


def test_denied_clients_get_the_deny_status() -> None:
    argv = ["--deny-from", "127.0.0.3/32", "--deny-status", "404"]
    with Server("basic:application", *argv) as server:
        assert status_from(server, "127.0.0.3") == 404
        assert status_from(server, "127.0.0.1") == 200


def test_a_trusted_proxys_client_is_the_one_denied() -> None:
    # the default forwarded_allow_ips trusts 127.0.0.1: X-Forwarded-For names the client
    with Server("basic:application", "--deny-from", "203.0.113.0/24") as server:
        forwarded = "X-Forwarded-For: 203.0.113.7\r\n"
        assert status_from(server, "127.0.0.1", forwarded) == 403
        assert status_from(server, "127.0.0.1", "X-Forwarded-For: 198.51.100.1\r\n") == 200

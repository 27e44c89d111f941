"""nginx's ``allow`` and ``deny`` (issue 34, point 4): ``--allow-from``, ``--deny-from`` and
``--deny-status``, written as NGINX Unit's route ``source`` match in front of the application,
through real corral processes and clients connecting from several loopback addresses."""

from __future__ import annotations

import json
import socket

import pytest

from tests.integration.server import Server, read_response
from tests.integration.test_proxy_protocol import v1, v2

pytestmark = pytest.mark.usefixtures("each_core")


def status_from(server: Server, source: str, headers: str = "", header: bytes = b"") -> int:
    """A request's status, sent from the loopback address ``source`` (after a PROXY
    ``header``, if given)."""
    return statuses_from(server, source, 1, headers, header)[0]


def statuses_from(
    server: Server, source: str, count: int, headers: str = "", header: bytes = b""
) -> list[int]:
    """The statuses of ``count`` requests on one keep-alive connection from ``source``."""
    with socket.socket() as sock:
        sock.settimeout(10)
        sock.bind((source, 0))
        sock.connect((server.host, server.port))
        sock.sendall(header)
        found = []
        for _ in range(count):
            sock.sendall(f"GET / HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
            found.append(read_response(sock)[0])
        return found


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


def test_a_refused_client_is_refused_on_every_request_of_its_connection() -> None:
    # the gate is asked once per connection (filters/gate.py): what it decided holds for each
    # request that follows, the connection kept open as the route's `return` kept it
    with Server("basic:application", "--allow-from", "127.0.0.2") as server:
        assert statuses_from(server, "127.0.0.1", 5) == [403] * 5
        assert statuses_from(server, "127.0.0.2", 5) == [200] * 5


def test_the_client_a_proxy_header_names_is_the_one_judged() -> None:
    argv = ["--proxy-protocol", "--deny-from", "203.0.113.0/24"]
    with Server("basic:application", *argv) as server:
        assert status_from(server, "127.0.0.1", header=v1("203.0.113.7", 5555)) == 403
        assert status_from(server, "127.0.0.1", header=v2("198.51.100.9", 4444)) == 200
        # LOCAL names no client: the socket's peer is judged, on each request
        local = v2("203.0.113.7", 1, command=0)
        assert status_from(server, "127.0.0.1", header=local) == 200
    with Server("basic:application", "--proxy-protocol", "--allow-from", "10.0.0.0/8") as server:
        assert status_from(server, "127.0.0.1", header=v2("203.0.113.7", 1, command=0)) == 403
        assert status_from(server, "127.0.0.1", header=v1("10.1.2.3", 5555)) == 200


@pytest.mark.parametrize("named", [False, True], ids=["routes", "routes-NAME"])
def test_a_document_writes_the_same_routes(tmp_path, named: bool) -> None:
    steps = [
        {"match": {"source": ["127.0.0.3", "127.0.0.4"]}, "action": {"return": 451}},
        {"match": {"source": "!127.0.0.0/30"}, "action": {"return": 403}},
        {"action": {"pass": "applications/shop"}},
    ]
    document = {
        "listeners": {"127.0.0.1:0": {"pass": "routes/gate" if named else "routes"}},
        "routes": {"gate": steps} if named else steps,
        "applications": {"shop": {"module": "basic", "callable": "application"}},
    }
    path = tmp_path / "site.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server:
        assert status_from(server, "127.0.0.2") == 200
        assert status_from(server, "127.0.0.3") == 451
        assert status_from(server, "127.0.0.5") == 403


def test_a_proxys_connection_is_judged_by_each_requests_client() -> None:
    # one keep-alive connection of a trusted proxy carries several clients' requests: each
    # judged by its own (the last client's answer is kept, so the alternation is the test)
    with Server("basic:application", "--deny-from", "203.0.113.0/24") as server:
        with socket.socket() as sock:
            sock.settimeout(10)
            sock.connect((server.host, server.port))
            found = []
            for client in ["203.0.113.7", "198.51.100.1", "198.51.100.1", "203.0.113.9", ""]:
                forwarded = f"X-Forwarded-For: {client}\r\n" if client else ""
                sock.sendall(f"GET / HTTP/1.1\r\nHost: x\r\n{forwarded}\r\n".encode())
                found.append(read_response(sock)[0])
        assert found == [403, 200, 200, 403, 200]  # the last: the proxy's own address

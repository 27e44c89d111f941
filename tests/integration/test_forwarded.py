"""NGINX Unit's listener `forwarded` and `settings.http.discard_unsafe_fields`, through real
servers started from Unit configuration files.

The client's own address decides trust: the tests connect from 127.0.0.1 (in `source`) or
bind their socket to another loopback address first (127.0.0.5, not in it), so an untrusted
peer is a real one. The expected values follow Unit's own rules (see corral/filters/forwarded.py).
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from tests.integration.server import Server, read_response, wait_for

TRUSTED = "127.0.0.1"
UNTRUSTED = "127.0.0.5"  # loopback too, outside every `source` below


def write_config(directory: Path, listeners: dict, **top: object) -> Path:
    config = {
        "listeners": listeners,
        "applications": {
            "a": {"type": "python", "module": "forwarded_apps"},
            "b": {"type": "python", "module": "forwarded_apps", "callable": "app_b"},
        },
        **top,
    }
    if not any("routes" in str(listener["pass"]) for listener in listeners.values()):
        del config["applications"]["b"]
    path = directory / "unit.json"
    path.write_text(json.dumps(config))
    return path


def ports(server: Server) -> dict[str, int]:
    """Each listener's bound port, by the host it was configured with."""
    found = re.findall(r"listening on http://([0-9.]+):(\d+)", server.stderr)
    return {host: int(port) for host, port in found}


def request(
    port: int,
    headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
    *,
    source: str = TRUSTED,
    host: str = "127.0.0.1",
    path: str = "/",
    sock: socket.socket | None = None,
) -> tuple[int, dict[str, str], dict]:
    """One GET with these header fields, from ``source``; the answer and its JSON."""
    own = sock is None
    if sock is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.bind((source, 0))
        sock.connect((host, port))
    try:
        lines = [f"GET {path} HTTP/1.1", "Host: example.test"]
        lines += [f"{name}: {value}" for name, value in headers]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        status, response_headers, body = read_response(sock)
    finally:
        if own:
            sock.close()
    return status, response_headers, json.loads(body) if body.startswith(b"{") else {}


def environ(port: int, *headers: tuple[str, str], source: str = TRUSTED) -> dict:
    status, _, answer = request(port, list(headers), source=source)
    assert status == 200
    return answer


XFF = "X-Forwarded-For"
XFP = "X-Forwarded-Proto"


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """127.0.0.1 trusts a proxy at 127.0.0.1 (client_ip and protocol); 127.0.0.2 has no
    `forwarded`; the access log writes Unit's $remote_addr."""
    directory = tmp_path_factory.mktemp("forwarded")
    access = directory / "access.log"
    forwarded = {"client_ip": XFF, "protocol": XFP, "source": [TRUSTED]}
    path = write_config(
        directory,
        {
            "127.0.0.1:0": {"pass": "applications/a", "forwarded": forwarded},
            "127.0.0.2:0": {"pass": "applications/a"},
        },
        access_log={"path": str(access), "format": "$remote_addr $request_line $status"},
    )
    with Server(f"--config={path}", bind=None) as server:
        wait_for(lambda: len(ports(server)) == 2)
        yield server, ports(server), access


def test_a_trusted_proxy_names_the_client(proxied):
    _, port, _ = proxied
    port = port["127.0.0.1"]
    answer = environ(port, (XFF, "203.0.113.9"))
    assert answer["remote_addr"] == "203.0.113.9"
    assert answer["remote_port"] is None  # the client's port is unknown, not the proxy's
    assert answer["scheme"] == "http"
    # a list: the rightmost address (the one the trusted proxy added)
    assert environ(port, (XFF, "8.8.8.8, 84.23.23.11"))["remote_addr"] == "84.23.23.11"
    # several fields: the last one's rightmost
    answer = environ(port, (XFF, "8.8.8.8"), (XFF, "127.0.0.9, 10.0.1.1"))
    assert answer["remote_addr"] == "10.0.1.1"
    # an address with a port, IPv6 in brackets too
    answer = environ(port, (XFF, "198.51.100.7:4711"))
    assert (answer["remote_addr"], answer["remote_port"]) == ("198.51.100.7", "4711")
    answer = environ(port, (XFF, "[2001:db8::1]:8080"))
    assert (answer["remote_addr"], answer["remote_port"]) == ("2001:db8::1", "8080")
    assert environ(port, (XFF, "2001:db8::2"))["remote_addr"] == "2001:db8::2"
    # the header stays in the environ as it was sent
    assert answer["headers"]["HTTP_X_FORWARDED_FOR"] == "[2001:db8::1]:8080"


@pytest.mark.parametrize("value", ["blah", "0.0.0.0", "1.2.3.4:99999", "1.2.3.4.5", ""])
def test_an_invalid_client_ip_leaves_the_peer(proxied, value):
    _, port, _ = proxied
    answer = environ(port["127.0.0.1"], (XFF, value))
    assert answer["remote_addr"] == TRUSTED
    assert int(answer["remote_port"]) > 0  # the peer's own port, as without the header


def test_the_protocol_header_sets_the_scheme(proxied):
    _, port, _ = proxied
    port = port["127.0.0.1"]
    assert environ(port, (XFP, "https"))["scheme"] == "https"
    assert environ(port, (XFP, "oN"))["scheme"] == "https"
    assert environ(port, (XFP, "HTTP"))["scheme"] == "http"
    # any other value, a list among them, changes nothing; the first field counts
    assert environ(port, (XFP, "http, https"))["scheme"] == "http"
    assert environ(port, (XFP, "ftp"))["scheme"] == "http"
    assert environ(port, (XFP, "http"), (XFP, "https"))["scheme"] == "http"
    answer = environ(port, (XFP, "https"))
    assert answer["remote_addr"] == TRUSTED  # a scheme alone leaves the address


def test_an_untrusted_peer_is_not_believed(proxied):
    _, port, _ = proxied
    answer = environ(port["127.0.0.1"], (XFF, "203.0.113.9"), (XFP, "https"), source=UNTRUSTED)
    assert (answer["remote_addr"], answer["scheme"]) == (UNTRUSTED, "http")


def test_a_listener_without_forwarded_ignores_the_headers(proxied):
    _, port, _ = proxied
    status, _, answer = request(
        port["127.0.0.2"], [(XFF, "203.0.113.9"), (XFP, "https")], host="127.0.0.2"
    )
    assert status == 200
    assert (answer["remote_addr"], answer["scheme"]) == (TRUSTED, "http")


def test_each_request_of_a_keep_alive_connection_is_read_on_its_own(proxied):
    _, port, _ = proxied
    with socket.create_connection(("127.0.0.1", port["127.0.0.1"]), timeout=10) as sock:
        first = request(0, [(XFF, "192.0.2.1"), (XFP, "https")], sock=sock)[2]
        second = request(0, [(XFF, "192.0.2.2")], sock=sock)[2]
        third = request(0, [], sock=sock)[2]
    assert (first["remote_addr"], first["scheme"]) == ("192.0.2.1", "https")
    assert (second["remote_addr"], second["scheme"]) == ("192.0.2.2", "http")
    assert (third["remote_addr"], third["scheme"]) == (TRUSTED, "http")


def test_the_access_log_writes_the_forwarded_client(proxied):
    _, port, access = proxied
    request(port["127.0.0.1"], [(XFF, "192.0.2.77")], path="/logged-forwarded")
    request(port["127.0.0.1"], [(XFF, "192.0.2.78")], path="/logged-untrusted", source=UNTRUSTED)
    wanted = [
        re.compile(r"^192\.0\.2\.77 GET /logged-forwarded HTTP/1\.1 200$", re.M),
        re.compile(r"^127\.0\.0\.5 GET /logged-untrusted HTTP/1\.1 200$", re.M),
    ]
    wait_for(lambda: access.exists() and all(w.search(access.read_text()) for w in wanted))


def test_recursive_walks_back_over_trusted_proxies(tmp_path: Path) -> None:
    forwarded = {"client_ip": XFF, "recursive": True, "source": [TRUSTED, "10.0.0.0/8"]}
    path = write_config(
        tmp_path, {"127.0.0.1:0": {"pass": "applications/a", "forwarded": forwarded}}
    )
    with Server(f"--config={path}", bind=None) as server:
        port = server.port
        assert environ(port, (XFF, "1.1.1.1"))["remote_addr"] == "1.1.1.1"
        assert environ(port, (XFF, "8.8.8.8, 1.1.1.1, 10.5.2.1"))["remote_addr"] == "1.1.1.1"
        # over several fields, the last first
        answer = environ(port, (XFF, "10.5.2.1"), (XFF, "10.50.0.17, 1.1.1.1"), (XFF, "10.1.1.1"))
        assert answer["remote_addr"] == "1.1.1.1"
        # every address trusted: the leftmost one
        assert environ(port, (XFF, "10.0.0.1, 10.0.0.2, 10.0.0.3"))["remote_addr"] == "10.0.0.1"
        # an invalid address ends the walk at the last valid one read
        assert environ(port, (XFF, "1.1.1.1, junk, 10.9.9.9"))["remote_addr"] == "10.9.9.9"
        assert environ(port, (XFF, "1.1.1.1, junk"))["remote_addr"] == TRUSTED
        # an untrusted peer: nothing is read
        assert environ(port, (XFF, "1.1.1.1"), source=UNTRUSTED)["remote_addr"] == UNTRUSTED


def test_a_routed_listener_routes_and_serves_the_forwarded_client(tmp_path: Path) -> None:
    """Unit replaces the request's address and scheme before routing: `source` and `scheme`
    match the forwarded ones, and a request handed to the other application's worker is
    served with them too."""
    routes = [
        {"match": {"source": "192.0.2.0/24"}, "action": {"return": 403}},
        {"match": {"scheme": "https", "uri": "/secure"}, "action": {"return": 204}},
        {"match": {"uri": "/b"}, "action": {"pass": "applications/b"}},
        {"action": {"pass": "applications/a"}},
    ]
    forwarded = {"client_ip": XFF, "protocol": XFP, "source": TRUSTED}
    path = write_config(
        tmp_path, {"127.0.0.1:0": {"pass": "routes", "forwarded": forwarded}}, routes=routes
    )
    with Server(f"--config={path}", bind=None, wait_ready=False) as server:
        server.wait_log(r"worker 0 of a ready")
        server.wait_log(r"worker 0 of b ready")
        port = ports(server)["127.0.0.1"]
        assert request(port, [(XFF, "192.0.2.10")])[0] == 403
        assert request(port, [(XFF, "192.0.2.10")], source=UNTRUSTED)[0] == 200
        assert request(port, [(XFP, "https")], path="/secure")[0] == 204
        assert request(port, [(XFP, "https")], path="/secure", source=UNTRUSTED)[0] == 200
        assert request(port, [], path="/secure")[0] == 200
        for app, target in (("a", "/"), ("b", "/b")):
            status, _, answer = request(port, [(XFF, "198.51.100.3"), (XFP, "on")], path=target)
            assert status == 200
            assert (answer["app"], answer["remote_addr"], answer["scheme"]) == (
                app,
                "198.51.100.3",
                "https",
            )
            answer = request(port, [(XFF, "198.51.100.3")], path=target, source=UNTRUSTED)[2]
            assert (answer["app"], answer["remote_addr"]) == (app, UNTRUSTED)
        # one keep-alive connection, alternating applications
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            for number, target in enumerate(["/", "/b", "/", "/b"]):
                client = f"203.0.113.{number + 1}"
                answer = request(0, [(XFF, client)], path=target, sock=sock)[2]
                assert (answer["app"], answer["remote_addr"]) == ("ab"[number % 2], client)


UNSAFE = [("X_Foo", "underscore"), ("X.Foo", "dot"), ("X-Foo", "dash"), ("X!Bar", "bang")]


@pytest.mark.parametrize(
    ("setting", "kept"),
    [
        (True, {"HTTP_X_FOO": "dash"}),  # Unit's: letters, digits and "-"
        # corral's default is Gunicorn's: only a name with "_" is left out
        (None, {"HTTP_X_FOO": "dash", "HTTP_X.FOO": "dot", "HTTP_X!BAR": "bang"}),
        ("absent", {"HTTP_X_FOO": "dash", "HTTP_X.FOO": "dot", "HTTP_X!BAR": "bang"}),
        (
            False,
            {"HTTP_X_FOO": "underscore, dash", "HTTP_X.FOO": "dot", "HTTP_X!BAR": "bang"},
        ),
    ],
)
def test_discard_unsafe_fields(tmp_path: Path, setting, kept) -> None:
    http = {} if setting == "absent" else {"discard_unsafe_fields": setting}
    forwarded = {"client_ip": "X_Real_IP", "source": TRUSTED}
    path = write_config(
        tmp_path,
        {"127.0.0.1:0": {"pass": "applications/a", "forwarded": forwarded}},
        settings={"http": http},
    )
    with Server(f"--config={path}", bind=None) as server:
        answer = environ(server.port, *UNSAFE, ("X_Real_IP", "192.0.2.5"))
        headers = {k: v for k, v in answer["headers"].items() if k != "HTTP_HOST"}
        if setting is False:
            kept = {**kept, "HTTP_X_REAL_IP": "192.0.2.5"}
            # a name Unit keeps is read for `forwarded` too
            assert answer["remote_addr"] == "192.0.2.5"
        else:
            assert answer["remote_addr"] == TRUSTED  # a discarded field does not exist
        assert headers == kept

"""Plain HTTP beside HTTPS (issue 33, point 5): Hypercorn's ``--insecure-bind``, the redirect
of ``--https-redirect``, uWSGI's ``http`` beside ``https`` and ``http-to-https``, and a
document's ``"tls": false`` listener redirecting with NGINX Unit's own ``return`` and
``location``: real servers, real TLS clients."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path

import pytest

from tests.certificates import authority, leaf
from tests.integration.control import listening_port
from tests.integration.nginx import free_port
from tests.integration.server import Server, read_response
from tests.integration.test_tls import client, store_server

# the route's redirect is answered by the request core: both cores
pytestmark = pytest.mark.usefixtures("each_core")


def plain(port: int, *requests: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """``requests`` sent one after another on one plain keep-alive connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        answers = []
        for request in requests:
            sock.sendall(request)
            answers.append(read_response(sock))
        return answers


def over_tls(port: int, context: ssl.SSLContext, target: str = "/") -> dict:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        status, _, body = read_response(tls)
        assert status == 200
        return json.loads(body)


def test_insecure_binds_serve_plain_http_beside_https(ca, certificate) -> None:
    chain, key = certificate
    secure, insecure = free_port(), free_port()
    flags = ["--certfile", str(chain), "--keyfile", str(key)]
    flags += ["--insecure-bind", f"127.0.0.1:{insecure}"]
    with Server("tls_apps:wsgi", *flags, bind=f"127.0.0.1:{secure}") as server:
        assert f"listening on https://127.0.0.1:{secure}" in server.stderr
        assert f"listening on http://127.0.0.1:{insecure}" in server.stderr
        assert over_tls(secure, client(ca))["scheme"] == "https"
        ((status, _, body),) = plain(insecure, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        told = json.loads(body)
        assert (status, told["scheme"], told["HTTPS"]) == (200, "http", None)


def test_the_redirect_flag_sends_plain_clients_to_https(ca, certificate) -> None:
    chain, key = certificate
    secure, insecure = free_port(), free_port()
    flags = ["--certfile", str(chain), "--keyfile", str(key), "--https-redirect"]
    flags += ["--insecure-bind", f"127.0.0.1:{insecure}"]
    with Server("tls_apps:wsgi", *flags, bind=f"127.0.0.1:{secure}"):
        get, post, head = plain(
            insecure,
            b"GET /a/b?c=1&d=%20 HTTP/1.1\r\nHost: LocalHost:80\r\n\r\n",
            # the body is read past, the connection kept: the next request is answered
            b"POST /form HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nx=1&y",
            b"HEAD / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        )
        assert get[0] == 301
        assert get[1]["location"] == f"https://localhost:{secure}/a/b?c=1&d=%20"
        assert (post[0], post[1]["location"]) == (308, f"https://localhost:{secure}/form")
        assert (head[0], head[1]["location"]) == (301, f"https://localhost:{secure}/")
        # where the redirect points, the application answers over TLS
        assert over_tls(secure, client(ca), "/a/b?c=1")["scheme"] == "https"


def test_a_uwsgi_ini_serves_http_beside_https_and_redirects(
    ca, certificate, tmp_path: Path
) -> None:
    chain, key = certificate
    secure, insecure, redirecting = free_port(), free_port(), free_port()
    ini = tmp_path / "site.ini"
    ini.write_text(
        f"[uwsgi]\nmodule = tls_apps\ncallable = wsgi\nhttp = 127.0.0.1:{insecure}\n"
        f"https = 127.0.0.1:{secure},{chain},{key}\n"
    )
    with Server(f"--ini={ini}", bind=None):
        assert over_tls(secure, client(ca))["scheme"] == "https"
        ((status, _, body),) = plain(insecure, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert (status, json.loads(body)["scheme"]) == (200, "http")
    ini.write_text(
        f"[uwsgi]\nmodule = tls_apps\ncallable = wsgi\nhttp-to-https = 127.0.0.1:{redirecting}\n"
        f"https = 127.0.0.1:{secure},{chain},{key}\n"
    )
    with Server(f"--ini={ini}", bind=None):
        ((status, fields, _),) = plain(redirecting, b"GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n")
        assert (status, fields["location"]) == (301, f"https://a.test:{secure}/x")


def test_a_documents_plain_listener_redirects_with_units_return() -> None:
    root, _ = authority()
    trusting = ssl.create_default_context(cadata=root.certificate_pem.decode())
    with store_server(site=leaf("ec")) as (server, control):
        document = {
            "listeners": {
                "127.0.0.1:0": {"pass": "applications/app", "tls": {"certificate": "site"}},
                "127.0.0.2:0": {"pass": "routes", "tls": False},
            },
            "routes": [
                {"action": {"return": 301, "location": "https://$host$request_uri"}},
            ],
            "applications": {"app": {"module": "tls_apps", "callable": "wsgi"}},
        }
        assert control.put("/config", document).status == 200
        secure = listening_port(server, "127.0.0.1:0")
        insecure = listening_port(server, "127.0.0.2:0")
        with socket.create_connection(("127.0.0.2", insecure), timeout=10) as sock:
            sock.sendall(b"GET /p?q HTTP/1.1\r\nHost: example.test\r\n\r\n")
            status, fields, _ = read_response(sock)
        assert (status, fields["location"]) == (301, "https://example.test/p?q")
        with (
            socket.create_connection(("127.0.0.1", secure), timeout=10) as raw,
            trusting.wrap_socket(raw, server_hostname="example.test") as tls,
        ):
            tls.sendall(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
            status, _, body = read_response(tls)
        assert (status, json.loads(body)["scheme"]) == (200, "https")
        # `true` is the certfile setting's certificate, which this server has not
        document["listeners"]["127.0.0.2:0"]["tls"] = True
        refused = control.put("/config", document)
        assert refused.status >= 400
        assert "tls: true serves the certfile setting's certificate" in refused.raw.decode()

"""HTTPS on the listeners of the command line (issue 33): Gunicorn's, Uvicorn's and Granian's
TLS flags through real corral processes, real certificates (made by trustme at test time) and
Python's own TLS client.

The application sees https (``wsgi.url_scheme``, ``HTTPS``, the ASGI scheme); only TLS 1.2 and
1.3 are offered, with ``http/1.1`` by ALPN; a client that sends plain HTTP, garbage, or nothing
is closed and the worker serves on; client certificates are asked for with ``cert_reqs``; a
file goes through the encryption (never sendfile); HUP reads the certificate again, and a
broken new one keeps the old serving.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.certificates import authority, issue_files, leaf
from tests.integration.control import Control, listening_port, short_dir
from tests.integration.server import Server, read_response, run_cli, wait_for

# the connection's part (files by copy, the door's client, the facts) is the request core's
pytestmark = pytest.mark.usefixtures("each_core")


def files(certificate: tuple[Path, Path]) -> list[str]:
    """The flags of a certificate fixture's files: --certfile CHAIN --keyfile KEY."""
    chain, key = certificate
    return ["--certfile", str(chain), "--keyfile", str(key)]


def client(ca: trustme.CA, **kwargs) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    context.set_alpn_protocols(["http/1.1"])
    for name, value in kwargs.items():
        setattr(context, name, value)
    return context


@contextmanager
def store_server(**bundles: Any) -> Iterator[tuple[Server, Any]]:
    """A server with a control API and nothing configured, its certificate store holding
    ``bundles`` (tests.certificates' `Issued`, by name); (the server, its `Control`)."""

    with short_dir() as directory:
        server = Server(f"--state-dir={directory / 'state'}", bind=None, wait_ready=False)
        with server:
            server.wait_log("no application configured: waiting for the control API")
            control = Control.of(server)
            for name, issued in bundles.items():
                assert control.put(f"/certificates/{name}", issued.bundle()).status == 200
            yield server, control


def https_get(server: Server, context: ssl.SSLContext, path: str = "/"):
    """GET ``path`` over a new TLS connection: (status, fields, body, the TLS socket's facts)."""
    with (
        socket.create_connection((server.host, server.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        status, fields, body = read_response(tls)
        facts = {
            "version": tls.version(),
            "alpn": tls.selected_alpn_protocol(),
            "serial": tls.getpeercert()["serialNumber"],
        }
        return status, fields, body, facts


def closed_unanswered(server: Server, data: bytes, timeout: float = 10.0) -> bytes:
    """What the server sends back to ``data`` on a plain connection before it closes."""
    with server.connect(timeout) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def test_gunicorns_flags_serve_https_to_a_wsgi_application(ca, certificate) -> None:
    with Server("tls_apps:wsgi", *files(certificate)) as server:
        assert f"listening on https://127.0.0.1:{server.port}" in server.stderr
        status, _, body, facts = https_get(server, client(ca))
        assert status == 200
        told = json.loads(body)
        assert (told["scheme"], told["HTTPS"]) == ("https", "on")
        assert facts["version"] in ("TLSv1.2", "TLSv1.3")
        assert facts["alpn"] == "http/1.1"
        # mod_ssl's keys, as uWSGI's and mod_wsgi's applications read them
        assert told["SSL_PROTOCOL"] == facts["version"]
        assert told["SSL_CIPHER"] and told["SSL_SESSION_RESUMED"] == "Initial"
        assert told["SSL_CLIENT_VERIFY"] == "NONE" and "SSL_CLIENT_CERT" not in told


def test_uvicorns_flags_serve_https_to_an_asgi_application(ca, certificate) -> None:
    chain, key = certificate
    with Server("tls_apps:asgi", "--ssl-certfile", str(chain), "--ssl-keyfile", str(key)) as server:
        status, _, body, facts = https_get(server, client(ca))
        told = json.loads(body)
        assert (status, told["scheme"]) == (200, "https")
        # the ASGI tls extension: TLS 1.3 and its suite by number, no client certificate
        tls = told["tls"]
        assert tls["tls_version"] == {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}[facts["version"]]
        assert tls["cipher_suite"] in (0x1301, 0x1302, 0x1303) or facts["version"] == "TLSv1.2"
        assert tls["client_cert_chain"] == [] and tls["client_cert_name"] is None
        assert tls["server_cert"] is None and tls["client_cert_error"] is None


def test_granians_flags_and_tls_1_3_only(ca, certificate) -> None:
    chain, key = certificate
    with Server(
        "tls_apps:wsgi",
        "--ssl-certificate",
        str(chain),
        "--ssl-keyfile",
        str(key),
        "--ssl-protocol-min",
        "tls1.3",
    ) as server:
        assert https_get(server, client(ca))[3]["version"] == "TLSv1.3"
        with pytest.raises(ssl.SSLError):
            https_get(server, client(ca, maximum_version=ssl.TLSVersion.TLSv1_2))
        assert https_get(server, client(ca))[0] == 200  # and it serves on


def test_tls_1_1_is_refused_and_the_worker_serves_on(ca, certificate) -> None:
    with Server("tls_apps:wsgi", *files(certificate)) as server:
        old = client(ca)
        with warnings.catch_warnings():  # the client must offer them to be refused
            warnings.simplefilter("ignore", DeprecationWarning)
            old.minimum_version = ssl.TLSVersion.TLSv1
            old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.set_ciphers("DEFAULT:@SECLEVEL=0")  # this OpenSSL's own floor is 1.2 otherwise
        with pytest.raises(ssl.SSLError) as refused:
            https_get(server, old)
        # the server's: its alert, or its close (uvloop's transport does not flush the
        # alert); the client would have said NO_PROTOCOLS_AVAILABLE before connecting
        assert refused.value.reason in (
            "TLSV1_ALERT_PROTOCOL_VERSION",
            "UNEXPECTED_EOF_WHILE_READING",
        )
        assert https_get(server, client(ca))[0] == 200


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",  # plain HTTP to the TLS port
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc" + b"\x00" * 40,  # a truncated ClientHello
        bytes(range(256)) * 4,  # garbage
    ],
    ids=["plain-http", "truncated-hello", "garbage"],
)
def test_what_is_not_a_handshake_is_closed_and_the_worker_serves_on(
    ca, certificate, data: bytes
) -> None:
    chain, key = certificate
    # a truncated ClientHello waits for the rest until the handshake timeout: 2 s, well
    # inside the client's 10 (the default 10 s raced it, and lost on a busy machine)
    flags = ["--certfile", str(chain), "--keyfile", str(key), "--tls-handshake-timeout", "2"]
    with Server("tls_apps:wsgi", *flags) as server:
        answer = closed_unanswered(server, data)
        if data.startswith(b"GET"):  # told, as nginx tells it, then closed
            assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
            assert answer.endswith(b"this port speaks HTTPS, and the request came as plain HTTP.\n")
        else:
            assert answer == b""
        assert https_get(server, client(ca))[0] == 200


def test_the_proxy_protocol_is_read_before_the_handshake(ca, certificate) -> None:
    chain, key = certificate
    flags = ["--certfile", str(chain), "--keyfile", str(key), "--proxy-protocol"]
    for workers, threads in ((1, 1), (2, 2)):  # the loop's accept, and a balanced pool's
        with Server("tls_apps:wsgi", *flags, "--threads", str(threads), workers=workers) as server:
            with (
                server.connect() as raw,
                client(ca).wrap_socket(
                    _after(raw, b"PROXY TCP4 203.0.113.7 127.0.0.1 4711 443\r\n"),
                    server_hostname="localhost",
                ) as tls,
            ):
                tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                status, _, body = read_response(tls)
            assert status == 200 and json.loads(body)["client"] == ["203.0.113.7", "4711"]
            # a header, then plain HTTP: the 400 of plain HTTP; no header: closed unanswered
            answer = closed_unanswered(
                server, b"PROXY TCP4 203.0.113.7 127.0.0.1 4711 443\r\nGET / HTTP/1.1\r\n\r\n"
            )
            assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
            assert closed_unanswered(server, b"GET / HTTP/1.1\r\n\r\n") == b""
            server.wait_log("PROXY protocol: connection from 127.0.0.1:\\d+ closed: ")


def test_a_peer_the_proxy_protocol_does_not_allow_is_closed(ca, certificate) -> None:
    with Server(
        "tls_apps:wsgi",
        *files(certificate),
        "--proxy-protocol",
        "--proxy-allow-from",
        "192.0.2.1",
    ) as server:
        header = b"PROXY TCP4 203.0.113.7 127.0.0.1 4711 443\r\n"
        assert closed_unanswered(server, header) == b""
        server.wait_log("PROXY protocol: connection from 127.0.0.1:\\d+ refused")


def _after(sock: socket.socket, header: bytes) -> socket.socket:
    sock.sendall(header)  # what a balancer writes before its client's first byte
    return sock


def test_a_client_that_never_finishes_its_handshake_is_closed(ca, certificate) -> None:
    with Server(
        "tls_apps:wsgi",
        *files(certificate),
        "--tls-handshake-timeout",
        "0.5",
    ) as server:
        with server.connect(timeout=10) as sock:
            started = time.monotonic()
            assert sock.recv(100) == b""  # closed, nothing written
            took = time.monotonic() - started
        assert 0.4 <= took < 5, took
        assert https_get(server, client(ca))[0] == 200


def test_a_session_resumes_on_any_worker_of_the_pool(ca, certificate) -> None:
    # the context is made in the master before the fork: every worker has its ticket keys
    chain, key = certificate
    with Server(
        "tls_apps:wsgi", "--certfile", str(chain), "--keyfile", str(key), workers=2
    ) as server:
        context = client(ca)

        def get(session: ssl.SSLSession | None = None) -> tuple[ssl.SSLSession, bool, int]:
            with (
                socket.create_connection((server.host, server.port), timeout=10) as raw,
                context.wrap_socket(raw, server_hostname="localhost", session=session) as tls,
            ):
                tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                _, _, body = read_response(tls)  # (TLS 1.3: the ticket came with the answer)
                return tls.session, tls.session_reused, json.loads(body)["pid"]

        session, reused, _ = get()
        assert not reused
        by_worker: dict[int, list[bool]] = {}
        for _ in range(200):
            _, reused, pid = get(session)
            by_worker.setdefault(pid, []).append(reused)
            if len(by_worker) == 2 and min(map(len, by_worker.values())) >= 3:
                break
        assert sorted(by_worker) == sorted(server.worker_pids())  # both workers served
        assert all(all(resumed) for resumed in by_worker.values()), by_worker


def test_client_certificates_are_required_with_cert_reqs_2(ca, certificate) -> None:
    chain = certificate[0]
    ca_file = chain.parent / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with Server(
        "tls_apps:wsgi",
        *files(certificate),
        "--ca-certs",
        str(ca_file),
        "--cert-reqs",
        "2",
    ) as server:
        # TLS 1.3: the client's handshake ends before the server checks it, which then
        # closes the connection: the request is never answered
        with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
            https_get(server, client(ca))
        holder = client(ca)
        issued = ca.issue_cert("client@example.com", common_name="alice")
        issued.configure_cert(holder)
        status, _, body, _ = https_get(server, holder)
        told = json.loads(body)
        assert status == 200 and told["SSL_CLIENT_VERIFY"] == "SUCCESS"
        assert told["SSL_CLIENT_S_DN"].startswith("CN=alice,")
        assert "O=trustme" in told["SSL_CLIENT_I_DN"]
        pem = issued.cert_chain_pems[0].bytes().decode()
        assert told["SSL_CLIENT_CERT"].split() == pem.split()


def test_a_file_goes_through_the_encryption(ca, certificate, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    big = bytes(range(256)) * 4096  # 1 MiB: sent from the file, not memory
    (site / "big.bin").write_bytes(big)
    with Server(
        "tls_apps:wsgi",
        *files(certificate),
        "--static",
        f"/static={site}",
    ) as server:
        status, fields, body, _ = https_get(server, client(ca), "/static/big.bin")
        assert (status, fields["content-length"], body) == (200, str(len(big)), big)


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--certfile", "{dir}/none.pem"], "certfile {dir}/none.pem: No such file or directory"),
        (["--certfile", "{chain}"], "certfile {chain}: no private key in it"),
        (["--certfile", "{key}", "--keyfile", "{key}"], "certfile {key}: no certificate in it"),
        (
            ["--certfile", "{chain}", "--keyfile", "{other}"],
            "keyfile {other}: the private key is not the certificate's ({chain})",
        ),
        (["--keyfile", "{key}"], "keyfile is set without certfile"),
        (
            ["--certfile", "{chain}", "--keyfile", "{key}", "--cert-reqs", "2"],
            "cert_reqs 2 asks for client certificates: give ca_certs",
        ),
        (
            ["--certfile", "{chain}", "--keyfile", "{key}", "--ciphers", "NOPE"],
            "ciphers 'NOPE': OpenSSL knows no such cipher",
        ),
    ],
)
def test_what_cannot_be_served_is_one_line(ca, certificate, tmp_path, flags, line) -> None:
    chain, key = certificate
    _, other = issue_files(ca, tmp_path, "other")
    names = {"dir": tmp_path, "chain": chain, "key": key, "other": other}
    result = run_cli("tls_apps:wsgi", "-b", "127.0.0.1:0", *(f.format(**names) for f in flags))
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"corral: error: {line.format(**names)}\n" or (
        result.stderr.startswith(f"corral: error: {line.format(**names)}")
        and result.stderr.count("\n") == 1
    )


def test_hup_reads_a_renewed_certificate_and_a_broken_one_keeps_the_old(
    ca, certificate, tmp_path: Path
) -> None:
    chain, key = certificate
    with Server("tls_apps:wsgi", *files(certificate)) as server:
        first = https_get(server, client(ca))[3]["serial"]
        renewed_chain, renewed_key = issue_files(ca, tmp_path, "renewed")
        chain.write_bytes(renewed_chain.read_bytes())
        key.write_bytes(renewed_key.read_bytes())
        server.send(signal.SIGHUP)
        wait_for(lambda: https_get(server, client(ca))[3]["serial"] != first, timeout=20)
        renewed = https_get(server, client(ca))[3]["serial"]
        key.write_bytes(b"not a key\n")  # a renewal gone wrong
        server.send(signal.SIGHUP)
        server.wait_log(r"reload failed: .*keyfile .*; the running workers keep serving")
        assert https_get(server, client(ca))[3]["serial"] == renewed


# -- NGINX Unit's listeners: "tls" naming certificates of the store -------------------------


def test_a_listener_serves_the_stores_certificates_chosen_by_sni() -> None:

    root, _ = authority()
    wide, own = leaf("rsa"), leaf("ec", dns=("ec.test",))  # example.test and *.example.test
    trusting = ssl.create_default_context(cadata=root.certificate_pem.decode())
    with store_server(wide=wide, own=own) as (server, control):
        document = {
            "listeners": {
                "127.0.0.1:0": {
                    "pass": "applications/tls",
                    "tls": {"certificate": ["wide", "own"]},
                }
            },
            "applications": {"tls": {"module": "tls_apps", "callable": "wsgi"}},
        }
        assert control.put("/config", document).status == 200
        port = listening_port(server, "127.0.0.1:0")
        assert f"listening on https://127.0.0.1:{port}" in server.stderr

        def served(name: str, context: ssl.SSLContext = trusting) -> tuple[str, dict]:
            with (
                socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
                context.wrap_socket(raw, server_hostname=name) as tls,
            ):
                tls.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
                status, _, body = read_response(tls)
                assert status == 200
                subject = dict(item[0] for item in tls.getpeercert()["subject"])
                return subject["commonName"], json.loads(body)

        name, told = served("ec.test")
        assert (name, told["scheme"], told["HTTPS"]) == ("ec.test", "https", "on")
        assert served("a.example.test")[0] == "example.test"  # the wildcard
        assert served("example.test")[0] == "example.test"
        unnamed = ssl.create_default_context(cadata=root.certificate_pem.decode())
        unnamed.check_hostname = False
        assert served("other.test", unnamed)[0] == "example.test"  # the first: default
        # the status and the metrics say when each served certificate ends
        expiring = control.get("/status").json["certificates"]
        assert sorted(expiring) == ["own", "wide"]
        assert (
            expiring["own"]["until"] == f"{own.certificate.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
        )
        assert expiring["own"]["days_left"] > 0
        metrics = control.get("/metrics").raw.decode()
        until = int(wide.certificate.not_valid_after_utc.timestamp())
        assert f'corral_tls_certificate_expiry_seconds{{certificate="wide"}} {until}' in metrics
        # a certificate a listener serves is not deleted; one it does not name is
        assert control.delete("/certificates/own").status == 400
        document["listeners"]["127.0.0.1:0"]["tls"]["certificate"] = "wide"
        assert control.put("/config", document).status == 200
        assert control.delete("/certificates/own").status == 200
        # and a document naming one the store lacks is refused, the running one serving
        document["listeners"]["127.0.0.1:0"]["tls"]["certificate"] = "none"
        refused = control.put("/config", document)
        assert refused.status == 400 and 'Certificate "none" is not found.' in str(refused.json)
        port = listening_port(server, "127.0.0.1:0")
        assert served("a.example.test")[0] == "example.test"


def test_pointing_a_listener_at_a_new_certificate_under_load_loses_no_request() -> None:
    import threading

    root, _ = authority()
    old, new = leaf("ec"), leaf("ec")  # example.test, one after the other
    trusting = ssl.create_default_context(cadata=root.certificate_pem.decode())
    with store_server(old=old, new=new) as (server, control):
        document = {
            "listeners": {
                "127.0.0.1:0": {"pass": "applications/tls", "tls": {"certificate": "old"}}
            },
            "applications": {"tls": {"module": "tls_apps", "callable": "wsgi", "processes": 2}},
        }
        assert control.put("/config", document).status == 200
        port = listening_port(server, "127.0.0.1:0")
        serials: list[int] = []
        failures: list[str] = []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                try:
                    with (
                        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
                        trusting.wrap_socket(raw, server_hostname="example.test") as tls,
                    ):
                        tls.sendall(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
                        status, _, _ = read_response(tls)
                        if status != 200:
                            failures.append(f"status {status}")
                        serials.append(int(tls.getpeercert()["serialNumber"], 16))
                except (OSError, AssertionError) as exc:
                    failures.append(repr(exc))

        threads = [threading.Thread(target=load) for _ in range(4)]
        for thread in threads:
            thread.start()
        try:
            wait_for(lambda: len(serials) >= 50, timeout=30)
            document["listeners"]["127.0.0.1:0"]["tls"]["certificate"] = "new"
            assert control.put("/config", document).status == 200
            renewed = new.certificate.serial_number
            wait_for(lambda: serials[-8:] == [renewed] * 8, timeout=30)
            done = len(serials)
            wait_for(lambda: len(serials) >= done + 50, timeout=30)
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
        assert failures == []
        assert serials[0] == old.certificate.serial_number
        assert serials[-1] == new.certificate.serial_number


@pytest.mark.wallclock
@pytest.mark.timeout(120)
def test_stalled_handshakes_and_idle_tls_connections_do_not_delay_requests(ca, certificate) -> None:
    # 1,000 clients that connect and never send their ClientHello, 1,000 that finished their
    # handshake and sit idle: a normal client's requests are answered as fast as ever
    with Server(
        "tls_apps:wsgi",
        *files(certificate),
        "--tls-handshake-timeout",
        "60",
        "--keep-alive",
        "60",
    ) as server:
        context = client(ca)
        stalled = [server.connect() for _ in range(1000)]
        idle = []
        for _ in range(1000):
            tls = context.wrap_socket(server.connect(), server_hostname="localhost")
            idle.append(tls)
        try:
            took = []
            with (
                socket.create_connection((server.host, server.port), timeout=10) as raw,
                context.wrap_socket(raw, server_hostname="localhost") as tls,
            ):
                for _ in range(200):
                    started = time.perf_counter()
                    tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    assert read_response(tls)[0] == 200
                    took.append(time.perf_counter() - started)
            took.sort()
            assert took[int(len(took) * 0.99)] < 0.1, took[-5:]
            # and every idle one is still served
            for tls in idle[:20]:
                tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                assert read_response(tls)[0] == 200
        finally:
            for sock in stalled + idle:
                sock.close()


def test_renewed_files_are_served_without_a_hup(ca, certificate, tmp_path: Path) -> None:
    # certbot and other ACME clients write new files: the master sees them change
    chain, key = certificate
    with Server("tls_apps:wsgi", *files(certificate)) as server:
        server.wait_log(rf"TLS: certfile {chain} \(localhost\) valid until .* UTC \(\d+ days\)")
        first = https_get(server, client(ca))[3]["serial"]
        renewed_chain, renewed_key = issue_files(ca, tmp_path, "renewed")
        key.write_bytes(renewed_key.read_bytes())  # the key first: a moment of mismatch
        chain.write_bytes(renewed_chain.read_bytes())
        wait_for(lambda: https_get(server, client(ca))[3]["serial"] != first, timeout=30)
        server.wait_log(r"reloading \(.* was touched\)")
        server.wait_log(r"TLS: certfile .* valid until", count=2)


def test_a_uwsgi_ini_with_https_serves_https(ca, certificate, tmp_path: Path) -> None:
    chain, key = certificate
    ini = tmp_path / "site.ini"
    ini.write_text(
        f"[uwsgi]\nmodule = tls_apps\ncallable = wsgi\nhttps = 127.0.0.1:0,{chain},{key}\n"
    )
    with Server(f"--ini={ini}", bind=None) as server:
        status, _, body, _ = https_get(server, client(ca))
        assert (status, json.loads(body)["scheme"]) == (200, "https")


def test_routes_see_the_https_scheme() -> None:

    root, _ = authority()
    site = leaf("ec")
    trusting = ssl.create_default_context(cadata=root.certificate_pem.decode())
    with store_server(site=site) as (server, control):
        document = {
            "listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {"certificate": "site"}}},
            "routes": [
                {"match": {"scheme": "https"}, "action": {"return": 204}},
                {"action": {"return": 403}},
            ],
        }
        assert control.put("/config", document).status == 200
        port = listening_port(server, "127.0.0.1:0")
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            trusting.wrap_socket(raw, server_hostname="example.test") as tls,
        ):
            tls.sendall(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
            assert read_response(tls)[0] == 204


def test_the_status_says_when_the_certificate_file_expires(ca, certificate) -> None:

    chain = certificate[0]
    with (
        short_dir() as directory,
        Server(
            "tls_apps:wsgi",
            *files(certificate),
            f"--state-dir={directory / 'state'}",
        ) as server,
    ):
        served = Control.of(server).get("/status").json["certificates"]
        assert list(served) == [str(chain)] and served[str(chain)]["days_left"] > 300

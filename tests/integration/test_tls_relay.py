"""TLS on a listener whose routes pass to several applications (issue 33, point 4): the relay.

Three applications (``apps/relay_apps.py``: ``a`` and ``b`` WSGI, ``c`` ASGI) behind one TLS
listener passing to routes (``/a/*``, ``/b/*``, ``/c/*``), real corral processes, Python's own
TLS client. A request on a connection whose TLS session one worker holds and that routes to
another application reaches it through a relay (corral/server/relay.py): the holding worker
hands off one end of a socketpair, then pumps bytes between the session and its end.

Which worker accepts a connection is the kernel's choice: `held_by` makes it one application's
by stopping (SIGSTOP) the other workers while it connects and asks its first question, so the
hop is there for certain. The sending worker logs each hand-off at debug level (``handed GET
PATH to APP``, with its pid), which tells a relayed request from a direct one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.certificates import issue_files
from tests.integration.control import short_dir
from tests.integration.server import wait_for
from tests.integration.test_http import Reader, Response, get
from tests.integration.test_routed import Routed, chunked, request
from tests.integration.test_tls import client
from tests.integration.wsclient import TEXT, WebSocket, close_frame, frame, handshake_request

pytestmark = pytest.mark.usefixtures("each_core")

APPS = {
    "a": {"type": "python", "module": "relay_apps", "callable": "app_a"},
    "b": {"type": "python", "module": "relay_apps", "callable": "app_b"},
    "c": {"type": "python", "protocol": "asgi", "module": "relay_apps", "callable": "app_c"},
}
ROUTES = [
    {"match": {"uri": f"/{app}/*"}, "action": {"pass": f"applications/{app}"}} for app in APPS
]
MIB = 1 << 20
PATTERN = bytes(range(256)) * 4096  # relay_apps.PATTERN: 1 MiB


def pattern(length: int) -> bytes:
    return (PATTERN * (length // len(PATTERN) + 1))[:length]


def tls_document(
    directory: Path, ca: trustme.CA, settings: dict[str, Any] | None = None, **more: Any
) -> dict[str, Any]:
    """Three applications behind one TLS listener's routes, the certificate from ``ca``."""
    chain, key = issue_files(ca, directory)
    return {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": ROUTES,
        "applications": APPS,
        "settings": {"certfile": str(chain), "keyfile": str(key), **(settings or {})},
        **more,
    }


class Relayed(Routed):
    """`Routed` over TLS: ``tls()`` opens a client connection."""

    def __init__(self, directory: Path, doc: dict[str, Any], ca: trustme.CA, env=None) -> None:
        super().__init__(directory, doc, env)
        self.context = client(ca)

    def tls(self) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return self.context.wrap_socket(raw, server_hostname="localhost")

    def pid(self, app: str) -> int:
        [pid] = self.pids(app, fresh=True)
        return pid


@pytest.fixture(scope="module")
def relayed(each_core: str, ca: trustme.CA) -> Iterator[Relayed]:
    with short_dir() as directory, Relayed(directory, tls_document(directory, ca), ca) as on:
        workers = {app: on.pid(app) for app in APPS}
        yield on
        assert on.server.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in on.log(), on.log()
        assert {app: on.pid(app) for app in APPS} == workers  # none died


@contextlib.contextmanager
def stopped(pids: set[int]) -> Iterator[None]:
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def held_by(on: Relayed, app: str) -> tuple[ssl.SSLSocket, Reader]:
    """A TLS connection accepted by ``app``'s worker, which answered its first request
    (``/APP/told``) itself: the other workers are stopped until then."""
    others = {pid for other in APPS if other != app for pid in on.pids(other, fresh=True)}
    with stopped(others):
        tls = on.tls()
        reader = Reader(tls)
        tls.sendall(get(f"/{app}/told"))
        answer = reader.response()
    assert told(answer)["pid"] == on.pid(app)
    return tls, reader


def told(response: Response) -> dict[str, Any]:
    assert response.status == 200, response
    return json.loads(response.body)


def handed(on: Relayed, sender: str, target: str, app: str, method: str = "GET") -> None:
    """Wait for ``sender``'s worker to log the hand-off of ``method target`` to ``app``."""
    pid = on.pid(sender)
    line = rf"\[{pid}\] \[DEBUG\] handed {method} {re.escape(target)} to {app} with"
    on.server.wait_log(line)


def sockets_of(pid: int) -> int:
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
    return count


# -- one server for the module, per core ----------------------------------------------------


def test_each_application_is_told_https_the_client_and_the_tls_facts(relayed) -> None:
    tls, reader = held_by(relayed, "a")
    with tls:
        address, port = tls.getsockname()
        version, cipher = tls.version(), tls.cipher()[0]
        for step, app in enumerate("abcab"):
            target = f"/{app}/told?facts-{step}"
            tls.sendall(get(target))
            answer = told(reader.response())
            assert (answer["app"], answer["pid"]) == (app, relayed.pid(app))
            assert answer["scheme"] == "https"
            if app == "c":  # ASGI: the scope's client and the tls extension
                assert answer["client"] == [address, port]
                assert (
                    answer["tls"]["tls_version"] == {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}[version]
                )
                assert answer["tls"]["cipher_suite"] and answer["tls"]["client_cert_chain"] == []
            else:  # WSGI: REMOTE_ADDR and mod_ssl's keys, as on a connection of its own
                assert answer["client"] == [address, str(port)]
                assert (answer["HTTPS"], answer["SSL_PROTOCOL"]) == ("on", version)
                assert answer["SSL_CIPHER"] == cipher
                assert answer["SSL_CLIENT_VERIFY"] == "NONE"
    # a's own first request went nowhere; then the session stayed with a's worker, which
    # relayed b's request, and the pair's plain end moved on from worker to worker
    handed(relayed, "a", "/b/told?facts-1", "b")
    handed(relayed, "b", "/c/told?facts-2", "c")
    handed(relayed, "c", "/a/told?facts-3", "a")
    handed(relayed, "a", "/b/told?facts-4", "b")
    assert "handed GET /a/told " not in relayed.log()


def test_pipelined_requests_to_three_applications_answered_in_order(relayed) -> None:
    tls, reader = held_by(relayed, "a")
    body = os.urandom(30_000)
    with tls:
        tls.sendall(
            get("/b/told?p1")
            + request("POST", "/c/told?p2", body)
            + get("/a/told?p3")
            + chunked("POST", "/b/told?p4", [body[:1000], body[1000:]])
            + request("PUT", "/a/told?p5", b"five")
            + get("/c/told?p6")
        )
        answers = [told(reader.response()) for _ in range(6)]
    assert [answer["app"] for answer in answers] == list("bcabac")
    assert [answer["length"] for answer in answers] == [0, len(body), 0, len(body), 4, 0]
    assert answers[3]["sha256"] == hashlib.sha256(body).hexdigest()


def test_a_mebibyte_each_way_is_relayed_byte_for_byte(relayed) -> None:
    tls, reader = held_by(relayed, "a")
    upload = os.urandom(MIB)
    with tls:
        tls.sendall(request("POST", "/b/told", upload))
        answer = told(reader.response())
        assert (answer["length"], answer["sha256"]) == (MIB, hashlib.sha256(upload).hexdigest())
        pieces = [upload[i : i + 65536] for i in range(0, MIB, 65536)]
        tls.sendall(chunked("POST", "/b/told", pieces))
        assert told(reader.response())["sha256"] == hashlib.sha256(upload).hexdigest()
        tls.sendall(request("POST", "/b/echo", upload))  # both ways at once
        assert reader.response().body == upload
        tls.sendall(get(f"/b/big/{MIB}"))
        assert reader.response().body == pattern(MIB)
        tls.sendall(get("/b/chunks/16"))
        streamed = reader.response()
        assert streamed.get("transfer-encoding") == "chunked" and streamed.body == pattern(MIB)


def test_a_websocket_over_wss_goes_through_the_relay(relayed) -> None:
    tls, _ = held_by(relayed, "a")
    with tls:
        ws = WebSocket(tls)
        ws.handshake(handshake_request("/c/ws")[0])
        assert ws.status == 101, ws.headers
        c_pid = relayed.pid("c")
        for number in range(50):
            ws.send(frame(TEXT, f"hello {number}".encode()))
            assert ws.read_message() == (TEXT, f"wss {c_pid} hello {number}".encode())
        ws.send(frame(TEXT, b"x" * 200_000))  # larger than a read on either side
        _, echoed = ws.read_message()
        assert echoed == f"wss {c_pid} ".encode() + b"x" * 200_000
        ws.send(close_frame())
        assert ws.read_close()[0] == 1000
        assert ws.closed_by_server()
    handed(relayed, "a", "/c/ws", "c")


def test_a_slow_reader_gets_every_byte_and_the_relay_holds_little(relayed) -> None:
    """Backpressure: while the client does not read, the relaying worker stops reading the
    pair (the bytes wait in the application's worker), so its memory does not grow."""
    tls, reader = held_by(relayed, "a")
    a_pid = relayed.pid("a")
    size = 32 * MIB
    with tls:
        before = resident(a_pid)
        tls.sendall(get(f"/b/big/{size}"))
        time.sleep(2)  # the client reads nothing
        assert resident(a_pid) - before < 8 * MIB
        status, _, _ = reader.head()
        assert status == 200
        received = bytearray(reader.buffer)
        while len(received) < size:
            received += tls.recv(65536)
        assert received == pattern(size)
        reader.buffer = b""
        tls.sendall(get("/a/told"))  # and the connection goes on
        assert told(reader.response())["app"] == "a"


def resident(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    return int(kib) * 1024


def test_a_client_gone_mid_response_frees_both_workers(relayed) -> None:
    a_pid, b_pid = relayed.pid("a"), relayed.pid("b")
    wait_for(lambda: relayed.server.proc.poll() is None)
    baseline = sockets_of(a_pid), sockets_of(b_pid)
    tls, reader = held_by(relayed, "a")
    tls.sendall(get("/b/chunks/4096"))  # 256 MiB, streamed
    assert reader.head()[0] == 200
    tls.recv(65536)
    tls.close()  # the client goes away in the middle of the answer
    wait_for(lambda: (sockets_of(a_pid), sockets_of(b_pid)) == baseline)
    tls, reader = held_by(relayed, "a")
    with tls:
        tls.sendall(get("/b/told"))
        assert told(reader.response())["pid"] == b_pid


def test_the_access_log_names_the_client_and_https(ca) -> None:
    log_format = "%(h)s %({scheme}u)s %(r)s %(s)s"
    with short_dir() as directory:
        doc = tls_document(
            directory, ca, access_log={"path": str(directory / "access.log"), "format": log_format}
        )
        with Relayed(directory, doc, ca) as on:
            tls, reader = held_by(on, "a")
            with tls:
                address = tls.getsockname()[0]
                tls.sendall(get("/b/told?logged"))
                assert told(reader.response())["app"] == "b"
            wait_for(lambda: "logged" in (directory / "access.log").read_text())
            [line] = [
                line
                for line in (directory / "access.log").read_text().splitlines()
                if "logged" in line
            ]
            assert line == f"{address} https GET /b/told?logged HTTP/1.1 200"


# -- servers of their own ---------------------------------------------------------------------


def test_limits_and_timeouts_apply_through_the_relay(ca) -> None:
    settings = {
        "limit_request_line": 100,
        "http": {"max_body_size": 1000, "idle_timeout": 1, "header_read_timeout": 1},
    }
    with (
        short_dir() as directory,
        Relayed(directory, tls_document(directory, ca, settings), ca) as on,
    ):
        tls, reader = held_by(on, "a")
        with tls:  # too large a body: the other worker's 413, then closed
            tls.sendall(request("POST", "/b/told", b"x" * 2000))
            assert reader.response().status == 413
            reader.assert_closed()
        tls, reader = held_by(on, "a")
        with tls:  # too long a line: 414 (from the worker that parses the head to route it)
            tls.sendall(get("/b/told?first"))
            assert told(reader.response())["app"] == "b"
            tls.sendall(get("/b/told?" + "x" * 200))
            assert reader.response().status == 414
            reader.assert_closed()
        tls, reader = held_by(on, "a")
        with tls:  # a head that never ends: 408 after header_read_timeout
            tls.sendall(get("/b/told?first"))
            assert told(reader.response())["app"] == "b"
            started = time.monotonic()
            tls.sendall(b"GET /b/told HTTP/1.1\r\nHost: x\r\n")
            assert reader.response().status == 408
            reader.assert_closed()
            assert time.monotonic() - started < 5
        tls, reader = held_by(on, "a")
        with tls:  # an idle connection: closed by its keep-alive timeout (close_notify)
            tls.sendall(get("/b/told?idle"))
            assert told(reader.response())["app"] == "b"
            started = time.monotonic()
            assert tls.recv(1) == b""
            assert 0.5 < time.monotonic() - started < 5


def test_the_application_s_worker_dying_gives_a_502_or_a_clean_close(ca) -> None:
    """Killed before it answered: the relaying worker answers 502 (nothing came back through
    the relay). Killed in the middle of its answer: the client's connection is closed with a
    close_notify, never left hanging; either way the relaying worker serves on."""
    with short_dir() as directory:
        env = {"RELAY_MARKS": str(directory)}
        with Relayed(directory, tls_document(directory, ca), ca, env) as on:
            a_pid, b_pid = on.pid("a"), on.pid("b")
            tls, reader = held_by(on, "a")
            with tls:
                tls.sendall(get("/b/slow/60"))
                wait_for(lambda: (directory / f"slow-{b_pid}").exists())
                os.kill(b_pid, signal.SIGKILL)
                answer = reader.response()
                assert answer.status == 502 and answer.get("connection") == "close", answer
                reader.assert_closed()
            on.server.wait_log(r"worker \d+ of b ready \(pid \d+", count=2, timeout=30)
            b_pid = on.pid("b")
            tls, reader = held_by(on, "a")
            with tls:
                tls.sendall(get("/b/drip/60"))
                assert reader.head()[0] == 200
                wait_for(lambda: (directory / f"drip-{b_pid}").exists())
                os.kill(b_pid, signal.SIGKILL)
                tls.settimeout(10)
                with pytest.raises(EOFError):  # the answer's chunks stop: closed, not a hang
                    reader._chunked()
            assert on.pid("a") == a_pid  # the relaying worker serves on
            on.server.wait_log(r"worker \d+ of b ready \(pid \d+", count=3, timeout=30)
            tls, reader = held_by(on, "a")
            with tls:
                tls.sendall(get("/b/told"))
                assert told(reader.response())["pid"] == on.pid("b")


def test_the_relaying_worker_restarted_alone_ends_its_relays_at_a_request_s_end(ca) -> None:
    """Only a is restarted (its environment changed through the control API): the worker
    holding the session drains, the worker holding the relayed end answers the connection's
    next request with Connection: close, and the relaying worker leaves long before its
    graceful timeout (30 s), with no request lost."""
    with short_dir() as directory, Relayed(directory, tls_document(directory, ca), ca) as on:
        old_a = on.pid("a")
        tls, reader = held_by(on, "a")
        with tls:
            tls.sendall(get("/b/told?before"))
            assert told(reader.response())["app"] == "b"
            started = time.monotonic()
            on.apply("PUT", "/config/applications/a/environment", {"RESTARTED": "1"})
            on.server.wait_log(r"worker \d+ of a ready \(pid \d+, generation 2\)")
            b_pid = on.pid("b")  # its worker read the watch's EOF:
            on.server.wait_log(rf"\[{b_pid}\] \[DEBUG\] the worker relaying a connection drains")
            tls.sendall(get("/b/told?after"))
            answer = reader.response()
            assert told(answer)["app"] == "b" and answer.get("connection") == "close"
            reader.assert_closed()
        wait_for(lambda: not os.path.exists(f"/proc/{old_a}"), timeout=15)
        assert time.monotonic() - started < 15


def tls_load(on: Relayed, stop: float, failures: list[str], served: list[int]) -> None:
    """One client until ``stop``: a keep-alive TLS connection asking a, b and c in turn; a new
    connection after an answer that said it closes. Every request must be answered."""
    count = 0
    while time.monotonic() < stop:
        with on.tls() as tls:
            reader = Reader(tls)
            while time.monotonic() < stop:
                target = f"/{'abc'[count % 3]}/told?n={count}"
                count += 1
                try:
                    tls.sendall(get(target))
                    answer = reader.response()
                except (OSError, EOFError, AssertionError) as exc:
                    failures.append(f"{target}: {exc!r}")
                    break
                if answer.status != 200:
                    failures.append(f"{target}: {answer}")
                served.append(1)
                if answer.get("connection") == "close":
                    break


def test_a_reload_and_a_stop_under_load_lose_no_relayed_request(ca) -> None:
    with short_dir() as directory:
        on = Relayed(directory, tls_document(directory, ca), ca, {"RELAY_MARKS": str(directory)})
        with on:
            failures: list[str] = []
            served: list[int] = []
            stop = time.monotonic() + 4
            clients = [
                threading.Thread(target=tls_load, args=(on, stop, failures, served))
                for _ in range(4)
            ]
            for thread in clients:
                thread.start()
            time.sleep(1)
            on.server.send(signal.SIGHUP)
            on.server.wait_log(r"worker \d+ of \w+ ready \(pid \d+, generation 2\)", count=3)
            for thread in clients:
                thread.join()
            assert not failures, failures
            assert len(served) > 100
            # the old workers leave once their connections end, not at the graceful timeout
            wait_for(lambda: all(len(on.pids(app, fresh=True)) == 1 for app in APPS), 15)
            # a stop with relayed requests in progress: they are answered, then it exits
            tls, reader = held_by(on, "a")
            with tls:
                tls.sendall(get("/b/slow/1"))
                wait_for(lambda: (directory / f"slow-{on.pid('b')}").exists())
                on.server.send(signal.SIGTERM)
                assert told(reader.response())["app"] == "b"
                reader.assert_closed()  # (after the drain's idle grace: clean, not a reset)
            assert on.server.proc.wait(30) == 0


def test_the_asyncio_loop_relays_alike(ca) -> None:
    with short_dir() as directory:
        doc = tls_document(directory, ca, {"loop": "asyncio"})
        with Relayed(directory, doc, ca) as on:
            tls, reader = held_by(on, "a")
            upload = os.urandom(MIB)
            with tls:
                tls.sendall(request("POST", "/b/echo", upload))
                assert reader.response().body == upload
                tls.sendall(get("/c/told") + get("/a/told"))  # (not behind a large body: routed.py)
                assert told(reader.response())["app"] == "c"
                assert told(reader.response())["app"] == "a"
            handed(on, "a", "/b/echo", "b", "POST")


# -- the hand-off under the relay ---------------------------------------------------------


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_a_connection_handed_on_at_once_loses_none_of_its_bytes(ca, tls: bool) -> None:
    """A worker given a connection whose first request is its own and whose second is another
    application's hands it on at once, while the rest of that request is still arriving:
    every byte reaches the next worker (uvloop reads an adopted socket once its connection is
    made, whatever it asked: the frame is made when it is sent, with all that was read)."""
    with short_dir() as directory:
        doc = tls_document(directory, ca)
        if not tls:
            del doc["settings"]["certfile"], doc["settings"]["keyfile"]
        with Relayed(directory, doc, ca) as on:
            body = os.urandom(400_000)
            for _ in range(5):
                if tls:
                    sock, reader = held_by(on, "b")
                else:
                    with stopped(on.pids("a") | on.pids("c")):
                        sock = on.connect()
                        reader = Reader(sock)
                        sock.sendall(get("/b/told"))
                        assert told(reader.response())["app"] == "b"
                with sock:
                    sock.sendall(get("/a/told") + request("POST", "/c/told", body))
                    assert told(reader.response())["app"] == "a"
                    assert told(reader.response())["length"] == len(body)


def test_curl_on_one_connection_reaches_the_three_applications(relayed, ca, tmp_path) -> None:
    """A real client: curl asks for the three applications' paths on one kept-alive TLS
    connection (it opens one, then reuses it: num_connects 1, 0, 0)."""
    authority = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(authority))
    port = relayed.port
    base = f"https://localhost:{port}"
    argv = ["curl", "-sS", "--cacert", str(authority), "--resolve", f"localhost:{port}:127.0.0.1"]
    argv += ["-w", "\n%{num_connects}\n", f"{base}/c/told", f"{base}/a/told", f"{base}/b/told"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    lines = done.stdout.splitlines()
    answers, connects = [json.loads(line) for line in lines[0::2]], lines[1::2]
    assert [answer["app"] for answer in answers] == ["c", "a", "b"]
    assert {answer["scheme"] for answer in answers} == {"https"}
    assert connects == ["1", "0", "0"]

"""Readiness and liveness probes (``--health``) and the graceful stop behind a load balancer
(``--shutdown-delay``; what waits in the accept queue is served), on real servers.

The probes are the worker's answers: the application never sees them (it counts what reaches
it), they come while every application thread is busy, readiness turns 503 the moment a TERM
arrives and stays so through the delay while everything else is served as usual, and the
control API's ``/status`` says the same of the whole server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.integration.control import Control, short_dir
from tests.integration.server import Server, wait_for
from tests.integration.test_cli_server import get

pytestmark = pytest.mark.usefixtures("each_core")

APP = "health_apps:application"


def test_the_probes_are_the_servers_and_the_application_never_sees_them() -> None:
    with Server(APP, "--health") as server:
        status, headers, body = get(server.host, server.port, "/readyz")
        assert (status, body) == (200, b"ready\n")
        assert headers["cache-control"] == "no-store"
        assert get(server.host, server.port, "/livez")[:3:2] == (200, b"live\n")
        assert get(server.host, server.port, "/readyz?verbose")[0] == 200  # its query ignored
        assert get(server.host, server.port, "/readyz/more")[2] == b"app /readyz/more"
        # four probes went by: the application saw none of them, only the one above
        assert get(server.host, server.port, "/count")[2] == b"1"
        assert server.stop() == 0


def test_without_health_the_paths_are_the_applications() -> None:
    with Server(APP) as server:
        assert get(server.host, server.port, "/readyz")[2] == b"app /readyz"
        assert server.stop() == 0


def test_the_paths_move() -> None:
    with Server(APP, "--health", "--readiness-path=/ready", "--liveness-path=/alive") as server:
        assert get(server.host, server.port, "/ready")[2] == b"ready\n"
        assert get(server.host, server.port, "/alive")[2] == b"live\n"
        assert get(server.host, server.port, "/readyz")[2] == b"app /readyz"
        assert server.stop() == 0


def test_a_probe_is_answered_while_every_application_thread_is_busy() -> None:
    with Server(APP, "--health", "--threads=2") as server:
        sleepers = [
            threading.Thread(target=get, args=(server.host, server.port, "/sleep", None))
            for _ in range(3)  # two threads busy, a third request queued behind them
        ]
        for sleeper in sleepers:
            sleeper.start()
        time.sleep(0.3)
        began = time.monotonic()
        assert get(server.host, server.port, "/readyz")[0] == 200
        assert time.monotonic() - began < 0.5  # not after the sleepers' 1 s
        for sleeper in sleepers:
            sleeper.join()
        assert server.stop() == 0


def test_a_listener_of_the_document_has_the_probes_alone(tmp_path: Path) -> None:
    document = {
        "listeners": {
            "127.0.0.1:0": {"pass": "applications/health", "health": True},
            "127.0.0.2:0": {"pass": "applications/health"},
        },
        "applications": {"health": {"type": "python", "module": "health_apps"}},
    }
    path = tmp_path / "health.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server:
        found = server.wait_log(r"listening on http://([\d.]+):(\d+)", count=2)
        ports = {host: int(port) for host, port in found}
        assert get("127.0.0.1", ports["127.0.0.1"], "/readyz")[2] == b"ready\n"
        assert get("127.0.0.2", ports["127.0.0.2"], "/readyz")[2] == b"app /readyz"
        assert server.stop() == 0


def test_a_term_turns_readiness_503_and_the_delay_serves_on_as_usual() -> None:
    with (
        short_dir() as tmp,
        Server(
            APP, "--health", "--shutdown-delay=2", f"--control=unix:{tmp}/control.sock"
        ) as server,
    ):
        control = Control.of(server)
        assert control.get("/status").json["readiness"] == "ready"
        server.send(signal.SIGTERM)
        began = time.monotonic()
        wait_for(lambda: get(server.host, server.port, "/readyz")[0] == 503, timeout=1.0)
        assert time.monotonic() - began < 1.0
        status, _, body = get(server.host, server.port, "/readyz")
        assert (status, body) == (503, b"draining\n")
        # through the delay: new connections served, each answer closing its connection (a
        # balancer's kept ones move elsewhere), liveness still 200
        status, headers, body = get(server.host, server.port, "/")
        assert (status, body, headers["connection"]) == (200, b"app /", "close")
        assert get(server.host, server.port, "/livez")[0] == 200
        assert control.get("/status").json["readiness"] == "draining"
        assert server.proc.poll() is None
        assert server.proc.wait(timeout=10) == 0
        assert time.monotonic() - began >= 2.0
        assert "serving on for the shutdown delay (2 s)" in server.stderr


def test_a_worker_that_dies_in_the_delay_is_replaced_and_drains_with_the_rest() -> None:
    """The delay serves on as usual: a worker that dies is replaced (the only one here, so no
    request would be answered until the end of the delay otherwise), its replacement answers
    readiness 503 as the others, and drains when the delay ends."""
    with Server(APP, "--health", "--shutdown-delay=4", workers=1) as server:
        (first,) = server.worker_pids()
        server.send(signal.SIGTERM)
        wait_for(lambda: get(server.host, server.port, "/readyz")[0] == 503, timeout=1.0)
        began = time.monotonic()
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: server.worker_pids() not in ([], [first]), timeout=3.0)
        (second,) = server.worker_pids()
        server.wait_log(rf"worker 0 ready \(pid {second}")
        status, headers, body = get(server.host, server.port, "/")
        assert (status, body, headers["connection"]) == (200, b"app /", "close")
        assert get(server.host, server.port, "/readyz")[:3:2] == (503, b"draining\n")
        assert time.monotonic() - began < 3.0  # (within the delay)
        assert server.proc.wait(timeout=10) == 0
        assert "died: signal SIGKILL" in server.stderr


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGQUIT])
def test_a_second_signal_ends_the_delay(second: signal.Signals) -> None:
    with Server(APP, "--health", "--shutdown-delay=30") as server:
        server.send(signal.SIGTERM)
        wait_for(lambda: get(server.host, server.port, "/readyz")[0] == 503, timeout=1.0)
        began = time.monotonic()
        server.send(second)
        assert server.proc.wait(timeout=10) == 0
        assert time.monotonic() - began < 5.0
        assert f"{second.name}: the shutdown delay ends now" in server.stderr


def _ask(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=10)
    sock.sendall(b"GET /count HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


def _answer(sock: socket.socket) -> bytes:
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return received


def test_what_waits_in_the_accept_queue_when_the_server_stops_is_served() -> None:
    # one worker, one thread: its loop runs the application, so while /sleep runs the
    # connections after it wait in the listener's accept queue, TERM arriving meanwhile
    with Server(APP, "--threads=1") as server:
        sleeping = _ask_path(server, "/sleep?1")
        time.sleep(0.3)
        queued = [_ask(server.host, server.port) for _ in range(3)]
        server.send(signal.SIGTERM)
        assert b"slept" in _answer(sleeping)
        answers = [_answer(sock) for sock in queued]
        for answer in answers:  # whole, not reset (the first may precede the drain)
            assert answer.startswith(b"HTTP/1.1 200 "), answer
            assert answer.partition(b"\r\n\r\n")[2].isdigit(), answer
        assert server.proc.wait(timeout=10) == 0


def _ask_path(server: Server, target: str) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=10)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock

"""Worker processes: count, titles, event loops, backpressure, slow clients, keep-alive."""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import os
import resource
import socket
import threading
import time

import pytest

from corral.apps.wsgi.runner import BODY_HIGH_WATER
from tests.integration.control import listening_port
from tests.integration.server import Server, read_response, wait_for
from tests.integration.sockets import unread_by_server

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
MALFORMED = b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"  # answered 400 by the loop itself


def get(server: Server, path: str = "/", timeout: float = 10.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as stream:
        return stream.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()


# -- processes ------------------------------------------------------------------------------


def test_two_workers_are_children_with_titles():
    with Server("proc_apps", workers=2) as server:
        pids = wait_for(lambda: (p := server.worker_pids()) and len(p) == 2 and p, timeout=5)
        assert len(pids) == 2
        assert cmdline(server.proc.pid) == "corral: master [proc_apps]"
        for pid in pids:
            assert cmdline(pid) == "corral: worker [proc_apps]"
        # both are real serving workers: their pids show up in answers
        seen: set[int] = set()

        def both_seen():
            seen.add(json.loads(get(server, "/info")[1])["pid"])
            return seen == set(pids)

        # new connections are spread by the kernel; both workers accept eventually
        wait_for(both_seen, timeout=10, interval=0)
        assert server.stop() == 0


def test_proc_name_sets_titles():
    with Server("proc_apps", "-n", "shop") as server:
        assert cmdline(server.proc.pid) == "corral: master [shop]"
        (pid,) = server.worker_pids()
        assert cmdline(pid) == "corral: worker [shop]"
        assert server.stop() == 0


def test_workers_auto_is_cpu_count():
    cpus = len(os.sched_getaffinity(0))
    with Server("proc_apps", "-w", "auto", wait_ready=False) as server:
        server.expected_workers = cpus
        server.wait_ready()
        assert len(server.worker_pids()) == cpus
        assert f"with {cpus} worker(s)" in server.stderr
        assert server.stop() == 0


def _uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


@pytest.mark.parametrize("loop", ["asyncio", "uvloop", "auto"])
def test_event_loop_choice(loop):
    if loop == "uvloop" and not _uvloop_installed():
        pytest.skip("uvloop is not installed in this environment")
    expected = loop if loop != "auto" else ("uvloop" if _uvloop_installed() else "asyncio")
    with Server("proc_apps", "--loop", loop) as server:
        status, body = get(server, "/info")
        assert status == 200
        module = json.loads(body)["loop"]
        # the application runs on the loop thread (threads=1): it sees the loop's class
        assert module.split(".")[0] == expected
        assert get(server, "/") == (200, b"Hello, world!")
        assert server.stop() == 0


# -- backpressure ---------------------------------------------------------------------------


def _request(server: Server, target: str) -> socket.socket:
    sock = server.connect()
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def _send_until_full(sock: socket.socket, data: bytes) -> int:
    """Send ``data`` until the socket takes no more (its peer stopped reading); bytes sent."""
    sock.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent : sent + 65536])
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(30)
    return sent


# a worker reads at most this much of a queued request's body: its bounded buffer, plus the
# read that crossed the mark (asyncio and uvloop read up to 256 KiB at a time)
QUEUED_BODY_READ_MAX = BODY_HIGH_WATER + 256 * 1024


def test_backpressure_when_all_threads_busy(tmp_path):
    """With both threads busy and the body streamed to the application (`--no-request-
    buffering`: by default the loop reads it whole first, test_slow_bodies.py), a third
    connection's request waits in the pool's queue (one per connection, never run before a
    thread frees) and its body stays in the socket: the worker reads its bounded buffer's
    worth and stops reading, while its loop serves on."""
    flags = tmp_path / "flags"
    flags.mkdir()
    body = b"x" * (16 << 20)  # more than the kernel buffers on both sides hold
    streamed = ("--threads", "2", "--no-request-buffering")
    with (
        Server("proc_apps", *streamed, env={"PROC_FLAGS": str(flags)}) as server,
        contextlib.ExitStack() as stack,
    ):
        first = stack.enter_context(_request(server, "/block?name=a"))
        second = stack.enter_context(_request(server, "/block?name=b"))
        wait_for(lambda: (flags / "a.started").exists() and (flags / "b.started").exists())
        third = stack.enter_context(server.connect(timeout=30))
        head = b"POST /length?name=c HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
        third.sendall(head % len(body))
        sent = _send_until_full(third, body)
        assert sent < len(body)  # the socket filled up: the rest waits for the server
        # The loop is not blocked: it answers what it can judge without a thread (a 400). Its
        # turns pass meanwhile (the new connection is accepted in one, read in a later one),
        # each seeing the third socket readable: a worker that read it would have by now.
        held = []
        for _ in range(2):
            assert server.raw(MALFORMED).startswith(b"HTTP/1.1 400 ")
            held.append(unread_by_server(third))
        read = sent - held[0]
        assert held[0] == held[1] > 0, (sent, held)  # the bytes wait in the socket, unread
        assert read <= QUEUED_BODY_READ_MAX, (sent, held)  # a bounded part was read
        assert not (flags / "c.started").exists()  # queued: the application was not called
        (flags / "a.release").touch()
        assert read_response(first)[2] == b"released a"
        third.sendall(body[sent:])  # the freed thread runs c, which reads the rest
        assert read_response(third)[2] == str(len(body)).encode()
        assert (flags / "c.started").exists()
        (flags / "b.release").touch()
        assert read_response(second)[2] == b"released b"
        assert server.stop() == 0


# -- slow clients ---------------------------------------------------------------------------


@pytest.mark.wallclock
def test_slow_clients_never_block_others():
    count = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 2 * count + 200  # ours, plus the server's (it inherits our limit)
    if soft < needed and (hard == resource.RLIM_INFINITY or hard >= needed):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft != resource.RLIM_INFINITY and soft < needed:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below the {needed} descriptors needed")
    with Server("proc_apps", "--threads", "1") as server, contextlib.ExitStack() as stack:
        slow = [stack.enter_context(server.connect()) for _ in range(count)]
        # a request head sent one byte per second on every slow connection
        head = b"GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 64
        stop = threading.Event()
        rounds = [0]
        errors: list[BaseException] = []

        def trickle():
            try:
                for position in range(6):
                    for sock in slow:
                        sock.send(head[position : position + 1])
                    rounds[0] += 1
                    if stop.wait(1.0):
                        return
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        driver = threading.Thread(target=trickle, daemon=True)
        driver.start()
        latencies = []
        pause = threading.Event()
        wait_for(lambda: rounds[0] >= 1, timeout=10)
        while driver.is_alive() and len(latencies) < 200:
            started = time.perf_counter()
            status, body = get(server, "/")
            latencies.append(time.perf_counter() - started)
            assert (status, body) == (200, b"Hello, world!")
            pause.wait(0.05)
        stop.set()
        driver.join(10)
        assert not errors, errors
        assert rounds[0] >= 5, rounds  # the slow clients really trickled for ~5 s
        assert len(latencies) >= 20
        assert max(latencies) < 0.1, sorted(latencies)[-5:]
        # every slow connection is still open (none was dropped to make room)
        for sock in slow[:: count // 20]:
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
        assert server.stop() == 0


# -- keep-alive -----------------------------------------------------------------------------


@pytest.mark.wallclock
def test_idle_keep_alive_closed_after_timeout():
    with Server("proc_apps", "--keep-alive", "1") as server, server.connect() as sock:
        sock.sendall(REQUEST)
        status, headers, body = read_response(sock)
        answered = time.monotonic()
        assert (status, body) == (200, b"Hello, world!")
        assert headers.get("connection", "").lower() != "close"
        sock.settimeout(0.05)

        def closed():
            try:
                return sock.recv(1) == b""
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True

        wait_for(closed, timeout=3.5)
        elapsed = time.monotonic() - answered
        assert elapsed >= 0.9, elapsed  # not before the keep-alive time
        assert server.stop() == 0


def test_keep_alive_connection_reused_within_timeout():
    with Server("proc_apps", "--keep-alive", "5") as server, server.connect() as sock:
        for _ in range(3):
            sock.sendall(REQUEST)
            assert read_response(sock)[2] == b"Hello, world!"
        assert server.stop() == 0


def test_threaded_pool_shares_a_burst_of_connections():
    """Keep-alive connections stay where they were accepted: a burst is split evenly."""
    with Server("proc_apps", "--threads", "4", workers=2) as server:
        socks = [server.connect() for _ in range(40)]
        try:
            pids = []
            for sock in socks:
                sock.sendall(b"GET /info HTTP/1.1\r\nHost: t\r\n\r\n")
                status, _, body = read_response(sock)
                assert status == 200
                pids.append(json.loads(body)["pid"])
        finally:
            for sock in socks:
                sock.close()
        counts = sorted(pids.count(pid) for pid in set(pids))
        assert len(counts) == 2 and counts[0] >= 14, counts  # 20/20 give or take


# -- the garbage collector ------------------------------------------------------------------


@pytest.mark.parametrize("target", ["gc_apps:wsgi", "gc_apps:asgi"])
def test_the_worker_freezes_what_is_alive_once_the_application_is_loaded(target):
    with Server(target) as server:
        status, body = get(server)
        # the interpreter, corral and the application: tens of thousands of objects
        assert status == 200 and int(body) > 10_000, body
    with Server(target, "--gc-freeze", "false") as server:
        assert get(server) == (200, b"0")


def test_gc_freeze_is_each_application_s_own_in_a_unit_document(tmp_path):
    config = tmp_path / "unit.json"
    config.write_text(
        json.dumps(
            {
                "listeners": {"127.0.0.1:0": {"pass": "routes"}},
                "routes": [
                    {"match": {"uri": "/a"}, "action": {"pass": "applications/a"}},
                    {"action": {"pass": "applications/b"}},
                ],
                "applications": {
                    "a": {
                        "type": "python",
                        "module": "gc_apps",
                        "callable": "wsgi",
                        "gc_freeze": False,
                    },
                    "b": {"type": "python", "module": "gc_apps", "callable": "asgi"},
                },
            }
        )
    )
    server = Server(f"--config={config}", bind=None, wait_ready=False)
    try:
        server.wait_log(r"worker \d+ of \w+ ready", count=2, timeout=30)
        server.port = listening_port(server, "127.0.0.1:0")
        assert get(server, "/a") == (200, b"0")
        status, body = get(server, "/b")
        assert status == 200 and int(body) > 10_000, body
    finally:
        assert server.stop() == 0


def smaps_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as stream:
        for line in stream:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/smaps_rollup")


def test_a_preloaded_application_stays_shared_with_the_master_after_the_freeze():
    """The worker's gc_freeze collection walks only what it made itself: the master froze
    its objects before the fork, so the preloaded heap's pages are not copied."""
    with Server("gc_preload_app:application", "--preload") as server:
        status, body = get(server)
        assert status == 200 and int(body) > 1_000_000, body
        (worker,) = server.worker_pids()
        assert smaps_kib(worker, "Rss") > 100 * 1024  # the heap of about 100 MiB, mapped
        # without the master's freeze the collection dirtied it all: 74 MiB private, here 7
        assert smaps_kib(worker, "Private_Dirty") < 30 * 1024

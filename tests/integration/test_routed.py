"""Routes and hand-offs through the real master: one loopback listener passing to ``routes``,
shared by the pools of two applications, each with its hand-off socket.

Every server here is ``python -m corral -c unit.json`` (an NGINX Unit document written to a
short temporary directory), with the control API on a unix socket where a test changes the
document while it serves. A connection on the routed listener is accepted by a worker of
either application; a request that routes to the other one is handed over to a worker of it,
and the answers name the application and the pid that served them (``apps/routed_apps.py``),
checked against the master's workers of that application.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.master.listeners import handoff_address
from corral.server.handoff import encode_frame
from tests.integration.control import Control, listening_port, short_dir
from tests.integration.load import Load
from tests.integration.server import Server, read_response, wait_for
from tests.integration.test_applications import At, pids_of
from tests.integration.test_http import Reader, Response, get

ROUTES = [
    {"match": {"uri": "/a/*"}, "action": {"pass": "applications/a"}},
    {"match": {"uri": "/b/*"}, "action": {"pass": "applications/b"}},
    {"match": {"method": "PUT"}, "action": {"pass": "applications/b"}},
    {"match": {"host": "b.example"}, "action": {"pass": "applications/b"}},
    {"match": {"host": "a.example"}, "action": {"pass": "applications/a"}},
    {"match": {"uri": "/old"}, "action": {"return": 301, "location": "/new place"}},
    {"match": {"uri": "/teapot"}, "action": {"return": 418}},
    {"match": {"uri": "/static/*"}, "action": {"share": "/srv$uri"}},
]
APPS = {
    "a": {"type": "python 3", "module": "routed_apps", "callable": "app_a"},
    "b": {"type": "python 3", "module": "routed_apps", "callable": "app_b"},
}
ROUTED = "127.0.0.1:0"  # the listener passing to routes
DIRECT = "127.0.0.2:0"  # one passing straight to an application (loopback too, on Linux)
ANSWER = re.compile(rb"app=(\w) pid=(\d+) method=(\w+) path=(\S*) len=(\d+) body=(.*)", re.S)
HANDOFF_TIMEOUT = 3.0  # the handoff_timeout setting's default


def unit_document(
    settings: dict[str, Any] | None = None,
    apps: dict[str, dict[str, Any]] | None = None,
    routes: list[dict[str, Any]] | None = None,
    listeners: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "listeners": listeners or {ROUTED: {"pass": "routes"}},
        "routes": ROUTES if routes is None else routes,
        "applications": APPS if apps is None else apps,
        "settings": settings or {},
    }


class Routed:
    """``corral -c DIRECTORY/unit.json`` with the control API on ``DIRECTORY/control.sock``,
    started and ready: every worker of the document said ``ready``."""

    def __init__(self, directory: Path, doc: dict[str, Any], env: dict[str, str] | None = None):
        config = directory / "unit.json"
        config.write_text(json.dumps(doc))
        self.server = Server(
            f"--config={config}",
            f"--control=unix:{directory}/control.sock",
            bind=None,
            wait_ready=False,
            env=env,
        )
        workers = sum(app.get("processes", 1) for app in doc["applications"].values())
        try:
            self.server.wait_log(r"worker \d+ of \w+ ready", count=workers, timeout=30)
        except AssertionError:
            self.server.stop()
            raise AssertionError(f"not ready:\n{self.server.stderr}") from None
        self.control = Control(f"unix:{directory}/control.sock")
        self.port = listening_port(self.server, ROUTED)
        self.at = At("127.0.0.1", self.port)
        self._pids: dict[str, set[int]] = {}

    def pids(self, app: str, fresh: bool = False) -> set[int]:
        """The master's live workers of ``app`` (cached: ``fresh`` reads /proc again)."""
        if fresh or app not in self._pids:
            self._pids[app] = pids_of(self.server, app)
        return self._pids[app]

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def log(self) -> str:
        return self.server.stderr

    def apply(self, method: str, path: str, body: Any = None) -> None:
        answer = self.control.request(method, path, body)
        assert answer.status == 200 and "success" in answer.json, answer.json

    def __enter__(self) -> Routed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)


def answered_by(routed: Routed, response: Response, app: str, path: str, body: bytes = b"") -> int:
    """Check ``response`` is ``app``'s answer to ``path`` from one of its workers; its pid."""
    assert response.status == 200, response
    match = ANSWER.fullmatch(response.body)
    assert match, response
    assert match.group(1).decode() == app, response
    pid = int(match.group(2))
    assert pid in routed.pids(app) or pid in routed.pids(app, fresh=True), (response, app)
    assert match.group(4).decode() == path, response
    assert match.group(6) == body, response
    return pid


def request(method: str, path: str, body: bytes = b"", *lines: str) -> bytes:
    fields = "".join(f"{line}\r\n" for line in lines)
    head = f"{method} {path} HTTP/1.1\r\nHost: example.com\r\n{fields}"
    if body or method in ("POST", "PUT"):
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def chunked(method: str, path: str, pieces: list[bytes]) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    return head.encode() + body + b"0\r\n\r\n"


def uses_uvloop(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as stream:
        return "/uvloop/" in stream.read()


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def routed(request) -> Iterator[Routed]:
    with short_dir() as directory, Routed(directory, unit_document({"loop": request.param})) as on:
        workers = on.pids("a") | on.pids("b")
        assert len(on.pids("a")) == len(on.pids("b")) == 1
        assert {uses_uvloop(pid) for pid in workers} == {request.param == "uvloop"}
        yield on
        assert on.server.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in on.log(), on.log()
        assert on.pids("a", fresh=True) | on.pids("b", fresh=True) == workers  # none died


def test_the_master_lays_the_routed_listener_out_on_both_pools(routed):
    """Both applications' workers hold the routed listener and their own hand-off socket."""
    listing = subprocess.run(["ss", "-xlpn"], capture_output=True, text=True, check=True).stdout
    [a_pid], [b_pid] = routed.pids("a"), routed.pids("b")
    master = routed.server.proc.pid
    for app, pid in (("a", a_pid), ("b", b_pid)):
        address = "@" + handoff_address(master, app)[1:]
        [line] = [line for line in listing.splitlines() if f" {address} " in line]
        assert f"pid={pid}," in line and f"pid={master}," in line, line
        other = b_pid if app == "a" else a_pid
        assert f"pid={other}," not in line, line  # a worker holds its own application's only
    tcp = subprocess.run(["ss", "-tlpn"], capture_output=True, text=True, check=True).stdout
    [line] = [line for line in tcp.splitlines() if f"127.0.0.1:{routed.port} " in line]
    assert f"pid={a_pid}," in line and f"pid={b_pid}," in line, line


def test_one_keep_alive_connection_alternates_applications(routed):
    with routed.connect() as sock:
        reader = Reader(sock)
        for round_ in range(3):
            for app in "abab":
                sock.sendall(get(f"/{app}/{round_}"))
                answered_by(routed, reader.response(), app, f"/{app}/{round_}")


def test_routes_by_method_and_host(routed):
    with routed.connect() as sock:
        reader = Reader(sock)
        sock.sendall(request("PUT", "/x", b"put"))
        answered_by(routed, reader.response(), "b", "/x", b"put")
        sock.sendall(b"GET /y HTTP/1.1\r\nHost: a.example\r\n\r\n")
        answered_by(routed, reader.response(), "a", "/y")
        sock.sendall(b"GET /z HTTP/1.1\r\nHost: B.Example:8080\r\n\r\n")
        answered_by(routed, reader.response(), "b", "/z")
        sock.sendall(b"GET /y HTTP/1.1\r\nHost: a.example\r\n\r\n")
        answered_by(routed, reader.response(), "a", "/y")


def carried(routed: Routed, method: str, path: str, app: str) -> int:
    """Wait for the sending worker's record of the hand-off of ``method path`` to ``app``; the
    bytes of the request it had read, which went with it."""
    line = rf"handed {method} {re.escape(path)} to {app} with the (\d+) bytes read from its start"
    return int(routed.server.wait_log(line)[0])


@pytest.mark.parametrize("first", ["a", "b"])
def test_post_bodies_are_handed_off_whole(routed, first):
    other = "b" if first == "a" else "a"
    body = os.urandom(40_000).hex().encode()  # more than one read
    with routed.connect() as sock:
        reader = Reader(sock)
        sock.sendall(get(f"/{first}/start"))
        answered_by(routed, reader.response(), first, f"/{first}/start")
        sock.sendall(request("POST", f"/{other}/cl", body))
        answered_by(routed, reader.response(), other, f"/{other}/cl", body)
        sock.sendall(chunked("POST", f"/{first}/te", [body[:1000], body[1000:]]))
        answered_by(routed, reader.response(), first, f"/{first}/te", body)
        # The head and part of the body arrive, the rest only once the sender handed off what
        # it read: the receiver gets that part in the frame and reads the rest from the
        # socket itself. (Each case has its own paths: the module's server logs them all.)
        path = f"/{other}/split-{first}"
        data = request("POST", path, body)
        sock.sendall(data[:200])
        head = data.index(b"\r\n\r\n") + 4
        assert head <= carried(routed, "POST", path, other) <= 200  # split inside the body
        sock.sendall(data[200:])
        answered_by(routed, reader.response(), other, path, body)
        path = f"/{first}/split-{first}"
        data = chunked("POST", path, [b"hello ", b"world"])
        sock.sendall(data[:-12])
        head = data.index(b"\r\n\r\n") + 4
        assert head <= carried(routed, "POST", path, first) <= len(data) - 12
        sock.sendall(data[-12:])
        answered_by(routed, reader.response(), first, path, b"hello world")


def test_expect_continue_is_answered_by_the_receiving_worker(routed):
    with routed.connect() as sock:
        reader = Reader(sock)
        sock.sendall(get("/a/1"))
        answered_by(routed, reader.response(), "a", "/a/1")
        head = request("POST", "/b/upload", b"x" * 10, "Expect: 100-continue")
        sock.sendall(head[:-10])
        interim = reader.response()
        assert interim.status == 100, interim
        sock.sendall(b"x" * 10)
        answered_by(routed, reader.response(), "b", "/b/upload", b"x" * 10)
        sock.sendall(get("/a/2"))
        answered_by(routed, reader.response(), "a", "/a/2")


def test_pipelined_requests_alternating_applications_answered_in_order(routed):
    batch = (
        get("/a/1")
        + get("/b/2")
        + request("POST", "/a/3", b"three")
        + chunked("POST", "/b/4", [b"fo", b"ur"])
        + request("PUT", "/5", b"five")
        + get("/old")
        + get("/a/6")
        + get("/b/7")
    )
    with routed.connect() as sock:
        reader = Reader(sock)
        sock.sendall(batch)
        answered_by(routed, reader.response(), "a", "/a/1")
        answered_by(routed, reader.response(), "b", "/b/2")
        answered_by(routed, reader.response(), "a", "/a/3", b"three")
        answered_by(routed, reader.response(), "b", "/b/4", b"four")
        answered_by(routed, reader.response(), "b", "/5", b"five")
        assert reader.response().status == 301
        answered_by(routed, reader.response(), "a", "/a/6")
        answered_by(routed, reader.response(), "b", "/b/7")
        # and byte by byte: every split of the boundaries
        for byte in get("/b/8") + get("/a/9"):
            sock.sendall(bytes([byte]))
        answered_by(routed, reader.response(), "b", "/b/8")
        answered_by(routed, reader.response(), "a", "/a/9")


def test_return_and_no_route_keep_the_connection(routed):
    with routed.connect() as sock:
        reader = Reader(sock)
        sock.sendall(get("/old"))
        moved = reader.response()
        assert moved.status == 301 and moved.get("location") == "/new%20place", moved
        assert moved.body == b"" and moved.get("content-length") == "0"
        sock.sendall(get("/teapot"))
        teapot = reader.response()
        assert teapot.status == 418 and teapot.body.startswith(b"<!DOCTYPE html><title>Error 418")
        sock.sendall(request("POST", "/nowhere", b"dropped body"))
        missing = reader.response()
        assert missing.status == 404 and missing.get("connection") is None, missing
        assert missing.body == b"<!DOCTYPE html><title>Error 404</title><p>Error 404.\r\n"
        sock.sendall(get("/nowhere", method="HEAD"))
        head = reader.response("HEAD")
        assert head.status == 404 and head.get("content-length") == "54", head
        sock.sendall(get("/static/corral-no-such-file.txt"))  # a share without the file
        assert reader.response().status == 404
        sock.sendall(b"GET /%zz HTTP/1.1\r\nHost: example.com\r\n\r\n")
        assert reader.response().status == 400  # Unit refuses a malformed escape
        sock.sendall(get("/a/after"))
        answered_by(routed, reader.response(), "a", "/a/after")
        sock.sendall(get("/old", "Connection: close"))
        closing = reader.response()
        assert closing.status == 301 and closing.get("connection") == "close"
        reader.assert_closed()


def test_malformed_request_on_a_routed_listener_is_400(routed):
    with routed.connect() as sock:
        reader = Reader(sock)
        sock.sendall(b"GET /a/x HTTP/1.1\r\nHost: example.com\r\nBad Header\r\n\r\n")
        response = reader.response()
        assert response.status == 400 and response.get("connection") == "close"
        reader.assert_closed()


def test_the_listener_keeps_serving_under_many_connections(routed):
    socks = [routed.connect() for _ in range(20)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(get(f"/{'ab'[i % 2]}/{i}") + get(f"/{'ba'[i % 2]}/{i}"))
        for i, sock in enumerate(socks):
            reader = Reader(sock)
            answered_by(routed, reader.response(), "ab"[i % 2], f"/{'ab'[i % 2]}/{i}")
            answered_by(routed, reader.response(), "ba"[i % 2], f"/{'ba'[i % 2]}/{i}")
    finally:
        for sock in socks:
            sock.close()


def test_a_handoff_from_a_process_that_is_not_a_worker_is_refused(routed):
    """The hand-off address is abstract (no file mode guards it): the receiving worker checks
    its peer is a sibling and closes the connection before the greeting, adopting nothing."""
    [b_pid] = routed.pids("b")
    address = handoff_address(routed.server.proc.pid, "b")
    kept, passed = socket.socketpair()
    with kept, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(10)
        probe.connect(address)
        frame = encode_frame({"pass": "routes", "sockname": ["127.0.0.1", 1], "hops": 1}, get("/"))
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [passed.fileno()]))]
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # refused already
            probe.sendmsg([frame], rights)
        passed.close()
        try:
            greeting = probe.recv(16)
        except ConnectionResetError:  # closed with the frame unread
            greeting = b""
        assert greeting == b""  # closed, no greeting
        # nobody adopted the descriptor: its other end sees the last copy go, and no answer
        kept.settimeout(10)
        assert kept.recv(4096) == b""
    routed.server.wait_log("hand-off refused: the peer is not a worker of this server")
    assert routed.pids("b", fresh=True) == {b_pid}
    with routed.connect() as sock:  # the worker serves on
        reader = Reader(sock)
        sock.sendall(get("/a/1") + get("/b/1"))
        answered_by(routed, reader.response(), "a", "/a/1")
        assert answered_by(routed, reader.response(), "b", "/b/1") == b_pid


# -- servers of their own ------------------------------------------------------------------


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: all(not _alive(pid) for pid in pids))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _held_by_a(routed: Routed) -> tuple[socket.socket, Reader]:
    """A keep-alive connection that A's worker holds (it answered last)."""
    sock = routed.connect()
    reader = Reader(sock)
    sock.sendall(get("/a/0"))
    answered_by(routed, reader.response(), "a", "/a/0")
    return sock, reader


@pytest.mark.wallclock
def test_handoff_to_an_application_whose_workers_were_killed_waits_for_the_respawn():
    """kill -9 every worker of B: the master keeps B's hand-off socket and respawns at once
    (after the crash backoff), so the hand-off is queued and B's new worker takes it."""
    apps = {**APPS, "b": {**APPS["b"], "processes": 2}}
    with short_dir() as directory, Routed(directory, unit_document(apps=apps)) as routed:
        sock, reader = _held_by_a(routed)
        with sock:
            old_b = routed.pids("b")
            _kill_all(old_b)
            started = time.monotonic()
            sock.sendall(get("/b/1"))
            pid = answered_by(routed, reader.response(), "b", "/b/1")
            assert pid not in old_b
            assert time.monotonic() - started < HANDOFF_TIMEOUT
            sock.sendall(get("/a/1"))  # the connection goes on, back through A
            answered_by(routed, reader.response(), "a", "/a/1")
        assert "hand-off of" not in routed.log()  # nothing failed


@pytest.mark.wallclock
def test_handoff_to_an_application_whose_workers_cannot_start_in_time_is_503():
    """B's respawned worker takes longer than the hand-off timeout to become ready: A's worker
    answers 503 and closes that connection, serves on, and B serves again once it is ready."""
    timeout = 1.5  # the handoff_timeout setting, shorter than its default
    with short_dir() as directory:
        slow = directory / "slow"
        env = {"ROUTED_SLOW_START": str(slow)}
        doc = unit_document(settings={"handoff_timeout": timeout})
        with Routed(directory, doc, env=env) as routed:
            sock, reader = _held_by_a(routed)
            [a_pid] = routed.pids("a")
            slow.write_text(str(timeout + 2))
            with sock:
                _kill_all(routed.pids("b"))
                started = time.monotonic()
                sock.sendall(get("/b/1"))
                response = reader.response()
                waited = time.monotonic() - started
                assert response.status == 503 and response.get("connection") == "close"
                assert response.get("date") and response.get("server") == "corral"
                assert timeout - 0.3 < waited < timeout + 1.0, waited
                reader.assert_closed()
            routed.server.wait_log(r"hand-off of GET /b/1 to b failed: 503")
            with routed.connect() as sock:  # A's worker serves on
                reader = Reader(sock)
                sock.sendall(get("/a/2"))
                assert answered_by(routed, reader.response(), "a", "/a/2") == a_pid
            slow.unlink()
            routed.server.wait_log(r"worker 0 of b ready", count=2, timeout=20)
            with routed.connect() as sock:
                reader = Reader(sock)
                sock.sendall(get("/a/3") + get("/b/3"))
                answered_by(routed, reader.response(), "a", "/a/3")
                answered_by(routed, reader.response(), "b", "/b/3")


def test_a_restarted_application_s_draining_worker_takes_no_more_handoffs():
    """A restart of B through the API under load: B's old worker drains (held alive here by an
    idle connection) and takes no more hand-offs; its new one takes them; no request fails."""
    settings = {"drain_idle_timeout": 30, "http": {"idle_timeout": 60}}
    with (
        short_dir() as directory,
        Routed(directory, unit_document(settings)) as routed,
        routed.connect() as idle,
    ):
        idle_reader = Reader(idle)
        idle.sendall(get("/b/0"))
        [old_b] = routed.pids("b")
        assert answered_by(routed, idle_reader.response(), "b", "/b/0") == old_b
        with Load(routed.at, 4, "/b/load") as b_load, Load(routed.at, 4, "/a/load") as a_load:
            b_load.wait_requests(50)
            a_load.wait_requests(50)
            routed.apply("GET", "/control/applications/b/restart")
            [new_b] = routed.pids("b", fresh=True) - {old_b}
            assert _alive(old_b)  # draining its idle connection
            for i in range(10):  # fresh connections: handed off from A, or accepted by B
                with routed.connect() as sock:
                    reader = Reader(sock)
                    sock.sendall(get(f"/a/{i}") + get(f"/b/{i}"))
                    answered_by(routed, reader.response(), "a", f"/a/{i}")
                    assert answered_by(routed, reader.response(), "b", f"/b/{i}") == new_b
            b_load.wait_requests(50)
            a_load.wait_requests(50)
        for load, app in ((b_load, "b"), (a_load, "a")):
            assert not load.failures, (load.summary(), load.failures[:3])
            assert {r.status for r in load.ok} == {200}
            assert {r.body[:6] for r in load.ok} == {f"app={app} ".encode()}
        assert _alive(old_b)
        idle.close()
        wait_for(lambda: not _alive(old_b))


def test_routes_changed_under_load_fail_no_request():
    """Each change is in effect when the API answers (for every connection opened after it:
    the retired workers stopped accepting first); the load never sees a failure."""
    swapped = [
        {"match": {"uri": "/a/*"}, "action": {"pass": "applications/b"}},
        {"match": {"uri": "/b/*"}, "action": {"pass": "applications/a"}},
    ]
    with short_dir() as directory, Routed(directory, unit_document()) as routed:
        with Load(routed.at, 4, "/a/load") as a_load, Load(routed.at, 4, "/b/load") as b_load:
            for change in range(12):
                routes, a_goes_to, b_goes_to = (
                    (swapped, "b", "a") if change % 2 == 0 else (ROUTES, "a", "b")
                )
                a_load.wait_requests(20)
                b_load.wait_requests(20)
                routed.apply("PUT", "/config/routes", routes)
                for _ in range(3):
                    with routed.connect() as sock:
                        reader = Reader(sock)
                        sock.sendall(get("/a/now") + get("/b/now"))
                        answered_by(routed, reader.response(), a_goes_to, "/a/now")
                        answered_by(routed, reader.response(), b_goes_to, "/b/now")
            a_load.wait_requests(20)
            b_load.wait_requests(20)
        for load in (a_load, b_load):
            assert not load.failures, (load.summary(), load.failures[:3])
            assert {r.status for r in load.ok} == {200}
            assert {r.body[:6] for r in load.ok} == {b"app=a ", b"app=b "}, load.summary()


def test_routes_that_stop_reaching_an_application_under_load_fail_no_request():
    """The routes change so that nothing reaches A any more, and back: the old workers, still
    routing by the old table while they drain, may hand a connection to A meanwhile."""
    only_b = [{"match": {"uri": "*"}, "action": {"pass": "applications/b"}}]
    settings = {"drain_idle_timeout": 30, "http": {"idle_timeout": 60}}
    with short_dir() as directory, Routed(directory, unit_document(settings)) as routed:
        with routed.connect() as held:  # B's worker holds it, idle, through the change
            reader = Reader(held)
            held.sendall(get("/b/0"))
            [old_b] = routed.pids("b")
            assert answered_by(routed, reader.response(), "b", "/b/0") == old_b
            routed.apply("PUT", "/config/routes", only_b)
            assert _alive(old_b)  # draining, by the old table: /a/ is A's
            held.sendall(get("/a/1"))
            # handed to A's new worker, which routes it by the new table, to B's new one
            assert answered_by(routed, reader.response(), "b", "/a/1") != old_b
            routed.apply("PUT", "/config/routes", ROUTES)
        with Load(routed.at, 4, "/a/load") as a_load, Load(routed.at, 4, "/b/load") as b_load:
            for change in range(12):
                routes, a_goes_to = (only_b, "b") if change % 2 == 0 else (ROUTES, "a")
                a_load.wait_requests(20)
                b_load.wait_requests(20)
                routed.apply("PUT", "/config/routes", routes)
                with routed.connect() as sock:
                    reader = Reader(sock)
                    sock.sendall(get("/a/now") + get("/b/now"))
                    answered_by(routed, reader.response(), a_goes_to, "/a/now")
                    answered_by(routed, reader.response(), "b", "/b/now")
            a_load.wait_requests(20)
            b_load.wait_requests(20)
        failed = [line for line in routed.log().splitlines() if "hand-off" in line]
        for load in (a_load, b_load):
            assert not load.failures, (load.summary(), load.failures[:3], failed)
            assert {r.status for r in load.ok} == {200}, (load.summary(), failed)


def test_an_application_removed_from_the_routes_and_the_document_is_404_at_once():
    with short_dir() as directory, Routed(directory, unit_document()) as routed:
        [old_b] = routed.pids("b")
        master = routed.server.proc.pid
        without_b = unit_document(
            routes=[step for step in ROUTES if "applications/b" not in json.dumps(step)],
            apps={"a": APPS["a"]},
        )
        with Load(routed.at, 4, "/a/load") as load:
            load.wait_requests(30)
            routed.apply("PUT", "/config", without_b)
            with routed.connect() as sock:
                reader = Reader(sock)
                for path in ("/b/x", "/a/x", "/b/y"):
                    sock.sendall(get(path))
                    response = reader.response()
                    if path.startswith("/a/"):  # (its title no longer names it: alone)
                        assert response.body.startswith(b"app=a pid="), response
                    else:
                        assert response.status == 404, response
            load.wait_requests(30)
        assert not load.failures, (load.summary(), load.failures[:3])
        assert {r.status for r in load.ok} == {200}
        wait_for(lambda: not _alive(old_b))
        # its hand-off socket is gone with it: nothing listens at the address
        with (
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe,
            pytest.raises(ConnectionRefusedError),
        ):
            probe.connect(handoff_address(master, "b"))


def test_a_removed_application_s_paths_are_404_on_a_draining_worker_s_connection_too():
    """A's retired worker, draining a kept-open connection by the old table, hands a request
    for B (gone with the change: nothing listens at its address) to A's new workers, which
    answer it by the new table: 404, as a fresh connection gets, not a 502."""
    settings = {"drain_idle_timeout": 30, "http": {"idle_timeout": 60}}
    without_b = unit_document(
        settings,
        routes=[step for step in ROUTES if "applications/b" not in json.dumps(step)],
        apps={"a": APPS["a"]},
    )
    with (
        short_dir() as directory,
        Routed(directory, unit_document(settings)) as routed,
        routed.connect() as held,
    ):
        reader = Reader(held)
        held.sendall(get("/a/0"))  # A's now, whoever accepted it (B hands it over)
        [old_a] = routed.pids("a")
        assert answered_by(routed, reader.response(), "a", "/a/0") == old_a
        routed.apply("PUT", "/config", without_b)
        assert _alive(old_a)  # draining its idle connection, by the old routes
        held.sendall(get("/b/1"))
        response = reader.response()
        assert response.status == 404, response
        assert "hand-off of GET /b/1 to b failed" not in routed.log()
        with routed.connect() as fresh:
            fresh.sendall(get("/b/2"))
            assert Reader(fresh).response().status == 404


def test_a_listener_passing_to_one_application_is_served_by_its_workers_only():
    """Beside the routed listener, one passing straight to B: only B's workers accept on it,
    and its requests are not routed (``/a/1`` and ``/old`` reach B's application)."""
    listeners = {ROUTED: {"pass": "routes"}, DIRECT: {"pass": "applications/b"}}
    apps = {name: {**app, "processes": 2} for name, app in APPS.items()}
    doc = unit_document(apps=apps, listeners=listeners)
    with short_dir() as directory, Routed(directory, doc) as routed:
        port = listening_port(routed.server, DIRECT)
        for _ in range(10):
            with socket.create_connection(("127.0.0.2", port), timeout=10) as sock:
                reader = Reader(sock)
                for path in ("/a/1", "/old", "/x"):
                    sock.sendall(get(path))
                    answered_by(routed, reader.response(), "b", path)
        tcp = subprocess.run(["ss", "-tlpn"], capture_output=True, text=True, check=True).stdout
        [line] = [line for line in tcp.splitlines() if f"127.0.0.2:{port} " in line]
        assert all(f"pid={pid}," in line for pid in routed.pids("b")), line
        assert not any(f"pid={pid}," in line for pid in routed.pids("a")), line


def test_threaded_workers_hand_off_alike():
    apps = {name: {**app, "threads": 4, "processes": 2} for name, app in APPS.items()}
    with short_dir() as directory, Routed(directory, unit_document(apps=apps)) as routed:
        body = b"y" * 100_000
        with routed.connect() as sock:
            reader = Reader(sock)
            for app in "abba":
                sock.sendall(request("POST", f"/{app}/t", body))
                answered_by(routed, reader.response(), app, f"/{app}/t", body)
            head = request("POST", "/b/continue", b"z" * 5, "Expect: 100-continue")
            sock.sendall(head[:-5])
            assert reader.response().status == 100
            sock.sendall(b"z" * 5)
            answered_by(routed, reader.response(), "b", "/b/continue", b"z" * 5)
            sock.sendall(get("/a/1") + get("/b/2") + get("/a/3"))
            for app, path in (("a", "/a/1"), ("b", "/b/2"), ("a", "/a/3")):
                answered_by(routed, reader.response(), app, path)
        assert "Traceback" not in routed.log()


@pytest.mark.wallclock
def test_the_answers_routes_give_are_timed_from_their_request(tmp_path):
    """A `return` is logged with its own duration (the access log's request time, the latency
    histogram), as an application's answer is, not the time since the clock's origin."""
    log = tmp_path / "access.log"
    doc = unit_document()
    doc["access_log"] = {"path": str(log), "format": "%(U)s %(s)s %(L)s"}
    with Routed(tmp_path, doc) as routed, routed.connect() as sock:
        reader = Reader(sock)
        for path in ("/old", "/a/x", "/teapot"):
            sock.sendall(get(path))
            reader.response()
        lines = wait_for(
            lambda: log.exists() and len(log.read_text().splitlines()) >= 3 and log.read_text()
        ).splitlines()
    times = {line.split()[0]: float(line.split()[2]) for line in lines}
    assert set(times) == {"/old", "/a/x", "/teapot"}, lines
    assert all(0 <= seconds < 5 for seconds in times.values()), lines


def test_a_closed_routed_connection_leaves_no_reference_cycle():
    """A routed connection and its route point at each other while it is open; once closed,
    reference counting must free both (~14 objects per connection were left to the cycle
    collector before), as on a plain listener (test_wsgi.py's test of the same name)."""
    doc = unit_document(
        # a second application: Routed waits for "worker N of APP ready", named with two
        apps={
            "main": {"type": "python 3", "module": "wsgi_apps", "callable": "application"},
            "b": APPS["b"],
        },
        routes=[{"action": {"pass": "applications/main"}}],
    )

    def get(path: str, close: bool = False) -> bytes:
        with routed.connect() as sock:
            extra = "Connection: close\r\n" if close else ""
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
            status, _, body = read_response(sock)
            assert status == 200
            return body

    with short_dir() as directory, Routed(directory, doc) as routed:
        assert get("/garbage?start") == b"started"
        for _ in range(40):
            get("/", close=True)
        found = int(get("/garbage"))
        assert found < 40, f"{found} objects in cycles after 40 closed routed connections"

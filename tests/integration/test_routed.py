"""Routes in the worker and hand-offs between applications' workers: real processes, real
sockets (the launcher in worker_pair.py stands in for the master, which runs one application
only for now)."""

from __future__ import annotations

import os
import re
import signal
import socket
import time

import pytest

from tests.integration.server import wait_for
from tests.integration.test_http import Reader, Response, get
from tests.integration.worker_pair import WorkerPair

ROUTES = [
    {"match": {"uri": "/a/*"}, "action": {"pass": "applications/a"}},
    {"match": {"uri": "/b/*"}, "action": {"pass": "applications/b"}},
    {"match": {"method": "PUT"}, "action": {"pass": "applications/b"}},
    {"match": {"host": "b.example"}, "action": {"pass": "applications/b"}},
    {"match": {"host": "a.example"}, "action": {"pass": "applications/a"}},
    {"match": {"uri": "/old"}, "action": {"return": 301, "location": "/new place"}},
    {"match": {"uri": "/teapot"}, "action": {"return": 418}},
    {"match": {"uri": "/static/*"}, "action": {"share": "/srv$uri"}},
    {"match": {"uri": "/c/*"}, "action": {"pass": "applications/c"}},
]
APPS = {
    "a": {"module": "routed_apps", "callable": "app_a"},
    "b": {"module": "routed_apps", "callable": "app_b"},
}
ANSWER = re.compile(rb"app=(\w) pid=(\d+) method=(\w+) path=(\S*) len=(\d+) body=(.*)", re.S)


def pair_config(**extra) -> dict:
    return {"routes": ROUTES, "apps": APPS, "unserved": ["c"], "handoff_timeout": 0.5, **extra}


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def pair(request):
    with WorkerPair(pair_config(settings={"loop": request.param})) as launched:
        yield launched


def answered_by(pair: WorkerPair, response: Response, app: str, path: str, body: bytes = b""):
    assert response.status == 200, response
    match = ANSWER.fullmatch(response.body)
    assert match, response
    assert match.group(1).decode() == app, response
    assert int(match.group(2)) in pair.pids[app], (response, pair.pids)
    assert match.group(4).decode() == path, response
    assert match.group(6) == body, response


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


def test_one_keep_alive_connection_alternates_applications(pair):
    with pair.connect() as sock:
        reader = Reader(sock)
        for round_ in range(3):
            for app in "abab":
                sock.sendall(get(f"/{app}/{round_}"))
                answered_by(pair, reader.response(), app, f"/{app}/{round_}")


def test_routes_by_method_and_host(pair):
    with pair.connect() as sock:
        reader = Reader(sock)
        sock.sendall(request("PUT", "/x", b"put"))
        answered_by(pair, reader.response(), "b", "/x", b"put")
        sock.sendall(b"GET /y HTTP/1.1\r\nHost: a.example\r\n\r\n")
        answered_by(pair, reader.response(), "a", "/y")
        sock.sendall(b"GET /z HTTP/1.1\r\nHost: B.Example:8080\r\n\r\n")
        answered_by(pair, reader.response(), "b", "/z")
        sock.sendall(b"GET /y HTTP/1.1\r\nHost: a.example\r\n\r\n")
        answered_by(pair, reader.response(), "a", "/y")


@pytest.mark.parametrize("first", ["a", "b"])
def test_post_bodies_are_handed_off_whole(pair, first):
    other = "b" if first == "a" else "a"
    body = os.urandom(40_000).hex().encode()  # more than one read
    with pair.connect() as sock:
        reader = Reader(sock)
        sock.sendall(get(f"/{first}/start"))
        answered_by(pair, reader.response(), first, f"/{first}/start")
        sock.sendall(request("POST", f"/{other}/cl", body))
        answered_by(pair, reader.response(), other, f"/{other}/cl", body)
        sock.sendall(chunked("POST", f"/{first}/te", [body[:1000], body[1000:]]))
        answered_by(pair, reader.response(), first, f"/{first}/te", body)
        # the head and part of the body arrive, the rest later: what was read goes with it
        data = request("POST", f"/{other}/split", body)
        sock.sendall(data[:200])
        time.sleep(0.1)  # the first worker must have read and handed off the first part
        sock.sendall(data[200:])
        answered_by(pair, reader.response(), other, f"/{other}/split", body)
        data = chunked("POST", f"/{first}/split", [b"hello ", b"world"])
        sock.sendall(data[:-12])
        time.sleep(0.1)
        sock.sendall(data[-12:])
        answered_by(pair, reader.response(), first, f"/{first}/split", b"hello world")


def test_expect_continue_is_answered_by_the_receiving_worker(pair):
    with pair.connect() as sock:
        reader = Reader(sock)
        sock.sendall(get("/a/1"))
        answered_by(pair, reader.response(), "a", "/a/1")
        head = request("POST", "/b/upload", b"x" * 10, "Expect: 100-continue")
        sock.sendall(head[:-10])
        interim = reader.response()
        assert interim.status == 100, interim
        sock.sendall(b"x" * 10)
        answered_by(pair, reader.response(), "b", "/b/upload", b"x" * 10)
        sock.sendall(get("/a/2"))
        answered_by(pair, reader.response(), "a", "/a/2")


def test_pipelined_requests_alternating_applications_answered_in_order(pair):
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
    with pair.connect() as sock:
        reader = Reader(sock)
        sock.sendall(batch)
        answered_by(pair, reader.response(), "a", "/a/1")
        answered_by(pair, reader.response(), "b", "/b/2")
        answered_by(pair, reader.response(), "a", "/a/3", b"three")
        answered_by(pair, reader.response(), "b", "/b/4", b"four")
        answered_by(pair, reader.response(), "b", "/5", b"five")
        assert reader.response().status == 301
        answered_by(pair, reader.response(), "a", "/a/6")
        answered_by(pair, reader.response(), "b", "/b/7")
        # and byte by byte: every split of the boundaries
        for byte in get("/b/8") + get("/a/9"):
            sock.sendall(bytes([byte]))
        answered_by(pair, reader.response(), "b", "/b/8")
        answered_by(pair, reader.response(), "a", "/a/9")


def test_return_and_no_route_keep_the_connection(pair):
    with pair.connect() as sock:
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
        sock.sendall(get("/static/file.txt"))
        assert reader.response().status == 501
        sock.sendall(b"GET /%zz HTTP/1.1\r\nHost: example.com\r\n\r\n")
        assert reader.response().status == 400  # Unit refuses a malformed escape
        sock.sendall(get("/a/after"))
        answered_by(pair, reader.response(), "a", "/a/after")
        sock.sendall(get("/old", "Connection: close"))
        closing = reader.response()
        assert closing.status == 301 and closing.get("connection") == "close"
        reader.assert_closed()


def test_malformed_request_on_a_routed_listener_is_400(pair):
    with pair.connect() as sock:
        reader = Reader(sock)
        sock.sendall(b"GET /a/x HTTP/1.1\r\nHost: example.com\r\nBad Header\r\n\r\n")
        response = reader.response()
        assert response.status == 400 and response.get("connection") == "close"
        reader.assert_closed()


def test_handoff_to_an_application_nobody_accepts_for_is_503(pair):
    with pair.connect() as sock:
        reader = Reader(sock)
        sock.sendall(get("/a/1"))
        answered_by(pair, reader.response(), "a", "/a/1")
        started = time.monotonic()
        sock.sendall(get("/c/1"))
        response = reader.response()
        assert response.status == 503 and response.get("connection") == "close", response
        assert time.monotonic() - started < 5
        reader.assert_closed()
    with pair.connect() as sock:  # the worker serves on
        reader = Reader(sock)
        sock.sendall(get("/b/2"))
        answered_by(pair, reader.response(), "b", "/b/2")


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGKILL)

    def gone() -> bool:
        return all(not os.path.exists(f"/proc/{pid}") or _zombie(pid) for pid in pids)

    wait_for(gone)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_handoff_to_an_application_whose_workers_are_gone_is_502():
    with WorkerPair(pair_config()) as pair:
        _kill_all(pair.pids["b"])
        with pair.connect() as sock:
            reader = Reader(sock)
            sock.sendall(get("/a/1"))
            answered_by(pair, reader.response(), "a", "/a/1")
            sock.sendall(get("/b/1"))
            response = reader.response()
            assert response.status == 502 and response.get("connection") == "close"
            reader.assert_closed()
        with pair.connect() as sock:
            reader = Reader(sock)
            sock.sendall(get("/a/2"))
            answered_by(pair, reader.response(), "a", "/a/2")
        assert "hand-off of GET /b/1" in pair.log()


def _refused(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            return True
    return False


def test_a_draining_worker_takes_no_more_handoffs():
    config = pair_config(settings={"drain_idle_timeout": 30.0, "http": {"idle_timeout": 60.0}})
    with WorkerPair(config) as pair:
        # a connection that keeps B's worker draining (idle, closed only after 30 s)
        idle = pair.connect()
        idle_reader = Reader(idle)
        idle.sendall(get("/b/0"))
        answered_by(pair, idle_reader.response(), "b", "/b/0")
        [b_pid] = pair.pids["b"]
        os.kill(b_pid, signal.SIGTERM)
        wait_for(lambda: _refused(os.path.join(pair.dir, "b.sock")))  # its drain closed it
        assert not _zombie(b_pid)  # still draining its idle connection
        with pair.connect() as sock:
            reader = Reader(sock)
            sock.sendall(get("/b/1"))
            assert reader.response().status == 502
        idle.close()


def test_the_listener_keeps_serving_under_many_connections(pair):
    socks = [pair.connect() for _ in range(20)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(get(f"/{'ab'[i % 2]}/{i}") + get(f"/{'ba'[i % 2]}/{i}"))
        for i, sock in enumerate(socks):
            reader = Reader(sock)
            answered_by(pair, reader.response(), "ab"[i % 2], f"/{'ab'[i % 2]}/{i}")
            answered_by(pair, reader.response(), "ba"[i % 2], f"/{'ba'[i % 2]}/{i}")
    finally:
        for sock in socks:
            sock.close()
    assert "Traceback" not in pair.log()


def test_a_listener_passing_to_one_application_is_served_by_its_workers_only():
    # both applications' workers accept on it; A's hand every connection to B at once
    with WorkerPair(pair_config(**{"pass": "applications/b"})) as pair:
        for _ in range(6):
            with pair.connect() as sock:
                reader = Reader(sock)
                for path in ("/a/1", "/old", "/x"):
                    sock.sendall(get(path))
                    answered_by(pair, reader.response(), "b", path)


def test_threaded_workers_hand_off_alike():
    apps = {name: {**options, "threads": 4, "workers": 2} for name, options in APPS.items()}
    with WorkerPair(pair_config(apps=apps)) as pair:
        body = b"y" * 100_000
        with pair.connect() as sock:
            reader = Reader(sock)
            for app in "abba":
                sock.sendall(request("POST", f"/{app}/t", body))
                answered_by(pair, reader.response(), app, f"/{app}/t", body)
            head = request("POST", "/b/continue", b"z" * 5, "Expect: 100-continue")
            sock.sendall(head[:-5])
            assert reader.response().status == 100
            sock.sendall(b"z" * 5)
            answered_by(pair, reader.response(), "b", "/b/continue", b"z" * 5)
            sock.sendall(get("/a/1") + get("/b/2") + get("/a/3"))
            for app, path in (("a", "/a/1"), ("b", "/b/2"), ("a", "/a/3")):
                answered_by(pair, reader.response(), app, path)

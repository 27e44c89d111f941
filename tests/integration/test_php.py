"""NGINX Unit's ``"php"`` applications, run by a real php-fpm that corral's master starts and
supervises (corral/php/command.py, the "php" kind of corral/external/) and its workers reach
over FastCGI (corral/actions/fastcgi.py), on both cores.

Checked: a hello, the CGI variables php sees, a POST body echoed (large, chunked), a header
and a status set by php, a redirect by Location, a script chosen by path, a directory's index,
a ``script`` that answers everything, ``targets``, traversals refused, 502 while php-fpm's
socket is gone or answers what is not FastCGI, php-fpm killed and restarted by the master,
504 for a slow script, a large answer streamed, keep-alive to php-fpm, php-fpm in /status.
Tests skip, saying so, where Debian's php-fpm package is not installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from corral.config.document import validate_document
from corral.php.fpm import fpm_binary
from tests.integration.server import APPS, Server, children, read_all, read_response, wait_for
from tests.integration.test_static_safety import TRAVERSALS

needs_php_fpm = pytest.mark.skipif(
    not os.access(fpm_binary(), os.X_OK), reason="php-fpm is not installed (Debian's php-fpm)"
)
pytestmark = [pytest.mark.usefixtures("each_core"), needs_php_fpm]

SECRET = b"the php beside the root"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("php")
    www = top / "www"
    shutil.copytree(APPS / "php", www)
    (top / "secret.php").write_bytes(b"<?php echo '" + SECRET + b"';")
    (top / "www-secret.php").write_bytes(b"<?php echo '" + SECRET + b"';")
    (www / "out.php").symlink_to(top / "secret.php")  # a symlink out of the root
    (www / "sub" / "up.php").symlink_to("../../secret.php")
    return top


def document(root: Path) -> dict:
    www = str(root / "www")
    return {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [
            {"match": {"uri": "/fixed/*"}, "action": {"pass": "applications/site/front"}},
            {"match": {"uri": "/other/*"}, "action": {"pass": "applications/site/other"}},
            {"action": {"pass": "applications/site/main"}},
        ],
        "applications": {
            "site": {
                "type": "php",
                "processes": 4,
                "targets": {
                    "main": {"root": www},
                    "front": {"root": www, "script": "front.php"},
                    "other": {"root": www, "index": "page.php"},
                },
                "environment": {"APP_MODE": "test"},
                "options": {"admin": {"memory_limit": "77M"}},
            }
        },
        "settings": {"fastcgi_read_timeout": 1.5},
    }


def fpm_ready(server: Server, name: str = "site", count: int = 1) -> tuple[int, str]:
    """The pid of the php-fpm the master started (the ``count``-th time) for ``name`` once it
    answers, and its socket's path."""
    started = server.wait_log(
        rf"{name} process 0 started \(pid (\d+)\) at unix:(\S+)", timeout=20, count=count
    )
    pid, path = started[count - 1]
    server.wait_log(rf"{name} process 0 ready \(pid {pid}\)", timeout=20)
    return int(pid), path


def kill_php_fpm(pid: int) -> None:
    """php-fpm's master and its children killed (its children outlive a master killed
    alone: they would go on answering on the socket they share). The master first, else it
    would replace the children killed before it."""
    found = children(pid)
    os.kill(pid, signal.SIGKILL)
    for child in found:
        os.kill(child, signal.SIGKILL)


@pytest.fixture(scope="module")
def server(each_core: str, root: Path) -> Iterator[Server]:
    path = root / f"php-{each_core}.json"
    path.write_text(json.dumps(document(root)))
    with Server(f"--config={path}", bind=None) as running:
        fpm_ready(running)
        yield running
        assert running.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in running.stderr, running.stderr


def request(
    server: Server, method: str, path: str, body: object = None, headers: dict | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=20)
    try:
        headers = headers or {}
        chunked = headers.get("Transfer-Encoding") == "chunked"
        conn.request(method, path, body=body, headers=headers, encode_chunked=chunked)
        answer = conn.getresponse()
        fields = {name.lower(): value for name, value in answer.getheaders()}
        return answer.status, fields, answer.read()
    finally:
        conn.close()


def raw(server: Server, data: bytes) -> bytes:
    with server.connect() as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        return read_all(sock)


def test_hello(server: Server) -> None:
    status, headers, body = request(server, "GET", "/")
    assert (status, body) == (200, b"Hello, Unit!\n")
    assert headers["content-type"].startswith("text/html")  # php's default


def test_the_cgi_variables_php_sees(server: Server, root: Path) -> None:
    status, _, body = request(
        server,
        "GET",
        "/vars.php?a=1&b=two%20words",
        headers={"Host": "example.com:8080", "X-Custom": "yes", "Cookie": "c=3"},
    )
    assert status == 200
    seen = json.loads(body)
    www = str(root / "www")
    assert seen["SCRIPT_FILENAME"] == f"{www}/vars.php"
    assert seen["SCRIPT_NAME"] == seen["PHP_SELF"] == "/vars.php"
    assert seen["DOCUMENT_ROOT"] == www
    assert seen["REQUEST_URI"] == "/vars.php?a=1&b=two%20words"
    assert seen["QUERY_STRING"] == "a=1&b=two%20words"
    assert seen["_GET"] == {"a": "1", "b": "two words"}
    assert seen["REQUEST_METHOD"] == "GET" and seen["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert seen["SERVER_NAME"] == "example.com" and seen["HTTP_HOST"] == "example.com:8080"
    assert (seen["SERVER_ADDR"], seen["SERVER_PORT"]) == ("127.0.0.1", str(server.port))
    assert seen["REMOTE_ADDR"] == "127.0.0.1" and int(seen["REMOTE_PORT"]) > 0
    assert seen["HTTP_X_CUSTOM"] == "yes" and seen["HTTP_COOKIE"] == "c=3"
    assert seen["HTTPS"] is None and seen["GATEWAY_INTERFACE"] == "CGI/1.1"
    assert seen["ini_memory_limit"] == "77M"  # options.admin
    assert seen["env_APP_MODE"] == "test"  # environment
    _, _, body = request(server, "GET", "/sub/page.php/more/path")
    assert body == b"page /sub/page.php info /more/path\n"


@pytest.mark.parametrize("size", [0, 5, 70_000, 3 * 1024 * 1024])
def test_a_post_body_comes_back_whole(server: Server, size: int) -> None:
    body = os.urandom(size)
    status, _, back = request(
        server, "POST", "/echo.php", body, {"Content-Type": "application/octet-stream"}
    )
    assert status == 200 and hashlib.sha256(back).digest() == hashlib.sha256(body).digest()


def test_a_chunked_post_body_comes_back_whole(server: Server) -> None:
    pieces = [os.urandom(n) for n in (1, 1000, 65536, 300_000, 7)]

    def chunks() -> Iterator[bytes]:
        yield from pieces

    status, _, back = request(
        server,
        "POST",
        "/echo.php",
        chunks(),
        {"Transfer-Encoding": "chunked", "Content-Type": "application/octet-stream"},
    )
    assert status == 200 and back == b"".join(pieces)
    seen = json.loads(
        request(server, "POST", "/vars.php", iter([b"ab", b"c"]), {"Transfer-Encoding": "chunked"})[
            2
        ]
    )
    assert seen["CONTENT_LENGTH"] == "3"  # php reads what it says: known once the body is whole


def test_expect_continue_is_answered_then_the_body_streams(server: Server) -> None:
    body = b"x" * 100_000
    with server.connect() as sock:
        sock.sendall(
            b"POST /echo.php HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
            b"Expect: 100-continue\r\nConnection: close\r\n\r\n"
        )
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        status, _, back = read_response(sock)
    assert (status, back) == (200, body)


def test_a_header_and_a_status_set_by_php(server: Server) -> None:
    status, headers, body = request(server, "GET", "/header.php")
    assert (status, body) == (201, b"created\n")
    assert headers["x-from-php"] == "set by php" and headers["cache-control"] == "no-store"
    answer = raw(server, b"GET /header.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.count(b"\r\nSet-Cookie: ") == 2  # each its own line
    assert b"\r\nStatus:" not in answer


def test_a_redirect_by_location(server: Server) -> None:
    status, headers, _ = request(server, "GET", "/redirect.php")
    assert (status, headers["location"]) == (302, "/index.php?from=redirect")


def test_scripts_chosen_by_path_index_script_and_targets(server: Server) -> None:
    assert request(server, "GET", "/sub/")[2] == b"sub index at /sub/index.php\n"
    status, headers, _ = request(server, "GET", "/sub?x=1")
    assert (status, headers["location"]) == (301, "/sub/?x=1")
    assert request(server, "GET", "/missing.php")[0] == 404
    assert request(server, "GET", "/vars.json")[0] == 404  # not a script
    # the "front" target's script answers every request
    for path in ("/fixed/", "/fixed/a/b?c=d", "/fixed/nothing.php"):
        assert request(server, "GET", path)[2] == f"front controller for {path}\n".encode()
    # the "other" target's index (the main target's would be index.php)
    assert request(server, "GET", "/other/")[2] == b"page /other/page.php info \n"


@pytest.mark.parametrize("target", [*TRAVERSALS, b"/out.php", b"/sub/up.php"])
def test_a_traversal_is_refused_never_run(server: Server, target: bytes) -> None:
    target = target.replace(b"secret.txt", b"secret.php")
    answer = raw(server, b"GET " + target + b" HTTP/1.1\r\nHost: example.com\r\n\r\n")
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    assert status in (400, 403, 404), answer[:200]
    assert SECRET not in answer


def test_a_slow_script_is_answered_504(server: Server) -> None:
    started = time.monotonic()
    status, _, _ = request(server, "GET", "/slow.php?seconds=4")
    assert status == 504 and 1.4 < time.monotonic() - started < 4
    server.wait_log(r"GET /slow.php\?seconds=4: php application 'site': it sent nothing for 1.5 s")
    assert request(server, "GET", "/")[2] == b"Hello, Unit!\n"  # and the next is served


def test_a_large_answer_is_streamed_to_a_slow_reader(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(b"GET /big.php?pieces=256 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        # not read for longer than the read timeout: 16 MiB fill the socket's buffers and
        # corral's, php-fpm is not read meanwhile, and the wait is the client's, not php's
        time.sleep(2)
        answer = read_all(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert body.endswith(b"0\r\n\r\n") and len(body) > 256 * 65536


def accepted_by_php(path: str) -> set[str]:
    """The inodes of the connections php-fpm accepted on ``path`` and holds open (the
    listening socket, flagged __SO_ACCEPTCON, left out)."""
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in table if line.rstrip().endswith(" " + path)]
    return {row[6] for row in rows if row[3] != "00010000" and row[6] != "0"}  # (0: going)


def test_keep_alive_to_the_client_and_to_php_fpm(server: Server) -> None:
    _, fpm_socket = fpm_ready(server)
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    kept: set[str] = set()
    for number in range(20):
        conn.request("GET", "/vars.php")
        answer = conn.getresponse()
        assert answer.status == 200 and json.loads(answer.read())["SCRIPT_NAME"] == "/vars.php"
        if number == 0:
            kept = accepted_by_php(fpm_socket)
    conn.close()
    # the connection of the first request (FCGI_KEEP_CONN) served the nineteen others
    assert kept and kept <= accepted_by_php(fpm_socket)


@pytest.fixture(scope="module")
def alone(each_core: str, root: Path) -> Iterator[tuple[Server, str]]:
    """Another corral with the same document, which no request reaches php-fpm through
    (no connection to it is kept): php-fpm runs, its socket's path is the tests' to replace."""
    path = root / f"php-alone-{each_core}.json"
    path.write_text(json.dumps(document(root)))
    with Server(f"--config={path}", bind=None) as running:
        yield running, fpm_ready(running)[1]
        assert "Traceback" not in running.stderr, running.stderr


def test_php_fpm_unreachable_is_502(alone: tuple[Server, str]) -> None:
    server, fpm_socket = alone
    Path(fpm_socket).unlink()  # php-fpm runs on, none can connect to it
    answer = raw(server, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway\r\n")
    assert b"Connection: close" not in answer.partition(b"\r\n\r\n")[0]  # the client may go on
    server.wait_log(r"GET /: php application 'site': cannot connect to unix:.*: answered 502")


def serve_garbage(path: str, answer: bytes, stop: threading.Event) -> threading.Thread:
    """A server at php-fpm's socket that answers every connection ``answer``."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)
    listener.settimeout(0.1)

    def run() -> None:
        with listener:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.settimeout(2)
                    conn.recv(65536)
                    conn.sendall(answer)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def stdout_record(content: bytes) -> bytes:
    return bytes([1, 6, 0, 1, len(content) >> 8, len(content) & 0xFF, 0, 0]) + content


@pytest.mark.parametrize(
    ("answer", "logged"),
    [
        (b"HTTP/1.1 200 OK\r\n\r\nhello", "answered what is not FastCGI"),
        (stdout_record(b"X-A: a\rInjected: yes\r\n\r\nbody"), "control character"),
        (stdout_record(b"Status: 200\r\n"), "closed the connection before its answer ended"),
    ],
)
def test_an_answer_that_is_not_fastcgi_or_cgi_is_502(
    alone: tuple[Server, str], answer: bytes, logged: str
) -> None:
    server, path = alone
    Path(path).unlink(missing_ok=True)  # php-fpm's socket: this server's instead
    stop = threading.Event()
    thread = serve_garbage(path, answer, stop)
    try:
        got = raw(server, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 502 Bad Gateway\r\n"), got
        assert b"Injected" not in got and b"hello" not in got
        server.wait_log(logged)
    finally:
        stop.set()
        thread.join()
        Path(path).unlink(missing_ok=True)


def test_a_php_document_checks_as_unit_would(root: Path) -> None:
    doc = validate_document(document(root))
    assert msgspec.json.decode(msgspec.json.encode(doc), type=type(doc)) == doc


def test_requests_past_the_connections_wait_their_turn_in_corral(root: Path) -> None:
    """php-fpm of 2 children: a worker opens 2 connections to it and no more; 6 requests at
    once are all answered, in 3 turns, none waiting past the read timeout."""
    doc = document(root)
    doc["applications"]["site"]["processes"] = 2
    doc["settings"]["fastcgi_read_timeout"] = 10
    path = root / "php-two.json"
    path.write_text(json.dumps(doc))
    with Server(f"--config={path}", bind=None) as server:
        _, fpm_socket = fpm_ready(server)
        answers: list[int] = []
        opened: set[str] = set()

        def ask() -> None:
            answers.append(request(server, "GET", "/slow.php?seconds=1")[0])

        threads = [threading.Thread(target=ask) for _ in range(6)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            opened |= accepted_by_php(fpm_socket)
            time.sleep(0.05)
        took = time.monotonic() - started
    assert answers == [200] * 6
    assert 2.9 < took < 9, took  # three turns of one second
    assert len(opened) <= 2, opened  # the same two connections all along


def test_php_fpm_killed_is_restarted_under_kept_connections(root: Path) -> None:
    """php-fpm killed (its master and children) is started again by corral's master, at the
    same socket, and the connections a worker kept to the dead one are replaced (a kept
    connection found closed: the request sent on a new one); the crash is an event and a
    restart in /status, as a worker's."""
    from tests.integration.control import Control, short_dir

    doc = document(root)
    doc["applications"]["site"]["min_worker_lifetime"] = 0  # restarted at once, not backed off
    with short_dir() as directory:
        state = directory / "state"
        state.mkdir(mode=0o700)
        (state / "conf.json").write_text(json.dumps(doc))
        with Server(f"--state-dir={state}", bind=None) as server:
            pid, fpm_socket = fpm_ready(server)
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            for _ in range(3):
                conn.request("GET", "/")
                assert conn.getresponse().read() == b"Hello, Unit!\n"
            kill_php_fpm(pid)
            server.wait_log(rf"site process 0 \(pid {pid}\) exited: signal SIGKILL .*restarting it")
            again, at = fpm_ready(server, count=2)
            assert again != pid and at == fpm_socket
            for _ in range(3):  # on the same client connection, the worker's kept one dead
                conn.request("GET", "/")
                assert conn.getresponse().read() == b"Hello, Unit!\n"
            conn.close()
            control = Control.of(server)
            site = control.get("/status/applications/site").json
            assert site["external"]["restarts"] == 1 and site["processes"]["running"] == 1
            events = control.get("/status/events").json
            assert any(e["kind"] == "crash" and e["pid"] == pid for e in events), events
            assert "Traceback" not in server.stderr, server.stderr


def test_head_gets_the_head_of_get(server: Server) -> None:
    answer = raw(server, b"HEAD /header.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 201 ") and b"\r\nX-From-Php: set by php" in head
    assert body == b""


def test_children_replaced_after_each_request_behind_kept_connections(root: Path) -> None:
    """Unit's limits.requests is php-fpm's pm.max_requests: with 1, every child exits after
    its request and closes the connection corral keeps, often as the next request goes on
    it; every request is answered, each by a new child."""
    doc = document(root)
    doc["applications"]["site"]["limits"] = {"requests": 1}
    doc["applications"]["site"]["processes"] = 2
    path = root / "php-max-requests.json"
    path.write_text(json.dumps(doc))
    with Server(f"--config={path}", bind=None) as server:
        fpm_ready(server)
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        pids = set()
        for _ in range(40):
            conn.request("GET", "/pid.php")
            answer = conn.getresponse()
            assert answer.status == 200
            pids.add(answer.read())
        conn.close()
        assert len(pids) == 40  # a child a request
        assert "answered 502" not in server.stderr and "Traceback" not in server.stderr, (
            server.stderr
        )


def test_a_php_application_changed_through_the_control_api(root: Path) -> None:
    """Unit's way: the document PUT on the control socket, then one key changed; php-fpm is
    started with it, and replaced on the change (the old one serving until the new one
    answers), the workers that reach it follow (their pool restarts when a php application
    changes); php-fpm is in /status as an external application's pool is."""
    from tests.integration.control import Control, ctl, listening_port, short_dir

    doc = document(root)
    with short_dir() as directory:
        server = Server(f"--state-dir={directory / 'state'}", bind=None, wait_ready=False)
        with server:
            server.wait_log("no application configured: waiting for the control API")
            control = Control.of(server)
            answer = control.put("/config", doc)
            assert answer.status == 200, answer.raw
            server.host, server.port = "127.0.0.1", listening_port(server, "127.0.0.1:0")
            first, _ = fpm_ready(server)
            assert request(server, "GET", "/anything")[0] == 404
            answer = control.put("/config/applications/site/targets/main/script", "front.php")
            assert answer.status == 200, answer.raw
            body = request(server, "GET", "/anything")[2]
            assert body == b"front controller for /anything\n"
            second, at = fpm_ready(server, count=2)
            server.wait_log(rf"site process 0 \(pid {first}\) exited")  # the replaced one
            site = control.get("/status/applications/site?workers=1").json
            assert site["processes"]["running"] == 1, site
            assert site["external"]["addresses"] == ["unix:" + at]
            assert [row["pid"] for row in site["workers"]] == [second]
            metrics = control.get("/metrics").raw.decode()
            assert 'corral_processes{application="site",state="running"} 1' in metrics
            top = ctl("--socket", control.address, "top", "--once")
            assert top.returncode == 0, top.stderr
            assert re.search(r"^site\s+1\s", top.stdout, re.M), top.stdout
            assert str(second) in top.stdout


def test_clients_that_go_while_php_works_leave_the_worker_serving(server: Server) -> None:
    """More clients than the worker's connections to php-fpm leave while php works (their
    requests sent, waiting for a connection, or being answered): the next requests are
    answered, each abandoned FastCGI request is dropped without a trace in the log."""
    for _ in range(6):
        sock = server.connect()
        sock.sendall(b"GET /slow.php?seconds=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.close()
    for _ in range(3):
        assert request(server, "GET", "/")[2] == b"Hello, Unit!\n"
    assert "Traceback" not in server.stderr and "slow.php?seconds=1: php" not in server.stderr


def test_php_runs_as_the_application_user() -> None:
    """``user`` and ``group``: php-fpm's children run as them and its socket is theirs; a
    worker running as root reaches it."""
    if os.geteuid() != 0:
        pytest.skip("needs root: php-fpm changes its children's user")
    top = Path(tempfile.mkdtemp(prefix="corral-php-", dir="/tmp"))  # (pytest's: root's alone)
    try:
        www = top / "www"
        shutil.copytree(APPS / "php", www)
        top.chmod(0o755)
        doc = {
            "listeners": {"127.0.0.1:0": {"pass": "applications/site"}},
            "applications": {
                "site": {"type": "php", "root": str(www), "user": "nobody", "group": "nogroup"}
            },
        }
        path = top / "php-user.json"
        path.write_text(json.dumps(doc))
        with Server(f"--config={path}", bind=None) as server:
            pid, fpm_socket = fpm_ready(server)
            assert request(server, "GET", "/whoami.php")[2] == b"nobody"
            owner = Path(fpm_socket).stat()
            assert (owner.st_uid, owner.st_gid) == (65534, 65534)  # nobody, nogroup
            assert os.stat(f"/proc/{pid}").st_uid == 0  # php-fpm's master: root, as corral
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_more_workers_than_php_children_do_not_keep_connections(root: Path) -> None:
    """Two workers (a Python application's) reach php-fpm of one child: a connection one of
    them kept would hold the child for ever, the other's requests waiting behind it; so
    none is kept (FCGI_KEEP_CONN not asked) and every request is answered."""
    doc = document(root)
    doc["applications"]["site"]["processes"] = 1
    doc["applications"]["py"] = {"module": "basic", "processes": 2}
    doc["routes"] = [
        {"match": {"uri": "/py"}, "action": {"pass": "applications/py"}},
        *doc["routes"],
    ]
    doc["settings"]["fastcgi_read_timeout"] = 3
    path = root / "php-two-workers.json"
    path.write_text(json.dumps(doc))
    with Server(f"--config={path}", bind=None) as server:
        fpm_ready(server)
        pids = set()
        for _ in range(16):  # a new connection each: both workers take some
            status, _, body = request(server, "GET", "/pid.php")
            assert status == 200, body
            pids.add(body)
        assert len(pids) == 1  # the one child served them all
        assert "answered 504" not in server.stderr


def test_a_draining_worker_lets_go_of_php_fpm(root: Path) -> None:
    """A change's old worker drains while its client's idle connection may stay for
    drain_idle_timeout: its connection to php-fpm (of one child, which the change leaves
    running) is closed at once, not kept till it exits, so that the new worker's requests are
    answered meanwhile."""
    from tests.integration.control import Control, short_dir

    doc = document(root)
    doc["applications"]["site"]["processes"] = 1
    doc["settings"].update(fastcgi_read_timeout=20, drain_idle_timeout=8, http={"idle_timeout": 10})
    with short_dir() as directory:
        state = directory / "state"
        state.mkdir(mode=0o700)
        (state / "conf.json").write_text(json.dumps(doc))
        with Server(f"--state-dir={state}", bind=None) as server:
            pid, _ = fpm_ready(server)
            kept = http.client.HTTPConnection(server.host, server.port, timeout=10)
            kept.request("GET", "/")
            assert kept.getresponse().read() == b"Hello, Unit!\n"  # (and stays open, idle)
            # a setting the workers hold: they are replaced, php-fpm is not
            answer = Control.of(server).put("/config/settings/fastcgi_read_timeout", 19)
            assert answer.status == 200, answer.raw
            started = time.monotonic()
            assert request(server, "GET", "/")[2] == b"Hello, Unit!\n"
            assert time.monotonic() - started < 4  # not drain_idle_timeout's 8 s
            kept.close()
            assert f"site process 0 (pid {pid}) exited" not in server.stderr


def test_php_fpm_and_its_children_go_with_a_master_killed_outright(root: Path) -> None:
    """corral's master killed alone (SIGKILL, not its process group): php-fpm gets SIGTERM
    (its death signal, not SIGKILL, which would leave its children running), and its
    children go with it."""
    from tests.integration.supervision import alive

    path = root / "php-master-killed.json"
    path.write_text(json.dumps(document(root)))
    with Server(f"--config={path}", bind=None) as server:
        pid, _ = fpm_ready(server)
        found = children(pid)
        assert len(found) == 4  # "processes": 4
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(5)
        try:
            wait_for(lambda: not any(alive(p) for p in (pid, *found)), timeout=10)
        finally:  # (those left would hold the server's output open)
            for left in (pid, *found):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(left, signal.SIGKILL)

"""Rolling restarts behind a real load balancer lose nothing (issue 36, point 3).

Three corral instances behind HAProxy, which checks ``GET /readyz`` every 100 ms, takes a
server out at the first failed check and sends no request twice (``retries 0``, no
redispatch): each instance is stopped with TERM and started again in turn while client
threads send GETs and POSTs through HAProxy on kept connections. With a shutdown delay longer
than HAProxy's check no request fails; with none, some do (what the delay is for, and proof
that the test sees failures). The same with nginx as the balancer (upstream keep-alive).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.haproxy import running_haproxy
from tests.integration.nginx import free_port, running_nginx
from tests.integration.server import Server, wait_for

APP = "health_apps:application"


class Load:
    """Client threads sending GET / and POST /echo (2 KiB) through ``port``, on kept
    connections unless ``keep`` is False, as fast as answers come; every answer checked,
    every failure kept."""

    def __init__(self, port: int, threads: int = 4, keep: bool = True) -> None:
        self.port = port
        self.keep = keep  # False: a connection per request (a balancer that reloads closes
        # its clients' idle kept connections, a race of its own with their next request)
        self.sent = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(threads)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _run(self, index: int) -> None:
        body = os.urandom(2048)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        n = 0
        while not self._stop.is_set():
            n += 1
            post = (n + index) % 2 == 0
            try:
                if post:
                    conn.request("POST", "/echo", body, {"Content-Type": "application/x"})
                else:
                    conn.request("GET", "/")
                answer = conn.getresponse()
                got = answer.read()
                ok = answer.status == 200 and got == (body if post else b"app /")
                what = f"{answer.status} {got[:60]!r}"
            except (OSError, http.client.HTTPException) as exc:
                ok, what = False, repr(exc)
            with self._lock:
                self.sent += 1
                if not ok:
                    self.failures.append(f"{'POST' if post else 'GET'}: {what}")
            if not (ok and self.keep) or answer.getheader("connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        conn.close()


@contextlib.contextmanager
def instances(ports: list[int], *args: str) -> Iterator[list[Server]]:
    servers = [Server(APP, "--health", *args, bind=f"127.0.0.1:{port}") for port in ports]
    try:
        yield servers
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.kill()


def restart_each(
    servers: list[Server], *args: str, tell: Callable[[int, bool], None] | None = None
) -> None:
    """Each instance in turn: TERM, its exit awaited, a new one on its port; then time for
    the balancer to see it up before the next goes. ``tell(port, up)``: the deploy tool tells
    the balancer, before the TERM and once the new instance is ready."""
    for i, server in enumerate(servers):
        port = server.port
        if tell is not None:
            tell(port, False)
        assert server.stop() == 0, server.stderr[-2000:]
        servers[i] = Server(APP, "--health", *args, bind=f"127.0.0.1:{port}")
        if tell is not None:
            tell(port, True)
        time.sleep(0.6)


def _ports() -> list[int]:
    return [free_port() for _ in range(3)]


@pytest.mark.parametrize(("delay", "lossless"), [("1", True), ("0", False)])
def test_a_rolling_restart_behind_haproxy(tmp_path: Path, delay: str, lossless: bool) -> None:
    args = (f"--shutdown-delay={delay}",)
    ports = _ports()
    with instances(ports, *args) as servers, running_haproxy(tmp_path, ports) as front:
        time.sleep(0.5)  # every server seen up (rise 2 x 100 ms)
        with Load(front) as load:
            time.sleep(0.5)
            restart_each(servers, *args)
            time.sleep(0.5)
        assert load.sent > 300, load.sent  # the load ran throughout
        if lossless:
            assert load.failures == [], (len(load.failures), load.sent, load.failures[:5])
        else:  # without the delay HAProxy still sends to an instance that stopped accepting
            assert load.failures, load.sent


def test_an_upgrade_of_each_behind_haproxy_loses_nothing(tmp_path: Path) -> None:
    """USR2: a new master takes each instance's listeners over, the old one's workers retire
    as a reload's do (no delay, readiness kept: the listeners never close)."""
    ports = _ports()
    pidfiles = [tmp_path / f"corral-{port}.pid" for port in ports]
    servers = [
        Server(APP, "--health", "--shutdown-delay=1", f"--pid={pidfile}", bind=f"127.0.0.1:{port}")
        for pidfile, port in zip(pidfiles, ports, strict=True)
    ]
    masters: list[int] = []
    try:
        with running_haproxy(tmp_path, ports) as front:
            time.sleep(0.5)
            with Load(front) as load:
                time.sleep(0.5)
                for server, pidfile in zip(servers, pidfiles, strict=True):
                    old = server.proc.pid
                    server.send(signal.SIGUSR2)
                    masters.append(
                        wait_for(lambda f=pidfile, o=old: _pid(f) not in (0, o) and _pid(f), 15)
                    )
                    # (its pipes stay open: the new master inherited them, closed below)
                    assert server.proc.wait(timeout=30) == 0, server.stderr[-2000:]
                    time.sleep(0.6)
                time.sleep(0.5)
        assert load.sent > 300, load.sent
        assert load.failures == [], (len(load.failures), load.sent, load.failures[:5])
    finally:
        for pid in masters:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in masters:
            wait_for(lambda p=pid: not _alive(p), 15)
        for server in servers:
            with contextlib.suppress(Exception):
                server.kill()


def _pid(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_NGINX_UPSTREAM = """\
        location / {{
            proxy_pass http://corral;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
"""


def test_a_rolling_restart_behind_nginx_with_upstream_keepalive(tmp_path: Path) -> None:
    """nginx (without the commercial version's active checks) is told by the deploy tool:
    the instance marked ``down`` and nginx reloaded, then TERM. The shutdown delay covers
    what nginx's old workers still send it after the reload, on their kept connections."""
    args = ("--shutdown-delay=1",)
    ports = _ports()
    conf = tmp_path / "nginx.conf"

    def upstream(down: set[int]) -> str:
        servers = "".join(
            f"        server 127.0.0.1:{port}{' down' if port in down else ''};\n" for port in ports
        )
        return "upstream corral {\n" + servers + "        keepalive 16;\n    }\n"

    def tell(port: int, up: bool) -> None:
        text = conf.read_text()
        line = f"server 127.0.0.1:{port}"
        conf.write_text(
            text.replace(f"{line};", f"{line} down;")
            if not up
            else text.replace(f"{line} down;", f"{line};")
        )
        os.kill(int((tmp_path / "nginx.pid").read_text()), signal.SIGHUP)
        time.sleep(0.3)  # the new workers take over, the old ones finish what they hold

    with (
        instances(ports, *args) as servers,
        running_nginx(tmp_path, _NGINX_UPSTREAM.format(), http=upstream(set())) as front,
    ):
        with Load(front, keep=False) as load:
            time.sleep(0.5)
            restart_each(servers, *args, tell=tell)
            time.sleep(0.5)
        assert load.sent > 300, load.sent
        assert load.failures == [], (len(load.failures), load.sent, load.failures[:5])

"""Requests per client, one count across a pool's workers (issue 34, point 1): nginx's
``limit_req`` as ``--limit-rate``/``--limit-burst``/``--limit-nodelay`` and a listener's
``rate_limit``, through real corral processes and real sockets, on both cores."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time

import pytest

from tests.integration.control import Control, short_dir
from tests.integration.server import Server, read_response, run_cli, wait_for

pytestmark = pytest.mark.usefixtures("each_core")


def get(server: Server, path: str = "/", headers: str = "") -> tuple[int, dict[str, str]]:
    """One request on a new connection (so that the pool's workers share the client)."""
    with server.connect() as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        status, fields, _ = read_response(sock)
        return status, fields


def paced(server: Server, per_second: float, seconds: float) -> list[int]:
    """The statuses of requests sent at ``per_second`` for ``seconds``."""
    statuses = []
    start = time.monotonic()
    for n in range(int(per_second * seconds)):
        delay = start + n / per_second - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        statuses.append(get(server)[0])
    return statuses


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.wallclock
def test_a_client_at_twice_its_rate_through_four_workers_gets_its_rate() -> None:
    # a burst of 2 absorbs the client's own jitter (without one, nginx's arithmetic and
    # corral's space the requests strictly: a request a little early is refused)
    argv = ["--limit-rate", "20r/s", "--limit-burst", "2", "--limit-nodelay"]
    with Server("basic:application", *argv, workers=4) as server:
        statuses = paced(server, 40, 4.0)  # twice the rate for 4 s
        admitted = statuses.count(200)
        # the rate times the time, and the full bucket the first request finds
        assert abs(admitted - 83) <= 8, statuses
        assert set(statuses) == {200, 429}
        status, fields = get(server)
        assert (status, fields["retry-after"]) == (429, "1")


@pytest.mark.wallclock
def test_a_client_inside_its_rate_is_never_refused() -> None:
    argv = ["--limit-rate", "20r/s", "--limit-burst", "2"]
    with Server("basic:application", *argv, workers=4) as server:
        assert set(paced(server, 10, 3.0)) == {200}


@pytest.mark.wallclock
@pytest.mark.parametrize(("flags", "latest"), [((), 0.25), (("--limit-nodelay",), 0.0)])
def test_the_burst_waits_its_turn_unless_nodelay(flags: tuple[str, ...], latest: float) -> None:
    argv = ["--limit-rate", "10r/s", "--limit-burst", "3", *flags]
    with Server("basic:application", *argv, workers=2) as server:
        took: list[tuple[int, float]] = []
        start = time.monotonic()

        def one() -> None:
            status, _ = get(server)
            took.append((status, time.monotonic() - start))

        threads = [threading.Thread(target=one) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # one at once and the burst of three; the fifth finds the burst full
        assert sorted(status for status, _ in took) == [200] * 4 + [429]
        # without nodelay the last of the burst waits three intervals (0.3 s)
        assert latest <= max(seconds for status, seconds in took if status == 200) < latest + 0.25


def test_ten_thousand_clients_leave_memory_where_it_was() -> None:
    argv = ["--limit-rate", "1r/m", "--limit-key", "$header_x_client"]
    with Server("basic:application", *argv, "--limit-table-size", "65536") as server:
        (worker,) = server.worker_pids()

        def clients(first: int) -> None:
            with server.connect() as sock:
                for n in range(first, first + 10_000):
                    sock.sendall(f"GET / HTTP/1.1\r\nHost: x\r\nX-Client: c{n}\r\n\r\n".encode())
                    assert read_response(sock)[0] == 200  # each a new client: a full bucket

        clients(0)
        before = rss_kib(worker)
        clients(10_000)
        assert rss_kib(worker) - before < 512
        # the table forgot the oldest: a client of the first ten thousand is new again
        assert get(server, headers="X-Client: c0\r\n")[0] == 200
        assert get(server, headers="X-Client: c0\r\n")[0] == 429


@pytest.mark.wallclock
def test_a_worker_killed_under_load_leaves_the_count_usable() -> None:
    argv = ["--limit-rate", "20r/s", "--limit-burst", "2", "--limit-nodelay"]
    with Server("basic:application", *argv, workers=2) as server:
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                with contextlib.suppress(AssertionError, OSError):  # its worker was killed
                    get(server)

        threads = [threading.Thread(target=load) for _ in range(4)]
        for thread in threads:
            thread.start()
        try:
            for _ in range(3):
                time.sleep(0.3)
                os.kill(server.worker_pids()[0], signal.SIGKILL)
                server.wait_log(r"worker \d+ ready", count=2 + _ + 1)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        time.sleep(1.0)  # a full bucket again
        assert abs(paced(server, 40, 3.0).count(200) - 63) <= 6


LIMIT = {"rate": "600r/m", "burst": 5, "nodelay": True}


@pytest.mark.parametrize("where", ["listener", "step"])
def test_a_handed_off_request_is_counted_once(tmp_path, where: str) -> None:
    listener: dict = {"pass": "routes"}
    to_b: dict = {"pass": "applications/b"}
    if where == "listener":
        listener["rate_limit"] = LIMIT
    else:
        to_b["rate_limit"] = LIMIT
    document = {
        "listeners": {"127.0.0.1:0": listener},
        "routes": [
            {"match": {"uri": "/b"}, "action": to_b},
            {"action": {"pass": "applications/a"}},
        ],
        "applications": {
            "a": {"module": "basic", "callable": "application"},
            "b": {"module": "basic", "callable": "application"},
        },
    }
    path = tmp_path / "site.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server:
        # the burst (5) and the first at once: 6, wherever each is served
        statuses = [get(server, "/b")[0] for _ in range(8)]
        assert statuses == [200] * 6 + [429] * 2
        # a step's limit counts its step's requests only
        assert get(server, "/")[0] == (429 if where == "listener" else 200)


def test_a_steps_limit_on_a_return_and_a_share(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("a")
    once = {"rate": "1r/m", "status": 503}
    document = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [
            {"match": {"uri": "/r"}, "action": {"return": 204, "rate_limit": once}},
            {"action": {"share": f"{tmp_path}$uri", "rate_limit": once}},
        ],
        "applications": {},
    }
    path = tmp_path / "site.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server:
        assert [get(server, "/r")[0] for _ in range(2)] == [204, 503]
        assert get(server, "/a.txt")[0] == 200  # each step its own count
        status, fields = get(server, "/a.txt")
        assert (status, fields["retry-after"]) == (503, "60")


def test_an_unknown_key_is_one_line() -> None:
    result = run_cli("basic:application", "--limit-rate", "10r/s", "--limit-key", "$nothing")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("corral: error: --limit-key: unknown variable $nothing")


def test_refusals_are_counted_in_metrics_and_named_in_the_access_log(tmp_path) -> None:
    log = tmp_path / "access.log"
    argv = [
        "--limit-rate",
        "1r/m",
        f"--access-logfile={log}",
        "--access-logformat=$status $refusal",
    ]
    with short_dir() as directory:
        argv.append(f"--state-dir={directory / 'state'}")
        with Server("basic:application", *argv, workers=2) as server:
            assert [get(server)[0] for _ in range(5)] == [200] + [429] * 4
            metrics = Control.of(server).get("/metrics").raw.decode()
            listener = "127.0.0.1:0"  # as the document names it
            assert (
                f'corral_requests_refused_total{{reason="rate_limit",listener="{listener}"}} 4'
                in (metrics)
            )
            wait_for(lambda: log.read_text().count("\n") == 5)
            lines = sorted(log.read_text().splitlines())  # (two workers write it)
            assert lines == ["200 -"] + ["429 rate_limit"] * 4

"""Supervision of ASGI applications (issue 11, point 5): ``--request-timeout`` cancels the
request's task (504, its stack logged), a worker whose loop an application blocks is
replaced with its pending tasks' stacks in the log, and recycling counts ASGI requests.
Applications: tests/integration/apps/asgi_supervision_apps.py."""

from __future__ import annotations

import time

import pytest

from tests.integration.server import Server, read_all, read_response, wait_for
from tests.integration.sockets import unread_by_server


def get(server: Server, path: str) -> tuple[int, dict[str, str], bytes]:
    with server.connect(timeout=15) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        return read_response(sock)


def pid_of(server: Server) -> int:
    return int(get(server, "/pid")[2])


@pytest.mark.wallclock
def test_request_timeout_cancels_the_task_answers_504_and_logs_its_stack() -> None:
    with Server("asgi_supervision_apps:app", "--request-timeout", "1") as server:
        pid = pid_of(server)
        started = time.monotonic()
        status, headers, _ = get(server, "/slow")
        assert status == 504 and headers["connection"] == "close"
        assert 1.0 <= time.monotonic() - started < 2.0
        server.wait_log(
            r"request timeout: GET /slow has run [\d.]+s in the application \(request_timeout "
            r"1s\); cancelling its task, at:\n(?:  .*\n)*?  File \"[^\"]*asgi_supervision_apps"
            r"\.py\", line \d+, in awaiting_for_ever\n"
        )
        assert "Traceback" not in server.stderr
        assert pid_of(server) == pid  # the worker goes on
        assert get(server, "/")[2] == b"fast"


def test_request_timeout_after_the_answer_began_closes_the_connection() -> None:
    with Server("asgi_supervision_apps:app", "--request-timeout", "1") as server:
        with server.connect(timeout=15) as sock:
            sock.sendall(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
            data = read_all(sock)  # to the close
        assert data.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"first" in data and b"504" not in data and not data.endswith(b"0\r\n\r\n")


def test_the_wait_for_a_slow_clients_body_is_not_the_applications_time() -> None:
    with (
        Server("asgi_supervision_apps:app", "--request-timeout", "1") as server,
        server.connect(timeout=15) as sock,
    ):
        sock.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nab")
        for piece in (b"cd", b"ef"):
            time.sleep(1.0)  # 2 s in all: past the timeout, but the client's time
            sock.sendall(piece)
        assert read_response(sock)[::2] == (200, b"6")


def test_an_application_swallowing_the_cancellation_has_its_connection_closed() -> None:
    with Server(
        "asgi_supervision_apps:app",
        "--request-timeout",
        "1",
        "--request-timeout-grace",
        "1",
        "--graceful-timeout",  # the task runs on: the stop waits for it this long
        "1",
    ) as server:
        with server.connect(timeout=15) as sock:
            sock.sendall(b"GET /swallow HTTP/1.1\r\nHost: t\r\n\r\n")
            status, _, _ = read_response(sock)
        # the cancellation is swallowed: nothing until the grace ends, then the 504 and close
        assert status == 504
        server.wait_log(
            r"still runs 1s after its task was cancelled .*\n(?:  .*\n)*?.* in swallowing"
        )
        assert get(server, "/")[2] == b"fast"
        assert server.stop() == 0  # the worker does not wait for the task: it is left behind
        assert "exiting with application tasks that would not stop" in server.stderr


def test_a_worker_whose_loop_is_blocked_is_replaced_with_its_tasks_stacks_logged() -> None:
    with Server("asgi_supervision_apps:app", "--timeout", "2") as server:
        pid = pid_of(server)
        waiting = server.connect(timeout=15)
        waiting.sendall(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")  # a task left waiting
        wait_for(lambda: unread_by_server(waiting) == 0)  # read: its task runs before the next
        blocking = server.connect(timeout=15)
        blocking.sendall(b"GET /block HTTP/1.1\r\nHost: t\r\n\r\n")
        server.wait_log(r"its pending tasks:\n(?:.*\n)*?.* in awaiting_for_ever", timeout=20)
        server.wait_log(r"timed out: .*; killing it", timeout=20)
        # the main thread's stack (faulthandler) names where the loop is blocked
        assert "blocking_the_loop" in server.stderr
        assert wait_for(lambda: _other_pid(server, pid), timeout=20)
        waiting.close()
        blocking.close()


def _other_pid(server: Server, pid: int) -> bool:
    try:
        return pid_of(server) != pid
    except (OSError, AssertionError):
        return False


def test_max_requests_counts_asgi_requests() -> None:
    with Server(
        "asgi_supervision_apps:app", "--max-requests", "3", "--min-worker-lifetime", "0"
    ) as server:
        first = pid_of(server)
        get(server, "/")
        get(server, "/")  # the third: the worker asks to retire
        server.wait_log(r"recycled: served 3 requests \(max_requests 3\)")
        assert wait_for(lambda: _other_pid(server, first), timeout=20)

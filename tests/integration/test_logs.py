"""Access log, error log, log level and pid file, on real processes."""

from __future__ import annotations

import re
import signal
import socket
import tempfile
import time
from pathlib import Path

import pytest

from tests.integration.server import (
    LISTENING,
    Server,
    read_all,
    read_response,
    run_cli,
    wait_for,
)

SRC = Path(__file__).resolve().parents[2] / "src"

COMBINED = re.compile(
    r"^127\.0\.0\.1 - - \[\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\] "
    r'"GET /path\?q HTTP/1\.1" 200 13 "-" "ua-test/1\.0"$'
)


def exchange(sock: socket.socket, target: str, *headers: str) -> tuple[int, dict, bytes]:
    head = "".join(f"{h}\r\n" for h in headers)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode())
    return read_response(sock)


def lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def file_lines(path: Path) -> list[str]:
    return lines_of(path.read_text()) if path.exists() else []


# -- access log -----------------------------------------------------------------------------


def test_access_log_to_stdout_combined_format():
    with Server("proc_apps", "--access-logfile", "-") as server, server.connect() as sock:
        for _ in range(3):
            status, _, body = exchange(sock, "/path?q", "User-Agent: ua-test/1.0")
            assert (status, body) == (200, b"Hello, world!")
        wait_for(lambda: len(lines_of(server.stdout)) >= 3, timeout=5)
        lines = lines_of(server.stdout)
        assert len(lines) == 3, lines  # one line per request, nothing else
        for line in lines:
            assert COMBINED.match(line), line
        assert server.stop() == 0
    assert len(lines_of(server.stdout)) == 3


def test_access_log_referer_and_no_access_log_by_default():
    with Server("proc_apps") as server, server.connect() as sock:
        assert exchange(sock, "/", "Referer: http://ref/")[0] == 200
        assert server.stop() == 0
    assert server.stdout == ""  # without --access-logfile there is no access log


def test_access_log_to_file(tmp_path):
    path = tmp_path / "access.log"
    with Server("proc_apps", "--access-logfile", str(path)) as server, server.connect() as sock:
        exchange(sock, "/path?q", "User-Agent: ua-test/1.0")
        exchange(sock, "/ctype", "Referer: http://ref/x", "User-Agent: other")
        wait_for(lambda: len(file_lines(path)) >= 2, timeout=5)
        first, second = file_lines(path)
        assert COMBINED.match(first), first
        assert second.endswith('"GET /ctype HTTP/1.1" 200 5 "http://ref/x" "other"'), second
        assert server.stop() == 0
    assert server.stdout == ""
    assert len(file_lines(path)) == 2


def test_access_log_format_tokens(tmp_path):
    path = tmp_path / "access.log"
    fmt = "%(h)s %(r)s %(s)s %(b)s %(D)s %(M)s %({x-test}i)s %({content-type}o)s"
    with (
        Server("proc_apps", "--access-logfile", str(path), "--access-logformat", fmt) as server,
        server.connect() as sock,
    ):
        assert exchange(sock, "/sleep?s=0.2", "X-Test: hello")[2] == b"slept"
        assert exchange(sock, "/ctype")[2] == b"typed"
        wait_for(lambda: len(file_lines(path)) >= 2, timeout=5)
        slow, typed = file_lines(path)
        match = re.fullmatch(
            r"127\.0\.0\.1 GET /sleep\?s=0\.2 HTTP/1\.1 200 5 (\S+) (\S+) hello text/plain", slow
        )
        assert match, slow
        micros, millis = match.groups()
        assert micros.isdigit() and millis.isdigit(), slow
        assert int(micros) >= 200_000
        assert int(millis) >= 200
        assert abs(int(micros) // 1000 - int(millis)) <= 1
        match = re.fullmatch(
            r"127\.0\.0\.1 GET /ctype HTTP/1\.1 200 5 (\d+) (\d+) - text/x-proc", typed
        )
        assert match, typed
        assert int(match.group(1)) < 200_000
        assert server.stop() == 0


@pytest.mark.wallclock
def test_access_log_keeps_up_with_quick_requests():
    count = 100
    with Server("proc_apps", "--access-logfile", "-") as server, server.connect() as sock:
        started = time.monotonic()
        for index in range(count):
            assert exchange(sock, f"/n{index}")[0] == 200
        assert time.monotonic() - started < 5
        wait_for(lambda: len(lines_of(server.stdout)) >= count, timeout=5)
        lines = lines_of(server.stdout)
        assert len(lines) == count
        assert [re.search(r'"GET /n(\d+) ', line).group(1) for line in lines] == [
            str(i) for i in range(count)
        ]
        assert server.stop() == 0


# -- error log ------------------------------------------------------------------------------


def test_error_logfile_receives_listening_line(tmp_path):
    path = tmp_path / "error.log"
    with Server("proc_apps", "--error-logfile", str(path), wait_ready=False) as server:

        def ready():
            if server.proc.poll() is not None:
                raise AssertionError(f"server exited: {server.stderr}")
            text = path.read_text() if path.exists() else ""
            return "worker 0 ready" in text and LISTENING.search(text)

        match = wait_for(ready, timeout=20)
        port = int(match.group(2))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_all(sock).endswith(b"Hello, world!")
        assert server.stop() == 0
    assert "listening on" not in server.stderr
    assert "[INFO]" not in server.stderr
    assert "shutdown complete" in path.read_text()


def test_log_level_warning_hides_info():
    with (
        tempfile.TemporaryDirectory(prefix="corral-", dir="/tmp") as short,
        Server(
            "proc_apps",
            "--log-level",
            "warning",  # after the harness's --log-level debug: the last one wins
            "--threads",
            "2",
            "--graceful-timeout",
            "0.5",
            "-b",
            f"unix:{short}/s.sock",
            bind=None,
            wait_ready=False,
            env={"PROC_FLAGS": short},
        ) as server,
    ):
        path = f"{short}/s.sock"

        def answers():
            if server.proc.poll() is not None:
                raise AssertionError(f"server exited: {server.stderr}")
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(5)
                    sock.connect(path)
                    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    return read_all(sock).endswith(b"Hello, world!")
            except (FileNotFoundError, ConnectionRefusedError):
                return False

        wait_for(answers, timeout=20)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(path)
            sock.sendall(b"GET /sleep?s=5&name=w HTTP/1.1\r\nHost: x\r\n\r\n")
            wait_for(Path(short, "w.started").exists, timeout=10)
            # a request past the graceful timeout makes a WARNING: those still show
            server.send(signal.SIGTERM)
            assert server.proc.wait(10) == 0
        assert server.stop() == 0
    text = server.stderr
    assert "[WARNING]" in text, text
    assert "[INFO]" not in text, text
    assert "[DEBUG]" not in text, text
    assert "listening on" not in text


# -- pid file -------------------------------------------------------------------------------


def test_pid_file_written_and_removed(tmp_path):
    path = tmp_path / "corral.pid"
    with Server("proc_apps", "--pid", str(path)) as server:
        assert int(path.read_text().strip()) == server.proc.pid
        assert server.stop() == 0
    assert not path.exists()


def test_second_server_with_same_pid_file_refuses(tmp_path):
    path = tmp_path / "corral.pid"
    with Server("proc_apps", "--pid", str(path)) as server:
        result = run_cli("proc_apps", "-b", "127.0.0.1:0", "--pid", str(path))
        assert result.returncode == 1, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("corral: error: ")
        assert str(path) in lines[0] and str(server.proc.pid) in lines[0]
        # the running server keeps its pid file
        assert int(path.read_text().strip()) == server.proc.pid
        assert server.stop() == 0
    assert not path.exists()


@pytest.mark.parametrize("level", ["WARNING", "Error"])
def test_log_level_any_case_accepted(level):
    result = run_cli("proc_apps", "--check-config", "--log-level", level)
    assert result.returncode == 0, result.stderr

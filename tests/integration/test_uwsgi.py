"""The uwsgi binary protocol and uWSGI ini files, against real corral processes.

Each server listens for HTTP (the harness learns its port) and for uwsgi packets (TCP here;
unix sockets in test_nginx_uwsgi.py); packets are written by `corral.http.uwsgi.packet`, as
nginx writes them, and the answer is read to the close. The same requests over HTTP are the
reference: what the application sees and answers must match.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import stat
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from corral.http.uwsgi import packet
from tests.integration.server import Server, read_all, run_cli, wait_for
from tests.integration.sockets import send_each_in_its_own_read

UWSGI_LISTENING = re.compile(r"listening on uwsgi://([\d.]+):(\d+)")


def uwsgi_server(*args: str, **kwargs) -> tuple[Server, tuple[str, int]]:
    # 127.0.0.2: a port-0 address is a listener key, which HTTP holds on 127.0.0.1
    server = Server("uwsgi_apps", "--uwsgi-socket", "127.0.0.2:0", *args, **kwargs)
    match = UWSGI_LISTENING.search(server.stderr)
    assert match, server.stderr
    return server, (match[1], int(match[2]))


def exchange(address, data: bytes, *, pieces: int = 1, timeout: float = 10.0) -> bytes:
    """Send ``data`` (in ``pieces``, each read by the server before the next is sent), read the
    answer until the server closes."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(address)
        if family == socket.AF_INET:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        size = max(1, len(data) // pieces)
        parts = [data[start : start + size] for start in range(0, len(data), size)]
        if pieces > 1:
            assert family == socket.AF_INET, "pieces: TCP only (its queues show what was read)"
            send_each_in_its_own_read(sock, parts)
        else:
            sock.sendall(data)
        return read_all(sock)


def parse(answer: bytes, head_only: bool = False) -> tuple[int, dict[str, str], bytes, list[str]]:
    """Status, headers (lower-case names), body and the raw header lines of an HTTP/1.x answer
    read to its end (``head_only``: to a HEAD request)."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    assert sep, answer
    lines = head.decode("latin-1").split("\r\n")
    assert re.fullmatch(r"HTTP/1\.[01] \d{3} .*", lines[0]), lines[0]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers and not head_only:
        assert len(body) == int(headers["content-length"]), (headers, body)
    return int(lines[0].split()[1]), headers, body, lines[1:]


def nginx_vars(method: str, uri: str, host: str = "example.com", **more: str) -> dict[str, str]:
    """The vars nginx's stock uwsgi_params sends, then the request's header fields."""
    path, _, query = uri.partition("?")
    variables = {
        "QUERY_STRING": query,
        "REQUEST_METHOD": method,
        "CONTENT_TYPE": "",
        "CONTENT_LENGTH": "",
        "REQUEST_URI": uri,
        "PATH_INFO": unquote(path, "latin-1"),  # nginx's $document_uri: decoded
        "DOCUMENT_ROOT": "/usr/share/nginx/html",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REQUEST_SCHEME": "http",
        "REMOTE_ADDR": "203.0.113.7",
        "REMOTE_PORT": "50123",
        "SERVER_PORT": "80",
        "SERVER_NAME": host,
        "HTTP_HOST": host,
    }
    variables.update(more)
    return variables


def http_request(server: Server, data: bytes) -> bytes:
    with server.connect() as sock:
        sock.sendall(data)
        return read_all(sock)


# -- what the application sees and answers ----------------------------------------------------


@pytest.mark.parametrize("threads", [1, 4])
def test_a_post_over_uwsgi_is_the_post_over_http(threads):
    server, address = uwsgi_server("--threads", str(threads))
    with server:
        body = b"name=corral&x=%C3%A9"
        answer = exchange(
            address,
            packet(
                nginx_vars(
                    "POST",
                    "/form%20x?a=1&b=2",
                    CONTENT_TYPE="application/x-www-form-urlencoded",
                    CONTENT_LENGTH=str(len(body)),
                    HTTP_USER_AGENT="test/1",
                    HTTP_X_CUSTOM="yes",
                    HTTP_CONTENT_TYPE="application/x-www-form-urlencoded",
                    HTTP_CONTENT_LENGTH=str(len(body)),
                ),
                body,
            ),
        )
        status, headers, data, _ = parse(answer)
        via_uwsgi = json.loads(data)
        over_http = http_request(
            server,
            b"POST /form%%20x?a=1&b=2 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: test/1\r\n"
            b"X-Custom: yes\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%b" % (len(body), body),
        )
        http_status, http_headers, http_data, _ = parse(over_http)
        via_http = json.loads(http_data)
        assert status == http_status == 200
        assert headers.keys() == http_headers.keys()  # the report's length differs: its environ
        for name in ("content-type", "x-app", "set-cookie", "server", "connection"):
            assert headers[name] == http_headers[name], name
        assert via_uwsgi["body"] == via_http["body"] == body.decode()
        assert via_uwsgi["multithread"] is via_http["multithread"] is (threads > 1)
        same = (
            "REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "REQUEST_URI", "RAW_URI",
            "SCRIPT_NAME", "SERVER_PROTOCOL", "CONTENT_TYPE", "CONTENT_LENGTH", "HTTP_HOST",
            "HTTP_USER_AGENT", "HTTP_X_CUSTOM",
        )  # fmt: skip
        for key in same:
            assert via_uwsgi["environ"][key] == via_http["environ"][key], key
        assert via_uwsgi["environ"]["PATH_INFO"] == "/form x"
        # what only the proxy knows: its client and its own name and port
        assert via_uwsgi["environ"]["REMOTE_ADDR"] == "203.0.113.7"
        assert via_uwsgi["environ"]["REMOTE_PORT"] == "50123"
        assert (via_uwsgi["environ"]["SERVER_NAME"], via_uwsgi["environ"]["SERVER_PORT"]) == (
            "example.com",
            "80",
        )
        assert via_uwsgi["scheme"] == via_http["scheme"] == "http"
        assert "Traceback" not in server.stderr


@pytest.mark.parametrize(
    ("extra", "scheme"),
    [({"HTTPS": "on"}, "https"), ({"UWSGI_SCHEME": "https"}, "https"),
     ({"REQUEST_SCHEME": "https"}, "https"), ({}, "http")],
)  # fmt: skip
def test_the_scheme_comes_from_the_packet(extra, scheme):
    server, address = uwsgi_server()
    with server:
        _, _, data, _ = parse(exchange(address, packet(nginx_vars("GET", "/", **extra))))
        assert json.loads(data)["scheme"] == scheme


def test_the_answer_is_plain_http_never_chunked_and_the_connection_closes():
    server, address = uwsgi_server()
    with server:
        status, headers, body, _ = parse(exchange(address, packet(nginx_vars("GET", "/stream"))))
        assert status == 200 and "transfer-encoding" not in headers
        assert headers["connection"] == "close" and "content-length" not in headers
        assert body == b"".join(f"chunk {i}\n".encode() for i in range(5))
        answer = exchange(address, packet(nginx_vars("HEAD", "/")))
        status, headers, body, _ = parse(answer, head_only=True)
        assert status == 200 and body == b"" and int(headers["content-length"]) > 0
        status, _, _, _ = parse(exchange(address, packet(nginx_vars("GET", "/status/418"))))
        assert status == 418


def test_a_packet_sent_byte_by_byte():
    server, address = uwsgi_server()
    with server:
        data = packet(nginx_vars("POST", "/b", CONTENT_LENGTH="5"), b"hello")
        status, _, body, _ = parse(exchange(address, data, pieces=len(data)))
        assert status == 200 and json.loads(body)["body"] == "hello"


def test_the_access_log_names_the_proxys_client():
    server, address = uwsgi_server("--access-logfile", "-")
    with server:
        exchange(address, packet(nginx_vars("GET", "/x?y=1", HTTP_USER_AGENT="agent/9")))
        line = wait_for(lambda: [ln for ln in server.stdout.splitlines() if "/x?y=1" in ln])[0]
        assert line.startswith("203.0.113.7 - - [")
        assert '"GET /x?y=1 HTTP/1.1" 200 ' in line and line.endswith('"agent/9"')


# -- bad packets and limits: answered, closed, the worker serves on ---------------------------


def test_malformed_packets_get_400_and_the_worker_serves_on():
    server, address = uwsgi_server()
    with server:
        pid = server.worker_pids()
        good = packet(nginx_vars("GET", "/"))
        for bad in (
            packet(nginx_vars("GET", "/"), modifier1=30),  # old posts' uwsgi_modifier1 30
            b"\x00\x05\x00\x00" + b"\x09\x00KEY",  # a key of 9 bytes in a 5-byte block
            b"\x00\x05\x00\x00" + b"\x03\x00ABC",  # the block ends inside a value's length
            packet({"PATH_INFO": "/"}),  # no REQUEST_METHOD (no `include uwsgi_params`)
            packet(nginx_vars("POST", "/", CONTENT_LENGTH="1e3")),
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # HTTP on the uwsgi socket
        ):
            status, headers, _, _ = parse(exchange(address, bad))
            assert status == 400 and headers["connection"] == "close", bad
        assert parse(exchange(address, good))[0] == 200
        assert server.worker_pids() == pid
        assert "Traceback" not in server.stderr


def test_limits_are_http_limits():
    server, address = uwsgi_server(
        "--limit-request-head", "600", "--limit-request-body", "10", "--limit-request-fields", "4"
    )
    with server:
        big = nginx_vars("GET", "/", HTTP_COOKIE="c" * 600)
        assert parse(exchange(address, packet(big)))[0] == 431  # buffer-size
        many = nginx_vars("GET", "/", **{f"HTTP_X_{i}": "1" for i in range(5)})
        assert parse(exchange(address, packet(many)))[0] == 431
        large = packet(nginx_vars("POST", "/", CONTENT_LENGTH="11"), b"x" * 11)
        assert parse(exchange(address, large))[0] == 413
        fits = packet(nginx_vars("POST", "/", CONTENT_LENGTH="10"), b"x" * 10)
        assert parse(exchange(address, fits))[0] == 200


@pytest.mark.wallclock
def test_timeouts_are_http_timeouts():
    server, address = uwsgi_server("--header-timeout", "1", "--body-timeout", "1")
    with server:
        started = time.monotonic()
        data = packet(nginx_vars("GET", "/"))
        assert parse(exchange(address, data[: len(data) // 2]))[0] == 408  # the vars never end
        unfinished = packet(nginx_vars("POST", "/", CONTENT_LENGTH="10"), b"abc")
        assert parse(exchange(address, unfinished))[0] == 408  # the body never ends
        assert time.monotonic() - started < 8
        with socket.create_connection(address, timeout=10) as sock:  # nothing sent: closed
            assert read_all(sock) == b""


# -- uWSGI ini files, for real ------------------------------------------------------------------


def test_an_ini_file_serves_with_one_warning_line_per_unsupported_option(tmp_path: Path):
    sock = tmp_path / "app.sock"
    ini = tmp_path / "app.ini"
    ini.write_text(
        "[uwsgi]\nmodule = uwsgi_apps:application\nsocket = %d%n.sock\nchmod-socket = 660\n"
        "http-socket = 127.0.0.1:0\nmaster = true\nprocesses = 2\nthreads = 2\n"
        "stats = 127.0.0.1:9191\nmemory-report = true\nvacuum = true\ndisable-logging = true\n"
    )
    with Server(f"--ini={ini}", bind=None, workers=2) as server:
        assert stat.S_IMODE(sock.stat().st_mode) == 0o660
        status, _, body, _ = parse(exchange(str(sock), packet(nginx_vars("GET", "/u"))))
        assert status == 200 and json.loads(body)["environ"]["PATH_INFO"] == "/u"
        assert json.loads(body)["multithread"] is True
        warnings = [line for line in server.stderr.splitlines() if "warning" in line]
        assert warnings == [
            f"corral: warning: {ini}:9: stats: not supported: the control API's /status and "
            "/metrics (--control unix:PATH)",
            f"corral: warning: {ini}:10: memory-report: not supported: the control API's "
            "/status reports each worker",
        ]
        assert f"listening on unix:{sock} (uwsgi)" in server.stderr
        server.send(signal.SIGHUP)  # read again: the warnings go to the error log this time
        server.wait_log(rf"\[WARNING\] {re.escape(str(ini))}:9: stats: not supported", 20)
        server.wait_log(r"\[WARNING\] .*:10: memory-report: not supported", 20)
        assert server.stop() == 0
    assert not sock.exists()  # vacuum: corral removes its unix sockets


def test_check_config_of_an_ini_file(tmp_path: Path):
    ini = tmp_path / "site.ini"
    ini.write_text("[uwsgi]\nmodule = uwsgi_apps\nsocket = 127.0.0.1:3031\nprocesses = 3\n")
    result = run_cli("-c", str(ini), "--check-config")
    assert result.returncode == 0 and result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["listeners"] == {
        "127.0.0.1:3031": {"pass": "applications/uwsgi_apps", "protocol": "uwsgi"}
    }
    assert doc["applications"]["uwsgi_apps"]["processes"] == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [("[uwsgi]\nmodule = uwsgi_apps\nprocesses = many\n",
      ':3: processes: expected a whole number, got "many"'),
     ("[uwsgi]\nemperor = /etc/uwsgi/vassals\n",
      "bad.ini: emperor: /etc/uwsgi/vassals: not a directory"),
     ("[web]\nmodule = uwsgi_apps\n", "bad.ini: no [uwsgi] section")],
)  # fmt: skip
def test_a_bad_ini_file_is_one_error_line_and_exit_2(tmp_path: Path, text, message):
    ini = tmp_path / "bad.ini"
    ini.write_text(text)
    result = run_cli("--ini", str(ini))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("corral: error: ")
    assert message in result.stderr


def test_a_unit_document_with_a_uwsgi_listener(tmp_path: Path):
    config = tmp_path / "unit.json"
    config.write_text(
        json.dumps(
            {
                "listeners": {
                    "127.0.0.1:0": {"pass": "applications/a"},
                    "127.0.0.2:0": {"pass": "applications/a", "protocol": "uwsgi"},
                },
                "applications": {"a": {"module": "uwsgi_apps"}},
            }
        )
    )
    with Server(f"--config={config}", bind=None) as server:
        match = re.search(r"listening on uwsgi://(127\.0\.0\.2):(\d+)", server.stderr)
        assert match, server.stderr
        status, _, _, _ = parse(exchange((match[1], int(match[2])), packet(nginx_vars("GET", "/"))))
        assert status == 200
    config.write_text(
        json.dumps(
            {
                "listeners": {"127.0.0.1:0": {"pass": "routes", "protocol": "uwsgi"}},
                "routes": [{"action": {"pass": "applications/a"}}],
                "applications": {"a": {"module": "uwsgi_apps"}},
            }
        )
    )
    result = run_cli("-c", str(config), "--check-config")
    assert result.returncode == 2
    assert result.stderr == (
        f'corral: error: {config}: $.listeners["127.0.0.1:0"].pass: a "uwsgi" listener passes '
        'to one application ("applications/NAME"), got "routes"\n'
    )

"""The classic Django-on-nginx setup, run for real: a uWSGI ini, corral, nginx's ``uwsgi_pass``.

The ini is the one the old posts copy (``env``, ``virtualenv``, ``chdir``, ``module``, a unix
``socket`` with ``chmod-socket``, ``master``, ``processes`` with ``idle``, ``uid``/``gid``,
``harakiri``, ``max-requests``, ``logto``, ``buffer-size``, ``post-buffering``, ``vacuum``),
plus an ``http-socket`` on loopback, the reference: the same requests straight to corral over
HTTP must give the application the same environ and body, and the client the same status,
headers and body. nginx is Debian's (nginx-light), started here on an ephemeral loopback port
with its own prefix directory and a generated nginx.conf that includes the stock
``/etc/nginx/uwsgi_params``; its workers run as nobody, so they reach the socket only through
its mode. corral's workers drop to nobody/nogroup, so corral runs from the sandbox virtualenv
(conftest.py), and the application's ``virtualenv`` is one more, made with the same Python.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import pwd
import re
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from tests.integration.nginx import UWSGI_PARAMS, running_nginx
from tests.integration.server import APPS, Server, wait_for
from tests.integration.venvs import make_demo_venv, readable, readable_dir

USER, GROUP = "nobody", "nogroup"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="uid/gid need a master started as root (CI runs as root)"
)


LOCATIONS = """\
        location / {{
            include {params};
            uwsgi_pass unix:{socket};
        }}
        location /tls/ {{
            include {params};
            uwsgi_param HTTPS on;
            uwsgi_pass unix:{socket};
        }}"""


def nginx(prefix: Path, sock: Path) -> contextlib.AbstractContextManager[int]:
    """nginx passing to ``sock`` over uwsgi, its workers as nobody; yields its port."""
    readable_dir(prefix)
    locations = LOCATIONS.format(params=UWSGI_PARAMS, socket=sock)
    return running_nginx(prefix, locations, user=f"{USER} {GROUP}")


def request(port: int, method: str, path: str, body: bytes | None = None, headers=()) -> tuple:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        connection.request(method, path, body=body, headers=dict(headers))
        response = connection.getresponse()
        return response.status, response.getheaders(), response.read()
    finally:
        connection.close()


def header(headers, name: str) -> str | None:
    values = [value for key, value in headers if key.lower() == name]
    return ", ".join(values) if values else None


SEED_INI = """\
# mysite_uwsgi.ini file, as the Django-on-nginx posts write it
[uwsgi]

# Django-related settings
# the base directory (full path)
chdir           = {apps}
# Django's wsgi file
module          = uwsgi_apps:application
# the virtualenv (full path)
virtualenv      = {home}
env             = DJANGO_SETTINGS_MODULE=mysite.settings

# process-related settings
# master
master          = true
# maximum number of worker processes
processes       = 2
idle            = 2
# the socket (use the full path to be safe)
socket          = {run}/mysite.sock
# ... with appropriate permissions
chmod-socket    = 666
# clear environment on exit
vacuum          = true
uid             = {user}
gid             = {group}
harakiri        = 3
max-requests    = 5000
logto           = {logs}/%n.log
buffer-size     = 8192
post-buffering  = 8192
# the reference: the same application over corral's HTTP
http-socket     = 127.0.0.1:0
"""


@pytest.fixture
def setup(sandbox):
    """The sandbox's corral serving the seed ini, and nginx in front of its socket; under the
    sandbox (pytest's own temporary directories are closed to the workers' user)."""
    base = Path(tempfile.mkdtemp(prefix="nginx-uwsgi-", dir=sandbox.root))
    base.chmod(0o755)
    sandbox.add_app(APPS / "uwsgi_apps.py")
    home = make_demo_venv(base / "venv", "1.0")
    readable(home)
    run = readable_dir(base / "run")  # root's: the workers could not create the socket
    logs = readable_dir(base / "logs")
    ini = base / "mysite_uwsgi.ini"
    ini.write_text(
        SEED_INI.format(apps=sandbox.apps, home=home, run=run, logs=logs, user=USER, group=GROUP)
    )
    sock = run / "mysite.sock"
    server = Server(
        f"--ini={ini}",
        bind=None,
        python=sandbox.python,
        cwd=str(sandbox.apps),
        env={"PYTHONPATH": str(sandbox.apps)},
        log_file=logs / "mysite_uwsgi.log",
    )
    with server, nginx(base / "nginx", sock) as port:
        yield server, port, sock, home, logs / "mysite_uwsgi.log"
    assert server.proc.returncode == 0, server.stderr
    assert not sock.exists()  # vacuum: removed at the stop


def both(setup, method: str, path: str, body: bytes | None = None, headers=()):
    """The same request through nginx (uwsgi) and straight to corral (HTTP)."""
    server, port, *_ = setup
    return request(port, method, path, body, headers), request(
        server.port, method, path, body, headers
    )


SAME_ENVIRON = (
    "REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "REQUEST_URI", "RAW_URI", "SCRIPT_NAME",
    "SERVER_PROTOCOL", "CONTENT_TYPE", "CONTENT_LENGTH", "REMOTE_ADDR", "HTTP_USER_AGENT",
    "HTTP_X_CUSTOM", "HTTP_COOKIE", "HTTP_ACCEPT",
)  # fmt: skip
SAME_HEADERS = ("content-type", "x-app", "set-cookie", "server")


def test_environ_body_status_and_headers_come_through_as_over_http(setup):
    server, port, *_ = setup
    headers = [
        ("User-Agent", "classic-post/1.0"),
        ("X-Custom", "yes"),
        ("Cookie", "a=1; b=2"),
        ("Accept", "application/json"),
    ]
    cases = [
        ("GET", "/polls/%C3%A9t%C3%A9/?page=2&q=a+b", None),
        ("POST", "/polls/vote/", b"choice=3&csrf=" + b"x" * 100),
        ("POST", "/upload/", os.urandom(200_000).hex().encode()),  # > post-buffering: spooled
        ("PUT", "/api/item/7", json.dumps({"name": "corral"}).encode()),
        ("DELETE", "/api/item/7", None),
    ]
    for method, path, body in cases:
        extra = [("Content-Type", "application/x-www-form-urlencoded")] if body else []
        (status, got, data), (http_status, http_got, http_data) = both(
            setup, method, path, body, headers + extra
        )
        assert status == http_status == 200, (method, path, data[:300])
        for name in SAME_HEADERS:
            assert header(got, name) == header(http_got, name), (name, got, http_got)
        via_nginx, direct = json.loads(data), json.loads(http_data)
        assert via_nginx["body"] == direct["body"] == (body or b"").decode()
        for key in SAME_ENVIRON:
            assert via_nginx["environ"].get(key) == direct["environ"].get(key), (path, key)
        assert via_nginx["scheme"] == direct["scheme"] == "http"
        # nginx's own: Debian's uwsgi_params sends its $host (no port) as HTTP_HOST, and its
        # listener as SERVER_NAME and SERVER_PORT
        assert via_nginx["environ"]["HTTP_HOST"] == "127.0.0.1"
        assert direct["environ"]["HTTP_HOST"] == f"127.0.0.1:{server.port}"
        assert (via_nginx["environ"]["SERVER_NAME"], via_nginx["environ"]["SERVER_PORT"]) == (
            "localhost",
            str(port),
        )


def test_status_head_and_a_streamed_body(setup):
    (status, got, _), (http_status, http_got, _) = both(setup, "GET", "/status/418")
    assert status == http_status == 418
    assert header(got, "x-app") == header(http_got, "x-app") == "uwsgi-apps"
    (status, _, data), (_, _, http_data) = both(setup, "GET", "/stream")
    assert status == 200 and data == http_data == b"".join(b"chunk %d\n" % i for i in range(5))
    (status, _, data), (http_status, _, http_data) = both(setup, "HEAD", "/")
    assert status == http_status == 200 and data == http_data == b""
    port = setup[1]
    # a chunked upload: nginx buffers it and passes its length
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    connection.request("POST", "/chunked", body=iter([b"abc", b"defg"]), encode_chunked=True)
    report = json.loads(connection.getresponse().read())
    connection.close()
    assert report["body"] == "abcdefg" and report["environ"]["CONTENT_LENGTH"] == "7"


def test_the_scheme_nginx_says(setup):
    _, port, *_ = setup
    status, _, data = request(port, "GET", "/tls/x")
    assert status == 200 and json.loads(data)["scheme"] == "https"


def test_the_process_tree_the_ini_describes(setup):
    server, port, sock, home, log = setup
    st = sock.stat()
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666 and st.st_uid == 0
    nobody = pwd.getpwnam(USER).pw_uid
    report = json.loads(request(port, "GET", "/")[2])
    assert report["imported"]["uid"] == report["serving"]["uid"] == nobody  # uid before import
    assert report["prefix"] == str(home)  # the virtualenv
    assert report["settings_module"] == "mysite.settings"  # env
    assert os.stat(f"/proc/{server.proc.pid}").st_uid == 0  # the master stays root
    text = log.read_text()
    assert f"listening on unix:{sock} (uwsgi)" in text
    # every request is logged where logto says (uWSGI's request log), with nginx's client
    wait_for(
        lambda: re.search(r'127\.0\.0\.1 - - \[.*\] "GET / HTTP/1\.[01]" 200 ', log.read_text())
    )
    assert "Traceback" not in text and "warning" not in server.stderr


def test_buffer_size_is_the_header_limit(setup):
    _, port, *_ = setup
    fits = [("X-A", "a" * 3000)]
    assert request(port, "GET", "/", headers=fits)[0] == 200
    too_big = [("X-A", "a" * 4000), ("X-B", "b" * 4500)]  # each fits nginx's 8k buffers
    assert request(port, "GET", "/", headers=too_big)[0] == 431


def test_harakiri_kills_the_worker_with_its_traceback(setup):
    server, port, _, _, log = setup
    before = set(server.worker_pids())
    status, _, _ = request(port, "GET", "/slow?8")
    assert status == 502  # the request is dropped with its worker: nginx says so
    text = wait_for(lambda: "timed out" in log.read_text() and log.read_text(), 10)
    line = next(ln for ln in text.splitlines() if "timed out" in ln)
    assert "GET /slow?8" in line or "timeout (3s)" in line or "timeout 3s" in line, line
    stacks = text[text.index("its threads' stacks follow") : text.index(line)]
    assert re.search(r'File ".*uwsgi_apps\.py", line \d+ in application', stacks), stacks
    assert request(port, "GET", "/")[0] == 200  # a fresh worker serves on
    assert set(server.worker_pids()) != before


def test_idle_workers_are_stopped(setup):
    """processes = 2, idle = 2: one worker at rest, a second while the first is busy, stopped
    again once it has been idle for 2 seconds."""
    server, port, *_ = setup
    assert len(server.worker_pids()) == 1
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            request(port, "GET", "/slow?0.5")

    threads = [threading.Thread(target=load, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(server.worker_pids()) == 2, 20)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    wait_for(lambda: len(server.worker_pids()) == 1, 20)
    assert "uwsgi_apps: up to 2 worker(s) (every worker is busy)" in server.stderr
    down = re.search(
        r"uwsgi_apps: down to 1 worker\(s\) \(\d+ idle for up to (\d+)s", server.stderr
    )
    assert down and int(down[1]) >= 2, server.stderr  # it stayed its idle seconds first

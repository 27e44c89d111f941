"""A real nginx in front of corral, for the integration tests (Debian's nginx-light).

`running_nginx(prefix, locations)` starts nginx in the foreground on a free loopback port, with
its own prefix directory and a generated nginx.conf whose one server holds ``locations`` (the
``location`` blocks, as nginx.conf text), and yields the port; it stops nginx (QUIT, by its
own pid) on the way out. Without nginx the test fails with how to install it: these tests are
the point of having nginx on the machine, they are not optional.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server import wait_for

UWSGI_PARAMS = Path("/etc/nginx/uwsgi_params")

_CONF = """\
{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
{http}
    server {{
        listen 127.0.0.1:{port};
        server_name localhost;
{locations}
    }}
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(path, os.X_OK)),
        None,
    )
    if found is None or not UWSGI_PARAMS.is_file():
        pytest.fail(
            "nginx is not installed: this test runs a real nginx in front of corral "
            "(apt-get install -y nginx-light; .ci/run does it)"
        )
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running_nginx(
    prefix: Path, locations: str, user: str | None = None, http: str = ""
) -> Iterator[int]:
    """nginx on a free loopback port serving ``locations`` (``http``: more of its ``http``
    block, an ``upstream``); its workers run as ``user`` ("USER GROUP", when the master is
    root), else as whoever starts it. Yields the port."""
    binary = nginx_binary()
    for attempt in range(5):
        port = free_port()
        conf = prefix / "nginx.conf"
        conf.write_text(
            _CONF.format(
                user=f"user {user};\n" if user else "",
                prefix=prefix,
                port=port,
                locations=locations,
                http=http,
            )
        )
        proc = subprocess.Popen(
            [binary, "-p", str(prefix), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

        def listening(proc: subprocess.Popen = proc, port: int = port) -> bool:
            if proc.poll() is not None:
                return True
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return True
            return False

        wait_for(listening, 15)
        if proc.poll() is None:
            break
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if "Address already in use" not in err or attempt == 4:
            raise AssertionError(f"nginx exited {proc.returncode}: {err}")
    try:
        yield port
    finally:
        stop_front(proc, signal.SIGQUIT)  # graceful: our own process, by its id


def stop_front(proc: subprocess.Popen, sig: int) -> None:
    """Stop a front (nginx, HAProxy) the test started with ``sig``, its graceful stop; kill
    it if it is still there 10 s later."""
    proc.send_signal(sig)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    if proc.stderr is not None:
        proc.stderr.close()

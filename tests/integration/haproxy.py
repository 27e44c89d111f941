"""A real HAProxy in front of corral instances, for the integration tests (Debian's haproxy).

`running_haproxy(directory, servers, **options)` starts HAProxy in the foreground on a free
loopback port, its one backend balancing over ``servers`` (loopback ports) with corral's
readiness probe as its health check, and yields the port; it stops HAProxy on the way out.
Without HAProxy the test fails with how to install it.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.nginx import free_port, stop_front
from tests.integration.server import wait_for

_CONF = """\
global
    maxconn 512
defaults
    mode http
    timeout connect 2s
    timeout client 20s
    timeout server 20s
    # what the balancer does not do for the servers: a request that failed is the client's
    retries 0
    no option redispatch
frontend web
    bind 127.0.0.1:{port}
    default_backend corral
backend corral
    balance roundrobin
    option httpchk GET {check}
    http-check expect status 200
    default-server check inter {inter}ms fall 1 rise 2
{servers}
"""


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
    )
    if found is None:
        pytest.fail(
            "haproxy is not installed: this test runs a real HAProxy in front of corral "
            "(apt-get install -y haproxy; .ci/run does it)"
        )
    return found


@contextlib.contextmanager
def running_haproxy(
    directory: Path, servers: list[int], check: str = "/readyz", inter_ms: int = 100
) -> Iterator[int]:
    """HAProxy on a free loopback port balancing over the loopback ``servers``, each checked
    by ``GET check`` every ``inter_ms``: down at the first failure, up after two answers."""
    binary = haproxy_binary()
    port = free_port()
    conf = directory / "haproxy.cfg"
    conf.write_text(
        _CONF.format(
            port=port,
            check=check,
            inter=inter_ms,
            servers="\n".join(
                f"    server s{i} 127.0.0.1:{server}" for i, server in enumerate(servers)
            ),
        )
    )
    proc = subprocess.Popen(
        [binary, "-db", "-f", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )

    def listening() -> bool:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise AssertionError(f"haproxy exited {proc.returncode}: {err}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return True
        return False

    try:
        wait_for(listening, 15)
        yield port
    finally:
        stop_front(proc, signal.SIGUSR1)  # soft stop: our own process, by its id

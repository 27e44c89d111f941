"""corral.actions.upstreams: a new connection to an upstream server, made by hand (a
non-blocking connect, then the loop's transport), on uvloop and on asyncio's own loop, against
real sockets: connected (TCP, with TCP_NODELAY, and unix), refused, no such path, and a
connect that never completes (timed out)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.actions.upstreams import UpstreamConnection, UpstreamServer
from corral.net.upstream import ProxyOptions

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop}
try:
    import uvloop

    LOOPS["uvloop"] = uvloop.new_event_loop
except ImportError:  # pragma: no cover - uvloop is a dependency where CPython runs
    pass


@pytest.fixture(params=sorted(LOOPS))
def loop(request: pytest.FixtureRequest) -> Iterator[asyncio.AbstractEventLoop]:
    running = LOOPS[request.param]()
    yield running
    running.close()


def dial(
    loop: asyncio.AbstractEventLoop, address: str, connect_timeout: float = 5.0
) -> tuple[Any, ...]:
    """What ``then`` was told, run until it is; and whether it was told before ``connect``
    returned (it must not be)."""
    told: list[tuple[Any, ...]] = []
    done = loop.create_future()

    def then(*outcome: Any) -> None:
        told.append(outcome)
        done.set_result(None)

    server = UpstreamServer(address, 1.0)
    server.connect(loop, ProxyOptions(connect_timeout=connect_timeout), then)
    assert not told
    loop.run_until_complete(asyncio.wait_for(done, 10))
    loop.run_until_complete(asyncio.sleep(0.01))  # the transport's own callbacks, all run
    assert len(told) == 1
    return told[0]


def echoed(loop: asyncio.AbstractEventLoop, wire: UpstreamConnection, peer: socket.socket) -> None:
    """Bytes written on the connection's transport reach the listening side."""
    wire.transport.write(b"ping")
    peer.settimeout(5)
    assert peer.recv(4) == b"ping"
    wire.close()
    loop.run_until_complete(asyncio.sleep(0.01))
    assert wire.closed and peer.recv(1) == b""


def test_a_tcp_connection_is_made_with_nodelay(loop: asyncio.AbstractEventLoop) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        (wire,) = dial(loop, f"127.0.0.1:{listener.getsockname()[1]}")
        assert isinstance(wire, UpstreamConnection) and not wire.closed
        sock = wire.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        peer, _ = listener.accept()
        with peer:
            echoed(loop, wire, peer)


def test_a_unix_socket_connection_is_made(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    path = str(tmp_path / "up.sock")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen()
        (wire,) = dial(loop, f"unix:{path}")
        peer, _ = listener.accept()
        with peer:
            echoed(loop, wire, peer)


def test_a_refused_connection_is_told_not_timed_out(loop: asyncio.AbstractEventLoop) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))  # bound, never listening: refused
        assert dial(loop, f"127.0.0.1:{probe.getsockname()[1]}") == (None, False)


def test_a_missing_unix_socket_is_refused(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    assert dial(loop, f"unix:{tmp_path / 'absent.sock'}") == (None, False)


def test_a_connect_that_never_completes_is_timed_out(loop: asyncio.AbstractEventLoop) -> None:
    # a listener whose backlog is full: the kernel drops the next SYNs, the connect hangs
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        fillers = [socket.create_connection(hole.getsockname(), timeout=1)]
        spare = socket.socket()
        spare.setblocking(False)
        spare.connect_ex(hole.getsockname())
        fillers.append(spare)
        try:
            started = loop.time()
            assert dial(loop, f"127.0.0.1:{hole.getsockname()[1]}", 0.2) == (None, True)
            assert 0.15 < loop.time() - started < 3
        finally:
            for filler in fillers:
                filler.close()


def test_a_connect_that_completes_later_is_made(loop: asyncio.AbstractEventLoop) -> None:
    # the backlog full, then room made: the SYN sent again (after a second) is answered, and
    # the connection is made when its socket becomes writable
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        filler = socket.create_connection(hole.getsockname(), timeout=1)
        loop.call_later(0.2, lambda: hole.accept()[0].close())
        try:
            started = loop.time()
            (wire,) = dial(loop, f"127.0.0.1:{hole.getsockname()[1]}", 5.0)
            assert loop.time() - started > 0.5  # (not at once: the SYN was dropped first)
            assert isinstance(wire, UpstreamConnection) and wire.timer is None
            peer, _ = hole.accept()
            with peer:
                echoed(loop, wire, peer)
        finally:
            filler.close()

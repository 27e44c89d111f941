"""What one TLS request, full handshake or resumed handshake costs a corral worker, by TLS
transport (issue 33, point 7): instructions counted by callgrind (repeatable on a shared
machine), or CPU time and req/s on the real clock.

The server is a worker's pieces in one process (the TLS door and acceptor, `HttpConnection`,
the WSGI adapter running bench/apps/hello.py's hello) on a real loopback socket, pinned to
core 0; the client (wrk or ab, as bench/run.py's scenario T runs them) on core 1:

- ``keepalive``: wrk, 100 connections, keep-alive;
- ``full``: ab, a new connection and a full handshake per request (ab never offers a session);
- ``resumed``: wrk with ``Connection: close`` (wrk offers each connection's last session).

    python bench/tls_micro.py count [--transport uvloop,asyncio,corral] [--load keepalive]
    python bench/tls_micro.py cpu [--transport ...] [--load ...] [--rounds 3 --duration 5]

``count`` runs the server under callgrind twice, stopping after N1 then N2 requests, and
gives (I2 - I1) / (N2 - N1): user-space instructions per request, start-up and the client's
first connections taken out (the kernel's work is not counted). ``cpu`` gives the server
process's CPU (user + system, from /proc) per request and wrk's or ab's req/s, transports
alternating in each round.

Transports: ``uvloop`` (the loop's own, ``connect_accepted_socket(ssl=...)`` on uvloop),
``asyncio`` (the same on a plain asyncio loop: asyncio's ``SSLProtocol``), ``corral``
(corral.server.tlsstream on uvloop: the memory BIO driven by the compiled core).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "apps"))

LOADS = ("keepalive", "full", "resumed")
TRANSPORTS = ("uvloop", "asyncio", "corral")
# requests of the short and the long callgrind run of each load (the difference is measured)
COUNTS = {"keepalive": (4000, 24000), "full": (300, 1300), "resumed": (300, 1300)}


def serve(args: argparse.Namespace) -> None:
    """The server: a worker's pieces on one listener, stopping after ``--requests``."""
    import logging
    import socket

    from hello import application

    from corral.apps.wsgi.runner import WsgiAdapter
    from corral.http.head import Limits
    from corral.server.connection import HttpConnection, ServerState
    from corral.server.plan import ListenerPlan
    from corral.server.tlsdoor import TlsAcceptor, TlsDoor
    from corral.tls.context import session_context
    from corral.tls.served import settings_tls

    if args.transport == "asyncio":
        loop = asyncio.new_event_loop()
    else:
        import uvloop

        loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    log = logging.getLogger("bench")
    settings = SimpleNamespace(
        certfile=args.cert,
        keyfile=args.key,
        keyfile_password=None,
        ca_certs=None,
        cert_reqs=0,
        ciphers=None,
        tls_min_version="1.2",
        tls_ticket_rotation=43200.0,
    )
    served = settings_tls(settings)
    assert served is not None
    context = session_context(served)  # as the master makes it (ticket keys, sessions)
    tickets = os.environ.get("TLS_MICRO_TICKETS")
    if tickets:  # TLS 1.3 session tickets sent after each full handshake (OpenSSL's default: 2)
        context.num_tickets = int(tickets)
    adapter = WsgiAdapter(
        application,
        threads=1,
        body_buffer_size=1 << 20,
        response_buffer_size=1 << 16,
        response_spool_size=1 << 30,
        multiprocess=False,
        log=log,
    )
    state = ServerState(
        adapter,
        Limits(),
        keep_alive=60,
        header_timeout=60,
        body_timeout=60,
        send_timeout=60,
    )
    state.loop = loop
    state.prefix = "Date: Mon, 30 Nov 2026 03:31:53 GMT\r\nServer: corral\r\n"
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    plan = ListenerPlan(sock.getsockname(), tls=context)
    door = TlsDoor(loop, plan, partial(HttpConnection, state, plan), 10.0, log)
    if args.transport != "corral":
        loop_transport()
    acceptor = TlsAcceptor(loop, sock, door)
    acceptor.start()
    state.retire_after = args.requests
    state.on_retire = loop.stop
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    Path(args.port_file).write_text(str(sock.getsockname()[1]))
    profile = os.environ.get("TLS_MICRO_PROFILE")  # a file: cProfile's statistics of the run
    if profile:
        import cProfile

        cProfile.runctx("loop.run_forever()", globals(), {"loop": loop}, profile)
    else:
        loop.run_forever()
    print(json.dumps({"served": state.served}), flush=True)
    os._exit(0)  # no teardown: callgrind counts the requests, not the exit


def loop_transport() -> None:
    """Hand the door's connections to the loop's own TLS transport, as corral did before its
    own (``connect_accepted_socket(ssl=...)``; the connection then cannot half-close)."""
    import logging

    from corral.server import tlsdoor

    # corral's connection keeps its side open after the client's EOF (True from eof_received),
    # which the loop's TLS transports cannot do: they warn once per connection, not counted
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)

    def hand_over(arrival: tlsdoor._Arrival) -> None:
        arrival._stop()
        door = arrival.door

        async def opened() -> None:
            try:
                await door.loop.connect_accepted_socket(
                    door.factory,
                    arrival.sock,
                    ssl=door.context,
                    ssl_handshake_timeout=door.timeout,
                )
            finally:
                door.arriving -= 1

        arrival.connect(opened())

    def admit(door: tlsdoor.TlsDoor, sock: Any, connect: Any, failed: Any) -> None:
        door.arriving += 1  # every connection through the door's peek, as before
        tlsdoor._Arrival(door, sock, connect, failed).start()

    tlsdoor._Arrival._hand_over = hand_over  # type: ignore[method-assign]
    tlsdoor.TlsDoor.admit = admit  # type: ignore[method-assign]


def client_argv(load: str, port: int, duration: int = 600, counting: bool = False) -> list[str]:
    """The load's client; ``counting`` (under callgrind): new connections one at a time, so
    that the run's last request leaves no handshake half made (ten in flight moved the count
    per handshake by tens of thousands of instructions)."""
    url = f"https://127.0.0.1:{port}/"
    pin = ["taskset", "-c", "1"]
    new = "1" if counting else "10"
    if load == "keepalive":
        return [*pin, "wrk", "-t1", "-c100", f"-d{duration}", "--timeout", "30s", url]
    if load == "resumed":
        close = ["-H", "Connection: close"]
        return [*pin, "wrk", "-t1", f"-c{new}", f"-d{duration}", "--timeout", "30s", *close, url]
    return [*pin, "ab", "-q", "-r", "-t", str(duration), "-n", "100000000", "-c", new, url]


def start_server(
    transport: str, load: str, cert: tuple[str, str], requests: int, wrap: list[str]
) -> tuple[subprocess.Popen[str], int, str]:
    port_file = tempfile.mktemp(prefix="tls-micro-port-")
    argv = [
        *wrap,
        sys.executable,
        __file__,
        "serve",
        "--transport",
        transport,
        "--requests",
        str(requests),
        "--port-file",
        port_file,
        "--cert",
        cert[0],
        "--key",
        cert[1],
    ]
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.Popen(
        ["taskset", "-c", "0", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (os.path.exists(port_file) and Path(port_file).read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"server did not start: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    port = int(Path(port_file).read_text())
    os.unlink(port_file)
    return proc, port, load


def instructions(transport: str, load: str, cert: tuple[str, str], requests: int) -> int:
    out = tempfile.mktemp(prefix="tls-micro-cg-")
    wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    proc, port, _ = start_server(transport, load, cert, requests, wrap)
    client = subprocess.Popen(
        client_argv(load, port, counting=True), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _, err = proc.communicate(timeout=1200)
    finally:
        client.terminate()
        client.wait()
    if os.environ.get("TLS_MICRO_KEEP"):
        print(f"callgrind output: {out}", file=sys.stderr)
    else:
        os.unlink(out)
    for line in err.splitlines():
        if "Collected :" in line:
            return int(line.split()[-1])
    raise SystemExit(f"no callgrind count: {err[-2000:]}")


def cpu_ticks(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime: clock ticks


def measure_cpu(
    transport: str, load: str, cert: tuple[str, str], duration: int
) -> dict[str, float]:
    proc, port, _ = start_server(transport, load, cert, 1 << 60, [])
    try:
        warm = subprocess.run(client_argv(load, port, 1), capture_output=True, text=True)
        if warm.returncode:
            raise SystemExit(warm.stderr)
        before = cpu_ticks(proc.pid)
        done = subprocess.run(client_argv(load, port, duration), capture_output=True, text=True)
        after = cpu_ticks(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    text = done.stdout
    if load == "full":
        requests = int(text.split("Complete requests:")[1].split()[0])
        rps = float(text.split("Requests per second:")[1].split()[0])
    else:
        requests = int(text.split(" requests in ")[0].split()[-1])
        rps = float(text.split("Requests/sec:")[1].split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    user = (after[0] - before[0]) / tick / requests * 1e6
    system = (after[1] - before[1]) / tick / requests * 1e6
    return {"rps": rps, "us_per_request": user + system, "user_us": user, "system_us": system}


def measure_idle(transport: str, cert: tuple[str, str]) -> dict[str, object]:
    """The server's RSS with 1,000 idle TLS connections (tls_load.idle_connections)."""
    import tls_load

    proc, port, _ = start_server(transport, "idle", cert, 1 << 60, [])

    def rss_kib() -> int:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    try:
        return tls_load.idle_connections("127.0.0.1", port, rss_kib)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("count", "cpu", "idle", "serve"))
    parser.add_argument("--transport", default=",".join(TRANSPORTS))
    parser.add_argument("--load", default=",".join(LOADS))
    parser.add_argument("--kind", default="ecdsa", help="ecdsa or rsa (bench/out/tls/)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--requests", type=int, default=0)
    parser.add_argument("--port-file")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    if args.mode == "serve":
        serve(args)
        return
    import tls_load

    certs = HERE / "out" / "tls"
    if not tls_load.certificate_files(certs, args.kind)[0].exists():
        tls_load.make_certificates(certs)
    cert = tuple(str(path) for path in tls_load.certificate_files(certs, args.kind))
    transports = args.transport.split(",")
    loads = args.load.split(",")
    results: dict[str, dict[str, object]] = {}
    if args.mode == "idle":
        for transport in transports:
            idle = measure_idle(transport, cert)  # type: ignore[arg-type]
            print(f"idle      {transport:8} {idle['kib_per_connection']} KiB per connection {idle}")
            results.setdefault("idle", {})[transport] = idle
        loads = []
    for load in loads:
        for transport in transports:
            if args.mode == "count":
                short, long = COUNTS[load]
                first = instructions(transport, load, cert, short)  # type: ignore[arg-type]
                second = instructions(transport, load, cert, long)  # type: ignore[arg-type]
                figure: object = (second - first) // (long - short)
                print(f"{load:9} {transport:8} {figure:>9,} instructions per request", flush=True)
                results.setdefault(load, {})[transport] = figure
        if args.mode == "cpu":
            rounds: dict[str, list[dict[str, float]]] = {t: [] for t in transports}
            for _ in range(args.rounds):
                for transport in transports:
                    rounds[transport].append(
                        measure_cpu(transport, load, cert, args.duration)  # type: ignore[arg-type]
                    )
            for transport, runs in rounds.items():
                rps = statistics.median(r["rps"] for r in runs)
                us = statistics.median(r["us_per_request"] for r in runs)
                user = statistics.median(r["user_us"] for r in runs)
                system = statistics.median(r["system_us"] for r in runs)
                each = " / ".join(f"{r['rps']:,.0f}" for r in runs)
                print(
                    f"{load:9} {transport:8} {rps:>9,.0f} req/s ({each}), "
                    f"{us:6.1f} us CPU per request (user {user:.1f}, system {system:.1f})",
                    flush=True,
                )
                results.setdefault(load, {})[transport] = {"rps": rps, "us": us, "rounds": runs}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

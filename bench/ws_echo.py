"""WebSocket echo benchmark: messages per second and latency percentiles, corral against
Uvicorn (websockets, httptools, uvloop) and Granian (ASGI), side by side in one run.

    bench/.venv/bin/python bench/ws_echo.py [--rounds 3] [--duration 5] [--connections 100]
        [--size 32] [--servers corral,uvicorn,granian-asgi] [--json FILE] [--markdown FILE]

Each server runs one worker under ``taskset -c 0`` (bench/run.py's commands, the same
application: bench/apps/ws_echo.py); the load runs under ``taskset -c 1``: one process, a
uvloop event loop, ``--connections`` WebSockets opened first, then each sends one text
message, waits for its echo, and sends the next (a closed loop, as wrk's connections are)
for ``--duration`` seconds. Frames are built once (masked, as a client must) and answers are
read with a small parser of its own, so the client's cost per message is a few microseconds:
the server is the bottleneck. Rounds are interleaved (every server once, then again), and
the report takes medians. Compression is not offered (each server would otherwise spend its
time in zlib).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import run  # noqa: E402 (bench/run.py: the servers' commands, readiness, machine facts)

APP = run.App("ws_echo", "ws_echo:app", run.APPS, "/", run.check_hello)
SERVER_CPU, CLIENT_CPU = run.SERVER_CPU, run.CLIENT_CPU


class EchoClient(asyncio.Protocol):
    """One WebSocket: after the handshake, one message out and its echo back, in a loop."""

    def __init__(self, frame: bytes, size: int, stats: dict, ready: asyncio.Future) -> None:
        self.frame = frame
        self.expected = size + 2  # an unmasked server frame: 2 bytes of head (size < 126)
        self.stats = stats
        self.ready = ready
        self.buffer = b""
        self.open = False
        self.sent_at = 0.0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        key = base64.b64encode(os.urandom(16))
        transport.write(
            b"GET /echo HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key
        )

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data
        if not self.open:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = buffer
                return
            if not buffer.startswith(b"HTTP/1.1 101"):
                self.ready.set_exception(RuntimeError(buffer[:80].decode("latin-1")))
                return
            self.open = True
            buffer = buffer[end + 4 :]
            if not self.ready.done():
                self.ready.set_result(None)
        expected = self.expected
        stats = self.stats
        while len(buffer) >= expected:
            buffer = buffer[expected:]
            if stats["running"]:
                now = time.perf_counter()
                stats["latencies"].append(now - self.sent_at)
                stats["count"] += 1
                self.send()
            else:
                stats["stopped"] += 1
        self.buffer = buffer

    def send(self) -> None:
        self.sent_at = time.perf_counter()
        self.transport.write(self.frame)  # type: ignore[union-attr]


def masked_text(size: int) -> bytes:
    payload = b"x" * size
    mask = os.urandom(4)
    return bytes([0x81, 0x80 | size]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def load(port: int, connections: int, duration: float, size: int) -> dict:
    loop = asyncio.get_running_loop()
    stats = {"running": False, "count": 0, "latencies": [], "stopped": 0}
    frame = masked_text(size)
    clients = []
    for _ in range(connections):
        ready = loop.create_future()
        _, client = await loop.create_connection(
            lambda ready=ready: EchoClient(frame, size, stats, ready), run.HOST, port
        )
        await ready
        clients.append(client)
    stats["running"] = True
    started = time.perf_counter()
    for client in clients:
        client.send()
    await asyncio.sleep(duration)
    stats["running"] = False
    elapsed = time.perf_counter() - started
    await asyncio.sleep(0.2)
    for client in clients:
        client.transport.close()
    latencies = sorted(stats["latencies"])
    return {
        "messages_per_s": stats["count"] / elapsed,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else None,
        "messages": stats["count"],
    }


def client_main(port: int, connections: int, duration: float, size: int) -> None:
    import uvloop

    print(json.dumps(uvloop.run(load(port, connections, duration, size))))


def measure(server: str, args: argparse.Namespace, port: int) -> dict:
    argv = ["taskset", "-c", SERVER_CPU, *run.SERVERS[server].build(APP, 1, 1, port)]
    log = (run.OUT / f"ws-{server}.log").open("w")
    proc = subprocess.Popen(argv, cwd=str(run.APPS), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if run.http_get(port, "/")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{server} did not start: see {log.name}")
            time.sleep(0.05)
        time.sleep(0.5)
        out = subprocess.run(
            ["taskset", "-c", CLIENT_CPU, sys.executable, __file__, "--client", str(port),
             str(args.connections), str(args.duration), str(args.size)],
            capture_output=True, text=True, check=True, timeout=args.duration + 60,
        )  # fmt: skip
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()


def _machine(info: dict) -> str:
    packages = ", ".join(
        f"{name} {info['packages'].get(name, '?')}" for name in ("uvicorn", "granian")
    )
    return (
        f"{info['nproc']} CPUs ({info['cpu']}), {info['os']}, {info['python']}; {packages}, "
        f"websockets {_version('websockets')}, corral at {_commit()}"
    )


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(BENCH), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip() or "?"


def render(results: dict) -> str:
    servers = results["servers"]
    lines = [
        f"### WebSocket echo, {results['connections']} connections, {results['size']}-byte "
        f"text messages ({results['date']})",
        "",
        f"{results['machine']}. One worker under `taskset -c {SERVER_CPU}`, the client under "
        f"`taskset -c {CLIENT_CPU}`; {results['rounds']} interleaved rounds of "
        f"{results['duration']:g} s, medians (`bench/ws_echo.py`).",
        "",
        "| server | messages/s | p50 ms | p99 ms | rounds (messages/s) | ratio |",
        "| --- | ---: | ---: | ---: | --- | ---: |",
    ]
    base = statistics.median(r["messages_per_s"] for r in results["runs"]["corral"])
    for server in servers:
        runs = results["runs"][server]
        rate = statistics.median(r["messages_per_s"] for r in runs)
        p50 = statistics.median(r["p50_ms"] for r in runs)
        p99 = statistics.median(r["p99_ms"] for r in runs)
        rounds = ", ".join(f"{r['messages_per_s']:,.0f}" for r in runs)
        ratio = "1.00" if server == "corral" else f"{base / rate:.2f}"
        lines.append(
            f"| {run.SERVERS[server].label} | {rate:,.0f} | {p50:.2f} | {p99:.2f} | {rounds} | "
            f"{ratio} |"
        )
    lines += ["", "ratio: corral's messages per second over the server's."]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        port, connections, duration, size = sys.argv[2:6]
        client_main(int(port), int(connections), float(duration), int(size))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--servers", default="corral,uvicorn,granian-asgi")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    if not 0 < args.size < 126:
        parser.error("--size must be 1..125 (one-byte frame lengths)")
    servers = args.servers.split(",")
    run.OUT.mkdir(exist_ok=True)
    results = {
        "date": dt.date.today().isoformat(),
        "machine": _machine(run.machine_info()),
        "connections": args.connections, "size": args.size, "rounds": args.rounds,
        "duration": args.duration, "servers": servers, "runs": {s: [] for s in servers},
    }  # fmt: skip
    port = 8790
    for index in range(args.rounds):
        for server in servers:
            result = measure(server, args, port)
            results["runs"][server].append(result)
            print(f"round {index + 1} {server}: {result['messages_per_s']:,.0f} msg/s, "
                  f"p99 {result['p99_ms']:.2f} ms", flush=True)  # fmt: skip
            port += 1
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    text = render(results)
    if args.markdown:
        args.markdown.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Slow clients all at once (issue 34, point 3): what they cost normal requests and memory.

    bench/.venv/bin/python bench/slow_clients.py [--each 1000] [--duration 20]
        [--servers corral,gunicorn-gthread] [--workers 2] [--threads 4] [--answer-mib 1]
        [--json FILE] [--markdown FILE]

The server runs bench/apps/slow_targets.py (``/`` a hello, ``/big`` 1 MiB yielded in 64 KiB
pieces, ``/upload`` reads its body). An attacking process (this script with ``--attack``, on
asyncio) keeps ``--each`` connections of each kind open, opening a new one for each the server
closes:

- **slowloris**: a request head that never ends, one more header field every 5 s;
- **slow POST**: ``Content-Length: 1000000``, then one byte of body a second;
- **slow reader**: ``GET /big`` on a socket whose receive buffer is 4 KiB, reading 4 KiB a
  second (a 1 MiB answer takes it four minutes; ``--answer-mib`` for larger: on loopback the
  kernel's send buffer grows to ``net.ipv4.tcp_wmem``'s maximum, 4 MiB here, so a server's
  own buffering of a 1 MiB answer is barely reached).

A probing process meanwhile sends normal requests (``GET /``), paced, half on keep-alive
connections and half on a new connection each, and times each answer: first for ``--duration``
seconds before the attack (the baseline), then for ``--duration`` seconds once every attacking
connection is open. The figures: the probe's latency percentiles in both phases and its
failures; the server's memory (the sum of VmRSS over its processes) before the attack and
while it is under way, divided by the attacking connections; the bytes of deleted files its
processes hold open (bodies and answers spooled to disk); how often the server closed each
kind of attacker. Standard library only; the peers' commands are run.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
APPS = HERE / "apps"
HOST = "127.0.0.1"
PROBE_INTERVAL = 0.02  # seconds between a probing thread's requests


def server_argv(name: str, port: int, workers: int, threads: int) -> list[str]:
    py = sys.executable
    bind = f"{HOST}:{port}"
    if name == "corral":
        return [py, "-m", "corral", "slow_targets:application", "-w", str(workers),
                "--threads", str(threads), "-b", bind]  # fmt: skip
    if name == "gunicorn-gthread":
        return [py, "-m", "gunicorn", "-k", "gthread", "-w", str(workers), "--threads",
                str(threads), "-b", bind, "slow_targets:application"]  # fmt: skip
    raise SystemExit(f"unknown server {name!r}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited {proc.returncode}")
        try:
            with socket.create_connection((HOST, port), timeout=1) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if sock.recv(100).startswith(b"HTTP/1.1 200"):
                    time.sleep(2)  # the other workers load the application too
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not answer")


def tree(root: int) -> list[int]:
    """``root`` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def spooled_bytes(pids: list[int]) -> tuple[int, int]:
    """The bytes and the number of deleted files the processes hold open."""
    size = count = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.endswith("(deleted)") and not target.startswith("/memfd:"):
                    size += os.stat(f"/proc/{pid}/fd/{fd}").st_size
                    count += 1
            except OSError:
                pass
    return size, count


# --------------------------------------------------------------------------- the probe


def probe(port: int, seconds: float, threads: int = 4) -> dict[str, object]:
    """Normal requests for ``seconds``: latencies (ms) and failures."""
    latencies: list[float] = []
    failures = [0]
    end = time.monotonic() + seconds

    def keep_alive() -> None:
        sock = None
        while time.monotonic() < end:
            start = time.monotonic()
            try:
                if sock is None:
                    sock = socket.create_connection((HOST, port), timeout=10)
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                read_answer(sock)
                latencies.append((time.monotonic() - start) * 1000)
            except OSError:
                failures[0] += 1
                sock = None
            time.sleep(max(0.0, PROBE_INTERVAL - (time.monotonic() - start)))

    def new_connections() -> None:
        while time.monotonic() < end:
            start = time.monotonic()
            try:
                with socket.create_connection((HOST, port), timeout=10) as sock:
                    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    read_answer(sock)
                latencies.append((time.monotonic() - start) * 1000)
            except OSError:
                failures[0] += 1
            time.sleep(max(0.0, PROBE_INTERVAL - (time.monotonic() - start)))

    workers = [
        threading.Thread(target=keep_alive if i % 2 == 0 else new_connections)
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 2)

    return {
        "requests": len(ordered),
        "failures": failures[0],
        "p50_ms": pct(50) if ordered else None,
        "p99_ms": pct(99) if ordered else None,
        "max_ms": round(ordered[-1], 2) if ordered else None,
    }


def read_answer(sock: socket.socket) -> None:
    """One answer with a Content-Length (the hello's), read whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise OSError("closed")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise OSError(head.split(b"\r\n", 1)[0].decode())
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            raise OSError("closed")
        body += chunk


# --------------------------------------------------------------------------- the attack


class Attack:
    """``each`` connections of every kind, each replaced when the server closes it."""

    def __init__(self, port: int, each: int, answer_mib: int) -> None:
        self.port = port
        self.each = each
        self.answer_mib = answer_mib
        self.open = {"slowloris": 0, "slow_post": 0, "slow_reader": 0}
        self.closed = dict.fromkeys(self.open, 0)  # by the server
        self.failed = dict.fromkeys(self.open, 0)  # could not connect
        self.read = 0  # bytes the slow readers took

    async def keep(self, kind: str) -> None:
        while True:
            try:
                if kind == "slow_reader":
                    sock = socket.socket()
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    sock.setblocking(False)
                    await asyncio.get_running_loop().sock_connect(sock, (HOST, self.port))
                    reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
                else:
                    reader, writer = await asyncio.open_connection(HOST, self.port)
            except OSError:
                self.failed[kind] += 1
                await asyncio.sleep(1)
                continue
            self.open[kind] += 1
            try:
                await getattr(self, kind)(reader, writer)
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                self.open[kind] -= 1
                self.closed[kind] += 1
                writer.close()

    async def slowloris(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
        while True:
            await asyncio.sleep(5)
            if reader.at_eof() or writer.is_closing():
                return
            writer.write(b"X-Slow: a\r\n")
            await writer.drain()
            if await self.answered(reader):
                return

    async def slow_post(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        while True:
            await asyncio.sleep(1)
            writer.write(b"x")
            await writer.drain()
            if await self.answered(reader):
                return

    async def slow_reader(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(f"GET /big?mib={self.answer_mib} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        while True:
            data = await reader.read(4096)
            if not data:
                return
            self.read += len(data)
            await asyncio.sleep(1)

    @staticmethod
    async def answered(reader: asyncio.StreamReader) -> bool:
        """Whether the server answered (a 408) or closed: this attacker is done."""
        try:
            data = await asyncio.wait_for(reader.read(4096), 0.01)
        except TimeoutError:
            return False
        return bool(data or reader.at_eof())

    async def run(self) -> None:
        tasks = []
        for i in range(self.each):
            for kind in self.open:
                tasks.append(asyncio.create_task(self.keep(kind)))
            if i % 50 == 49:
                await asyncio.sleep(0.05)  # not a SYN flood: the backlog is not what is tested
        while True:
            state = {"open": self.open, "closed": self.closed, "failed": self.failed}
            print(json.dumps(state | {"read": self.read}), flush=True)
            await asyncio.sleep(1)


def attack_main(port: int, each: int, answer_mib: int) -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(Attack(port, each, answer_mib).run())


# --------------------------------------------------------------------------- one server


def measure(name: str, args: argparse.Namespace) -> dict[str, object]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(APPS))
    argv = server_argv(name, port, args.workers, args.threads) + args.server_args.split()
    print(f"== {name}: {' '.join(argv)}", flush=True)
    server = subprocess.Popen(
        argv, cwd=APPS, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    attacker = None
    try:
        wait_ready(port, server)
        pids = tree(server.pid)
        result: dict[str, object] = {"server": name, "command": " ".join(argv)}
        result["baseline"] = probe(port, args.duration)
        result["rss_before_kib"] = rss_kib(pids)
        print(f"   baseline {result['baseline']}", flush=True)
        attacker = subprocess.Popen(
            [sys.executable, __file__, "--attack", "--port", str(port), "--each", str(args.each),
             "--answer-mib", str(args.answer_mib)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert attacker.stdout is not None
        want = 3 * args.each
        ramp_end = time.monotonic() + args.ramp
        state: dict[str, dict[str, int]] = {}
        while time.monotonic() < ramp_end:
            state = json.loads(attacker.stdout.readline())
            if sum(state["open"].values()) >= want:
                break
        result["attack_open_at_start"] = state.get("open")
        print(f"   attack open {state.get('open')}", flush=True)
        states: list[dict[str, dict[str, int]]] = []
        done = threading.Event()

        def follow() -> None:
            assert attacker is not None and attacker.stdout is not None
            while not done.is_set():
                line = attacker.stdout.readline()
                if not line:
                    return
                states.append(json.loads(line))

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        under: dict[str, object] = {}
        sampler_out: list[tuple[int, tuple[int, int]]] = []

        def sample() -> None:
            time.sleep(args.duration / 2)
            sampler_out.append((rss_kib(tree(server.pid)), spooled_bytes(tree(server.pid))))

        sampler = threading.Thread(target=sample)
        sampler.start()
        under = probe(port, args.duration)
        sampler.join()
        done.set()
        result["under_attack"] = under
        rss, (spooled, files) = sampler_out[0]
        result["rss_under_attack_kib"] = rss
        opened = sum(states[len(states) // 2]["open"].values()) if states else 0
        result["attack_open_mid"] = states[len(states) // 2]["open"] if states else {}
        result["rss_per_attacker_kib"] = round((rss - result["rss_before_kib"]) / max(opened, 1), 2)
        result["spooled_bytes"] = spooled
        result["spooled_files"] = files
        result["attack_final"] = states[-1] if states else {}
        print(f"   under attack {under}", flush=True)
        print(
            f"   rss {result['rss_before_kib']} -> {rss} KiB with {opened} attackers open; "
            f"spooled {spooled} bytes in {files} files; {result['attack_final']}",
            flush=True,
        )
        return result
    finally:
        if attacker is not None:
            attacker.kill()
            attacker.wait()
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def markdown(results: list[dict[str, object]], args: argparse.Namespace) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"`bench/slow_clients.py --each {args.each} --duration {args.duration} --workers "
        f"{args.workers} --threads {args.threads} --answer-mib {args.answer_mib}`, {when}",
        "",
        "| server | probe p50 / p99 / max (ms), no attack | under attack | probe failures "
        "| attackers open (loris / POST / reader) | RSS before → under (MiB) | KiB per attacker "
        "| spooled to disk |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for r in results:
        b, u = r["baseline"], r["under_attack"]
        mid = r["attack_open_mid"] or {}
        opened = " / ".join(str(mid.get(k, 0)) for k in ("slowloris", "slow_post", "slow_reader"))
        lines.append(
            f"| {r['server']} | {b['p50_ms']} / {b['p99_ms']} / {b['max_ms']} "  # type: ignore[index]
            f"| {u['p50_ms']} / {u['p99_ms']} / {u['max_ms']} "  # type: ignore[index]
            f"| {b['failures']} / {u['failures']} | {opened} "  # type: ignore[index]
            f"| {r['rss_before_kib'] / 1024:.1f} → {r['rss_under_attack_kib'] / 1024:.1f} "  # type: ignore[operator]
            f"| {r['rss_per_attacker_kib']} | {r['spooled_bytes'] / 1048576:.1f} MiB in "  # type: ignore[operator]
            f"{r['spooled_files']} files |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attack", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--each", type=int, default=1000, help="attacking connections of each kind")
    p.add_argument("--duration", type=float, default=20, help="seconds of each probe phase")
    p.add_argument("--ramp", type=float, default=60, help="seconds at most to open the attack")
    p.add_argument("--servers", default="corral", help="comma list: corral,gunicorn-gthread")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--answer-mib", type=int, default=1, help="MiB of the slow readers' answer")
    p.add_argument("--server-args", default="", help="more flags for the server")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--markdown", help="write the table here")
    args = p.parse_args()
    if args.attack:
        attack_main(args.port, args.each, args.answer_mib)
        return
    results = [measure(name, args) for name in args.servers.split(",")]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    table = markdown(results, args)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table)


if __name__ == "__main__":
    main()

"""Requests/s before, during and after a live reconfiguration, under wrk.

Starts corral on the hello app with a control socket, runs ``wrk`` against it for
``--duration`` seconds and, at a third of it, PUTs a new worker count through the
control API; with ``--change routes``, the server runs two applications (``hello`` and
``hello2``, both examples.hello) behind one listener passing to ``routes``, and the change
points the route from one to the other. Requests/s come from the master's ``/status``
(``requests.total``),
sampled every 0.25 s, over the seconds before the change, the 3 s from it, and the
rest; errors from wrk's own report (socket errors and non-2xx). Prints one Markdown
table row (for bench/RESULTS.md) and the raw figures as JSON.

    python bench/reconfigure.py [--workers 1] [--to 2] [--duration 15] [--connections 50]
    python bench/reconfigure.py --change routes
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def control(path: str, method: str = "GET", body: bytes = b"") -> tuple[int, dict]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(SOCKET)
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    sock.sendall(head.encode() + body)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.partition(b"\r\n\r\n")[2])


def main() -> int:
    global SOCKET
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--to", type=int, default=2)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--port", type=int, default=8321)
    parser.add_argument("--change", choices=("processes", "routes"), default="processes")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="corral-reconf-")
    SOCKET = f"{tmp}/control.sock"
    if args.change == "processes":
        what = ["examples.hello:application", "-w", str(args.workers), "-b"]
        what.append(f"127.0.0.1:{args.port}")
        path, body = "/config/applications/examples.hello/processes", str(args.to).encode()
        label = f"{args.workers} → {args.to} workers"
    else:
        config = Path(tmp) / "routes.json"
        app = {"module": "examples.hello", "processes": args.workers}
        config.write_text(
            json.dumps(
                {
                    "listeners": {f"127.0.0.1:{args.port}": {"pass": "routes"}},
                    "routes": [{"action": {"pass": "applications/hello"}}],
                    "applications": {"hello": app, "hello2": app},
                }
            )
        )
        what = ["-c", str(config)]
        path, body = "/config/routes/0/action/pass", b'"applications/hello2"'
        label = f"routes: hello → hello2 ({args.workers} worker(s) each)"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "corral",
            *what,
            f"--control=unix:{SOCKET}",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(SOCKET) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        wrk = subprocess.Popen(
            [
                "wrk",
                "-t1",
                f"-c{args.connections}",
                f"-d{args.duration:g}s",
                f"http://127.0.0.1:{args.port}/",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        start = time.monotonic()
        samples: list[tuple[float, int]] = []
        change_at = args.duration / 3
        answered = None
        while wrk.poll() is None:
            now = time.monotonic() - start
            samples.append((now, control("/status")[1]["requests"]["total"]))
            if answered is None and now >= change_at:
                sent = time.monotonic()
                status, reply = control(path, "PUT", body)
                answered = (sent - start, time.monotonic() - sent, status, reply)
            time.sleep(0.25)
        report = wrk.stdout.read() if wrk.stdout else ""
    finally:
        server.terminate()
        server.wait(30)
    assert answered is not None
    put_at, took, status, reply = answered

    def rate(lo: float, hi: float) -> float:
        inside = [(t, n) for t, n in samples if lo <= t <= hi]
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0)

    # /status totals move once a second per worker (heartbeats): windows of 3 s and more
    before = rate(1.0, put_at)
    during = rate(put_at, put_at + 3.0)  # the new generation starts, the old one drains
    after = rate(put_at + 3.0, samples[-1][0] - 0.5)
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", report))
    non2xx = int(m[1]) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", report)) else 0
    row = (
        f"| {label}, wrk -c{args.connections} {args.duration:g} s "
        f"| {before:,.0f} | {during:,.0f} | {after:,.0f} | {errors} | {non2xx} "
        f"| {took * 1000:.0f} ms ({status}) |"
    )
    print(row)
    print(
        json.dumps(
            {
                "samples": samples,
                "put_at": put_at,
                "api_seconds": took,
                "api_status": status,
                "api_reply": reply,
                "wrk": report,
            }
        )
    )
    return 0 if status == 200 and errors == 0 and non2xx == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

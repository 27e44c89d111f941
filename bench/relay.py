"""The cost of the relay (issue 33, point 4): a TLS request routed to another application's
worker, beside the same request served by the worker that holds the connection, and beside
the socket hand-off of a plain listener.

    .venv/bin/python bench/relay.py [--rounds 3] [--duration 5] [--connections 100]
        [--cases tls-direct,tls-relay,...] [--json FILE] [--markdown FILE]
    .venv/bin/python bench/relay.py --instructions [--requests 2000,6000]

The server: ``python -m corral --config DOC`` with a Unit document of two applications ``a``
and ``b`` (both bench/apps/hello.py, one worker each) behind one listener passing to routes
(``/a/*`` to ``a``, ``/b/*`` to ``b``), with an ECDSA P-256 certificate (tls_load.py) or plain.
Every server process runs under ``taskset -c 0`` (the two workers share that core, as the two
hops of one request would on a busy machine), wrk under ``taskset -c 1`` (run.py's pinning).

Which worker accepts a connection is the kernel's choice, so each load makes it a's: b's
worker is stopped (SIGSTOP) while wrk opens its connections and continued as soon as they are
all established (a few milliseconds: the first requests on them wait that long). The cases:

- ``direct``: ``GET /a/`` on connections a's worker holds: the holding worker answers.
- ``relay`` (TLS): ``GET /b/``: every request goes from a's worker through the relay to b's.
- ``handoff`` (plain): ``GET /b/``: the first request of each connection hands the socket to
  b's worker, which answers the rest itself (a plain connection moves; a TLS session cannot).
- ``alternate``: a wrk script alternates ``/a/`` and ``/b/`` on each connection. Plain: one
  socket hand-off per request. TLS: the relay and a hand-off of the pair's end per request.

Figures per case: requests/s and wrk's latency percentiles, and each worker's CPU per request
(user + system from /proc over the requests answered): the medians over the rounds, the rounds
interleaving the cases. ``--instructions`` counts instead, with callgrind, the user-space
instructions each worker executes per request, a client of this script's own sending
sequential keep-alive requests on one connection: the counters are zeroed before and dumped
after each of two runs of different lengths, and the difference divided by the difference in
requests takes the fixed costs out (as instructions.sh does for the request path alone).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import run  # noqa: E402 (bench/run.py: parse_wrk, CPU seconds, machine facts, pinning)
import tls_load  # noqa: E402

CASES = ("tls-direct", "tls-relay", "tls-alternate", "plain-direct", "plain-handoff",
         "plain-alternate")  # fmt: skip
PATHS = {"direct": "/a/", "relay": "/b/", "handoff": "/b/", "alternate": "/a/"}
RATIOS = [
    ("tls-direct", "tls-relay"),
    ("plain-direct", "plain-handoff"),
    ("tls-direct", "tls-alternate"),
    ("plain-direct", "plain-alternate"),
    ("plain-direct", "tls-direct"),
]
ALTERNATE = """
local paths = {"/a/", "/b/"}
local n = 0
request = function()
    n = n + 1
    return wrk.format("GET", paths[n % 2 + 1])
end
"""


def document(directory: Path, tls: bool, slow: bool = False) -> dict[str, Any]:
    """``slow``: under valgrind, which runs everything some 50 times slower."""
    hello = {"type": "python", "path": str(run.APPS), "module": "hello", "callable": "application"}
    doc: dict[str, Any] = {
        "listeners": {f"{run.HOST}:0": {"pass": "routes"}},
        "routes": [
            {"match": {"uri": f"/{name}/*"}, "action": {"pass": f"applications/{name}"}}
            for name in ("a", "b")
        ],
        "applications": {"a": dict(hello), "b": dict(hello)},
        "settings": {},
    }
    if slow:
        doc["settings"].update(tls_handshake_timeout=300, timeout=600)
        for application in doc["applications"].values():
            application["startup_timeout"] = 600
    if tls:
        cert, key = tls_load.certificate_files(directory, "ecdsa")
        doc["settings"].update(certfile=str(cert), keyfile=str(key))
    return doc


class Corral:
    """corral with the document, its workers' pids by application and its port."""

    def __init__(self, directory: Path, tls: bool, wrap: list[str]) -> None:
        config = directory / ("tls.json" if tls else "plain.json")
        config.write_text(json.dumps(document(directory, tls, slow=bool(wrap[:1] == ["valgrind"]))))
        argv = [*wrap, sys.executable, "-m", "corral", f"--config={config}"]
        self.log = (directory / f"{config.stem}.log").open("w")
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.tls = tls
        self.log_path = directory / f"{config.stem}.log"
        deadline = time.monotonic() + 600
        while True:
            text = self.log_path.read_text()
            ready = re.findall(r"worker \d+ of (\w+) ready \(pid (\d+)", text)
            port = re.search(r"listening on \w+://[\d.]+:(\d+)", text)
            if len(ready) >= 2 and port:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"corral did not start:\n{text}")
            time.sleep(0.2)
        self.pids = {name: int(pid) for name, pid in ready}
        self.port = int(port.group(1))

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def established(port: int) -> int:
    """Client connections to ``port`` established (the server's side of each)."""
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return len(out.splitlines())


def load(server: Corral, case: str, args: argparse.Namespace, script: Path) -> dict[str, Any]:
    """One wrk load of ``case`` on connections a's worker accepted."""
    kind = case.split("-", 1)[1]
    scheme = "https" if server.tls else "http"
    flags = f"wrk -t1 -c{args.connections} -d{args.duration:g}s --timeout 5s --latency"
    argv = run.cmd("taskset -c", run.CLIENT_CPU, flags)
    if kind == "alternate":
        argv += ["-s", str(script)]
    argv.append(f"{scheme}://{run.HOST}:{server.port}{PATHS[kind]}")
    pids = list(server.pids.values())
    os.kill(server.pids["b"], signal.SIGSTOP)
    try:
        wrk = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 5
        while established(server.port) < args.connections and time.monotonic() < deadline:
            time.sleep(0.002)
    finally:
        os.kill(server.pids["b"], signal.SIGCONT)
    cpu = {name: run.cpu_seconds_of([pid]) for name, pid in server.pids.items()}
    output, _ = wrk.communicate()
    used = {name: run.cpu_seconds_of([pid]) - cpu[name] for name, pid in server.pids.items()}
    figures = run.parse_wrk(output)
    requests = figures["requests"] or 1
    figures["cpu_us_per_request"] = {name: 1e6 * s / requests for name, s in used.items()}
    figures["errors"] = run.error_count(figures)
    assert all(run._alive(pid) for pid in pids), "a worker died"
    return figures


def measure(args: argparse.Namespace, directory: Path) -> dict[str, list[dict[str, Any]]]:
    script = directory / "alternate.lua"
    script.write_text(ALTERNATE)
    results: dict[str, list[dict[str, Any]]] = {case: [] for case in args.cases}
    pin = ["taskset", "-c", run.SERVER_CPU]
    for round_ in range(args.rounds):
        for tls in (True, False):
            cases = [case for case in args.cases if case.startswith("tls" if tls else "plain")]
            if not cases:
                continue
            server = Corral(directory, tls, pin)
            try:
                warm = argparse.Namespace(**{**vars(args), "duration": 1})
                load(server, cases[0], warm, script)
                for case in cases:
                    figures = load(server, case, args, script)
                    results[case].append(figures)
                    print(f"round {round_ + 1} {case}: {figures['rps']:,.0f} req/s, p50 "
                          f"{figures['latency_ms'].get('p50')} ms, CPU us/request "
                          f"{figures['cpu_us_per_request']}", flush=True)  # fmt: skip
            finally:
                server.stop()
    return results


# -- instructions per request (callgrind) -------------------------------------------------


@contextlib.contextmanager
def client(port: int, tls: bool) -> Iterator[socket.socket]:
    sock = socket.create_connection((run.HOST, port), timeout=600)  # (under valgrind)
    if tls:
        sock = tls_load.client_context().wrap_socket(sock)
    try:
        yield sock
    finally:
        sock.close()


def ask(sock: socket.socket, paths: list[str]) -> None:
    """Keep-alive GETs one after the other, each answer read to its end (13 bytes)."""
    for path in paths:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        data = b""
        while not data.endswith(b"Hello, world!"):
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("closed")
            data += chunk


def executed(directory: Path, pid: int) -> int:
    """The instructions a worker ran in its life, all its threads together: the total its
    callgrind file (``cg.PID``, written as it exited) gives."""
    text = (directory / f"cg.{pid}").read_text(errors="replace")
    found = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
    if found is None:
        raise RuntimeError(f"no total in {directory / f'cg.{pid}'}")
    return int(found.group(1))


def counted(directory: Path, tls: bool, kind: str, requests: int) -> dict[str, int]:
    """Each worker's instructions over a server's life: started under callgrind (its forked
    workers too: the callgrind_control of a forked child does not answer), one connection
    accepted by a's worker asking ``requests`` requests of ``kind`` one after the other, then
    stopped."""
    wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={directory}/cg.%p"]
    paths = ["/a/", "/b/"] * (requests // 2) if kind == "alternate" else [PATHS[kind]] * requests
    server = Corral(directory, tls, wrap)
    try:
        with contextlib.ExitStack() as stack:
            os.kill(server.pids["b"], signal.SIGSTOP)
            try:  # accepted (and its handshake made) by a's worker
                sock = stack.enter_context(client(server.port, tls))
                ask(sock, ["/a/"])
            finally:
                os.kill(server.pids["b"], signal.SIGCONT)
            ask(sock, paths)
    except BaseException:
        print(server.log_path.read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        server.stop()
    return {name: executed(directory, pid) for name, pid in server.pids.items()}


def instructions(args: argparse.Namespace, directory: Path) -> dict[str, dict[str, float]]:
    """User-space instructions per request in each worker, for each case: two servers' lives,
    with ``args.requests`` requests; the difference over the difference in requests leaves the
    start, the first connection and the stop out."""
    os.environ["PYTHONHASHSEED"] = "0"  # string hashes decide dict probes: counts repeat
    short, long = args.requests
    out: dict[str, dict[str, float]] = {}
    for case in args.cases:
        tls, kind = case.startswith("tls"), case.split("-", 1)[1]
        few, many = (counted(directory, tls, kind, n) for n in (short, long))
        out[case] = {name: (many[name] - few[name]) / (long - short) for name in many}
        print(f"{case}: instructions per request {out[case]}", flush=True)
    return out


# -- report ------------------------------------------------------------------------------------


def markdown(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    def median(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    rows = [
        "| case | req/s | p50 ms | p99 ms | a's CPU µs/req | b's CPU µs/req | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rps = {}
    for case, runs in results.items():
        if not runs:
            continue
        rps[case] = median([r["rps"] for r in runs])
        rows.append(
            f"| {case} | {rps[case]:,.0f} "
            f"| {median([r['latency_ms'].get('p50', float('nan')) for r in runs]):.2f} "
            f"| {median([r['latency_ms'].get('p99', float('nan')) for r in runs]):.2f} "
            f"| {median([r['cpu_us_per_request']['a'] for r in runs]):.1f} "
            f"| {median([r['cpu_us_per_request']['b'] for r in runs]):.1f} "
            f"| {sum(r['errors'] for r in runs)} |"
        )
    for base, other in RATIOS:
        if base in rps and other in rps:
            rows.append(f"| {other} / {base} | {rps[other] / rps[base]:.2f}x | | | | | |")
    return "\n".join(rows) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--instructions", action="store_true", help="callgrind counts instead")
    parser.add_argument("--requests", default="2000,6000", help="two run lengths (callgrind)")
    args = parser.parse_args(argv)
    args.cases = [case for case in args.cases.split(",") if case]
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases: {sorted(unknown)}")
    args.requests = [int(n) for n in args.requests.split(",")]
    return args


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as name:
        directory = Path(name)
        tls_load.make_certificates(directory)
        facts = {"machine": run.machine_info(), "args": {k: str(v) for k, v in vars(args).items()}}
        if args.instructions:
            figures: Any = instructions(args, directory)
            text = "\n".join(
                f"| {case} | {f['a']:,.0f} | {f['b']:,.0f} | {f['a'] + f['b']:,.0f} |"
                for case, f in figures.items()
            )
            text = ("| case | a's instructions/req | b's | both |\n| --- | ---: | ---: | ---: |\n"
                    + text + "\n")  # fmt: skip
        else:
            figures = measure(args, directory)
            text = markdown(figures, args)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({**facts, "results": figures}, indent=1))
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()

"""Each language's hello behind corral and behind nginx (issue 35, point 5).

    .venv/bin/python bench/polyglot.py [--rounds 3] [--cases node-direct,node-nginx,...]
        [--requests 100000] [--duration 5] [--json FILE] [--markdown FILE]

A case is a front and a backend, or a backend alone (``*-direct``). The backends are each
language's own server running the seed article's hello (bench/apps/polyglot/): Node.js's
``http`` module, php-fpm (Debian's ``php-fpm``) with ``index.php``. The fronts, one worker
each:

- ``node-corral-proxy``: corral's routes pool with a route whose action is Unit's ``proxy`` to
  a node process this script starts;
- ``node-corral-external``: the same node program as Unit's ``"type": "external"`` application,
  started by corral's master (``processes: 1``), reached through the proxy;
- ``node-nginx``: nginx ``proxy_pass`` to a node process, ``keepalive`` to the upstream
  (HTTP/1.1, ``Connection ""``), as its documentation sets a kept upstream up;
- ``php-corral``: Unit's ``"type": "php"`` application (``processes: 4``: php-fpm's children),
  over FastCGI, php-fpm started and supervised by corral's master;
- ``php-nginx``: nginx ``fastcgi_pass`` with ``fastcgi_keep_conn on`` and upstream
  ``keepalive`` to a php-fpm of the same configuration (4 children: corral's own pool
  configuration, `corral.php.fpm.fpm_pool`, started by this script);
- ``node-direct``: the node process alone, the reference for what a front costs;
- ``go-``, ``perl-``, ``ruby-`` and ``java-corral``: Unit's ``"go"`` (the Go hello built with
  ``go build``, on descriptor 3), ``"perl"`` (Starman, ``processes: 4``: its workers),
  ``"ruby"`` (one Puma, ``threads: 4``) and ``"java"`` (one Jetty 9 deploying the hello
  servlet's webapp) applications, started and supervised by corral's master, reached through
  the proxy;
- ``go-``, ``perl-``, ``ruby-`` and ``java-nginx``: nginx ``proxy_pass`` with upstream
  ``keepalive 128`` (corral's ``proxy_keepalive``) to the same backend, started as corral's
  master starts it (bench/backends.py: the same command, workers and threads, the same socket
  handed over), by this script;
- ``node-nginx-keep128``: ``node-nginx`` keeping 128 idle connections rather than 32 (with 100
  requests at once, 32 kept make nginx open an upstream connection every other request).

A java case's wrk warm-up is 10 s rather than 1 (the JVM compiles its hot code meanwhile).

Python has no pair: corral is the Python server (bench/run.py measures it against the others).

Every server process (front, backend, php-fpm's children) runs under ``taskset -c 0``, the
clients under ``taskset -c 1`` (bench/run.py's pinning): a front and its backend share one
core, so a front that spends more per request leaves the backend less of it, and the figure
says so. Two loads per case, as the issue asks: ``ab -n REQUESTS -c 100`` (the article's: a
new connection per request, HTTP/1.0) and ``wrk -t1 -c100`` keep-alive for ``--duration``
seconds after a 1 s warm-up. Each round starts every case once, in an order rotated by
round; the tables give medians over the rounds and the ratios of the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import backends  # noqa: E402 (the go, perl, ruby and java backends nginx fronts)
import run  # noqa: E402 (bench/run.py: servers, wrk, machine facts, pinning)
import tls_load  # noqa: E402 (ab's report)

APPS = BENCH / "apps" / "polyglot"
# the languages whose servers corral's master runs as Unit's types (bench/backends.py)
LANGUAGES = ("go", "perl", "ruby", "java")
PERL_WORKERS = 4  # Starman's (preforking: a worker per connection at a time)
RUBY_THREADS = 4  # one Puma's
# nginx's idle connections kept per upstream in the language pairs and node-nginx-keep128:
# corral's proxy_keepalive default, so both fronts keep as many. (node-nginx keeps 32: with
# 100 requests at once, it then opens about one upstream connection every two requests.)
NGINX_KEEPALIVE = 128
# seconds of wrk before the measured one: a JVM compiles its hot code in the first seconds
WARMUP = {"java": 10.0}
OUT = BENCH / "out" / "polyglot"
NODE = shutil.which("node") or "/usr/bin/node"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
BODIES = {"node": b"Hello, Node.js on corral!\n", "php": b"Hello, PHP on corral!\n"}
BODIES.update((name, f"Hello, {name.title()} on corral!\n".encode()) for name in LANGUAGES)
PHP_CHILDREN = 4
CONNECTIONS = 100
# (case, reference): the ratios the point 5 names
RATIOS = [
    ("node-corral-proxy", "node-nginx"),
    ("node-corral-external", "node-nginx"),
    ("node-corral-proxy", "node-direct"),
    ("node-nginx", "node-direct"),
    ("node-corral-proxy", "node-nginx-keep128"),
    ("php-corral", "php-nginx"),
    *((f"{name}-corral", f"{name}-nginx") for name in LANGUAGES),
]


@dataclass
class Running:
    """A case's processes, and the port its clients use."""

    port: int
    processes: list[run.ServerProcess]
    front: run.ServerProcess

    def stop(self, grace: float = 8.0) -> None:
        for process in reversed(self.processes):
            process.stop(grace)


def _free_port(ports: run.Ports) -> int:
    return ports.take()


def _start(argv: list[str], name: str, env: dict[str, str] | None = None) -> run.ServerProcess:
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        return run.ServerProcess(argv, APPS, OUT / f"{name}.log", pin=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _answers(port: int, deadline_s: float = 0.0) -> tuple[int, bytes] | None:
    """GET / until it answers 200 (a 502 or 503 while a backend starts is waited past): the
    last status and body, None if nothing answered in time."""
    deadline = time.monotonic() + (deadline_s or (300.0 if WRAP else 20.0))
    got = None
    while time.monotonic() < deadline:
        try:
            got = run.http_get(port, "/")
        except (OSError, http.client.HTTPException):
            pass
        else:
            if got[0] not in (502, 503):
                return got
        time.sleep(0.1)
    return got


def _ready(running: Running, body: bytes, name: str, deadline_s: float = 0.0) -> Running:
    got = _answers(running.port, deadline_s)
    if got != (200, body):
        running.stop()
        raise SystemExit(f"{name} did not answer {body!r}: {got}\n{running.front.log_tail()}")
    return running


def node(ports: run.Ports, name: str) -> run.ServerProcess:
    """A node hello on a port of its own; its port in ``.port``."""
    port = _free_port(ports)
    process = _start([NODE, str(APPS / "hello.js")], name, {"PORT": str(port)})
    process.port = port  # type: ignore[attr-defined]
    if _answers(port) != (200, BODIES["node"]):
        process.stop()
        raise SystemExit(f"node did not start: {process.log_tail()}")
    return process


# a command the fronts run under (--instructions: callgrind)
WRAP: list[str] = []


def corral(document: dict[str, Any], name: str) -> run.ServerProcess:
    from corral.core import _stale

    # a source edited since the build makes corral run its Python core (its log's first line
    # says so): a figure of that is not one of corral's, and a run's rounds would mix both
    stale = _stale()
    if stale is not None:
        raise SystemExit(f"the compiled core is older than {stale}: pip install -e . first")
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(document, indent=1))
    return _start([*WRAP, sys.executable, "-m", "corral", f"--config={path}"], name)


def listener(port: int, target: str) -> dict[str, Any]:
    return {f"{run.HOST}:{port}": {"pass": target}}


def php_app() -> dict[str, Any]:
    return {"type": "php", "root": str(APPS), "processes": PHP_CHILDREN}


def php_fpm(name: str, listen: str) -> run.ServerProcess:
    """php-fpm for the bench's php application as corral configures it (for nginx), listening
    on ``listen`` once this returns."""
    from corral.config.document import validate_document
    from corral.php.fpm import fpm_pool

    app = validate_document({"applications": {"php": php_app()}}).applications["php"]
    pool = fpm_pool("php", app, listen=listen)
    Path(pool.listen).unlink(missing_ok=True)
    Path(pool.config_path).write_text(pool.config)
    process = _start(list(pool.command), name)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not _unix_answers(pool.listen):
        time.sleep(0.05)
    return process


def _unix_answers(path: str) -> bool:
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(path)
        except OSError:
            return False
    return True


def nginx(port: int, name: str, location: str, upstream: str, keep: int = 32) -> run.ServerProcess:
    """nginx, 1 worker, answering ``location``'s way from ``upstream``'s servers, keeping
    ``keep`` idle connections to them."""
    prefix = OUT / name
    for temp in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / "tmp" / temp).mkdir(parents=True, exist_ok=True)
    # (php-fpm's socket is its application user's: root's when corral runs as root, and
    # nginx's workers would otherwise be nobody)
    user = "user root;\n" if os.geteuid() == 0 else ""
    (prefix / "nginx.conf").write_text(
        f"""daemon off;
{user}master_process on;
worker_processes 1;
pid nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    server_tokens off;
    keepalive_requests 1000000;
    client_body_temp_path tmp/client_body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    upstream backend {{
        {upstream}
        keepalive {keep};
        keepalive_requests 1000000;
    }}
    server {{
        listen {run.HOST}:{port};
        root {APPS};
        location / {{
            {location}
        }}
    }}
}}
"""
    )
    return _start(
        [NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", "stderr"], name
    )


# -- the cases: each starts its processes and returns them once they answer


def node_direct(ports: run.Ports) -> Running:
    backend = node(ports, "node-direct")
    return Running(backend.port, [backend], backend)  # type: ignore[attr-defined]


def _node_nginx(ports: run.Ports, name: str, keep: int) -> Running:
    backend = node(ports, f"{name}-backend")
    port = _free_port(ports)
    front = nginx(
        port,
        name,
        'proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";',
        f"server {run.HOST}:{backend.port};",  # type: ignore[attr-defined]
        keep=keep,
    )
    return _ready(Running(port, [backend, front], front), BODIES["node"], "nginx")


def node_nginx(ports: run.Ports) -> Running:
    return _node_nginx(ports, "node-nginx", 32)


def node_nginx_keep128(ports: run.Ports) -> Running:
    return _node_nginx(ports, "node-nginx-keep128", NGINX_KEEPALIVE)


def node_corral_proxy(ports: run.Ports) -> Running:
    backend = node(ports, "node-corral-backend")
    port = _free_port(ports)
    address = f"http://{run.HOST}:{backend.port}"  # type: ignore[attr-defined]
    document = {
        "listeners": listener(port, "routes"),
        "routes": [{"action": {"proxy": address}}],
    }
    front = corral(document, "node-corral-proxy")
    return _ready(Running(port, [backend, front], front), BODIES["node"], "corral")


def node_corral_external(ports: run.Ports) -> Running:
    port = _free_port(ports)
    document = {
        "listeners": listener(port, "applications/node"),
        "applications": {
            "node": {
                "type": "external",
                "executable": NODE,
                "arguments": [str(APPS / "hello.js")],
                "processes": 1,
            }
        },
    }
    front = corral(document, "node-corral-external")
    return _ready(Running(port, [front], front), BODIES["node"], "corral")


def php_corral(ports: run.Ports) -> Running:
    port = _free_port(ports)
    document = {
        "listeners": listener(port, "applications/php"),
        "applications": {"php": php_app()},
    }
    front = corral(document, "php-corral")  # (its master starts php-fpm)
    return _ready(Running(port, [front], front), BODIES["php"], "corral")


def php_nginx(ports: run.Ports) -> Running:
    listen = str(OUT / "php-nginx.sock")
    fpm = php_fpm("php-nginx-fpm", listen)
    port = _free_port(ports)
    front = nginx(
        port,
        "php-nginx",
        "include /etc/nginx/fastcgi_params; "
        "fastcgi_param SCRIPT_FILENAME $document_root/index.php; "
        "fastcgi_pass backend; fastcgi_keep_conn on;",
        f"server unix:{listen};",
        # a kept connection holds a php-fpm child while idle, and nginx opens a connection per
        # request beyond those kept (no queue in its free version): kept as many as there are
        # children, the last requests of a load wait in php-fpm's backlog behind idle kept
        # connections until ab gives up (seen). Half the children kept: never all held.
        keep=PHP_CHILDREN // 2,
    )
    return _ready(Running(port, [fpm, front], front), BODIES["php"], "nginx")


def language_app(language: str) -> dict[str, Any]:
    """The language's hello as Unit's application (its program built first)."""
    if language == "go":
        return {"type": "go", "executable": str(backends.go_hello(APPS, OUT))}
    if language == "perl":
        return {"type": "perl", "script": str(APPS / "hello.psgi"), "processes": PERL_WORKERS}
    if language == "ruby":
        return {"type": "ruby", "script": str(APPS / "config.ru"), "threads": RUBY_THREADS}
    return {"type": "java", "webapp": str(backends.java_webapp(APPS, OUT))}


# a JVM on a shared core takes its time
STARTUP = {"java": 120.0}


def language_corral(language: str, ports: run.Ports) -> Running:
    port = _free_port(ports)
    document = {
        "listeners": listener(port, f"applications/{language}"),
        "applications": {language: language_app(language)},
    }
    front = corral(document, f"{language}-corral")  # (its master starts the backend)
    running = Running(port, [front], front)
    return _ready(running, BODIES[language], "corral", STARTUP.get(language, 0.0))


def language_nginx(language: str, ports: run.Ports) -> Running:
    backend = backends.Pool(language, language_app(language), OUT / f"{language}-backend.log")
    wait = STARTUP.get(language, 0.0)
    if _answers(backend.port, wait) != (200, BODIES[language]):
        backend.stop()
        raise SystemExit(f"{language} did not start: {backend.log_tail()}")
    port = _free_port(ports)
    front = nginx(
        port,
        f"{language}-nginx",
        'proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";',
        " ".join(f"server {address};" for address in backend.addresses),
        keep=NGINX_KEEPALIVE,
    )
    running = Running(port, [backend, front], front)  # type: ignore[list-item]
    return _ready(running, BODIES[language], "nginx", wait)


CASES: dict[str, Callable[[run.Ports], Running]] = {
    "node-direct": node_direct,
    "node-nginx": node_nginx,
    "node-nginx-keep128": node_nginx_keep128,
    "node-corral-proxy": node_corral_proxy,
    "node-corral-external": node_corral_external,
    "php-nginx": php_nginx,
    "php-corral": php_corral,
}
for _language in LANGUAGES:
    CASES[f"{_language}-nginx"] = functools.partial(language_nginx, _language)
    CASES[f"{_language}-corral"] = functools.partial(language_corral, _language)
LOADS = ("ab", "wrk")


def ab(port: int, requests: int) -> dict[str, Any]:
    argv = ["taskset", "-c", run.CLIENT_CPU, "ab", "-q", "-r", "-n", str(requests)]
    argv += ["-c", str(CONNECTIONS), f"http://{run.HOST}:{port}/"]
    before = run.cpu_seconds_busy()[0]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - start
    result = tls_load.parse_ab(done.stdout)
    result["busy_cores"] = round((run.cpu_seconds_busy()[0] - before) / elapsed, 2)
    if result["rps"] is None:
        result["error"] = f"ab failed ({done.returncode}): {(done.stderr or done.stdout)[-300:]}"
    return result


def measure(running: Running, args: argparse.Namespace, name: str) -> dict[str, dict[str, Any]]:
    load = run.Load(CONNECTIONS)
    run.run_wrk(load, running.port, "/", WARMUP.get(name.partition("-")[0], 1.0))  # warm-up
    wrk = run.run_wrk(load, running.port, "/", args.duration, server_pid=running.front.proc.pid)
    return {"wrk": wrk, "ab": ab(running.port, args.requests)}


def rounds(args: argparse.Namespace) -> dict[str, Any]:
    OUT.mkdir(parents=True, exist_ok=True)
    names = [name.strip() for name in args.cases.split(",")] if args.cases else list(CASES)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {n: {x: [] for x in LOADS} for n in names}
    ports = run.Ports(args.first_port)
    for number in range(args.rounds):
        order = names[number % len(names) :] + names[: number % len(names)]
        for name in order:
            running = CASES[name](ports)
            try:
                got = measure(running, args, name)
            finally:
                running.stop()
            for load in LOADS:
                results[name][load].append(got[load])
            line = ", ".join(
                f"{load} {got[load]['rps'] or 0:,.0f}"
                + (f" ({run.error_count(got[load])} errors)" if run.error_count(got[load]) else "")
                for load in LOADS
            )
            print(f"round {number + 1}: {name}: {line} req/s", flush=True)
    return {
        "machine": run.machine_info(),
        "arguments": vars(args),
        "results": results,
    }


def median(figures: list[dict[str, Any]]) -> float | None:
    values = [f["rps"] for f in figures if f.get("rps") and not run.error_count(f)]
    return statistics.median(values) if values else None


def markdown(data: dict[str, Any]) -> str:
    machine = data["machine"]
    arguments = data["arguments"]
    results = data["results"]
    lines = [
        f"Measured {machine['date']} by `bench/polyglot.py --rounds {arguments['rounds']} "
        f"--requests {arguments['requests']} --duration {arguments['duration']:g}` on "
        f"{machine['nproc']} x {machine['cpu']} ({machine['os']}, {machine['kernel']}), "
        f"{machine['tools']['nginx']}, node {_version([NODE, '--version'])}, "
        f"{_version([_fpm(), '-v'])}{backends.versions(LANGUAGES, list(results))}. "
        "Every server process under `taskset -c 0` (a front and "
        "its backend share the core), the clients under `taskset -c 1`; "
        f"`ab -n {arguments['requests']} -c {CONNECTIONS}` (a connection per request) and "
        f"`wrk -t1 -c{CONNECTIONS} -d{arguments['duration']:g}s` keep-alive. "
        f"Median req/s over {arguments['rounds']} rounds (each figure: the rounds' figures).",
        "",
        "| case | ab -c100 | wrk keep-alive -c100 |",
        "| --- | --- | --- |",
    ]
    for name, loads in results.items():
        cells = []
        for load in LOADS:
            figures = loads[load]
            middle = median(figures)
            each = " / ".join(f"{f['rps'] or 0:,.0f}" for f in figures)
            errors = sum(run.error_count(f) for f in figures)
            cell = f"**{middle:,.0f}** ({each})" if middle else f"failed ({each})"
            cells.append(cell + (f" ⚠ {errors} errors" if errors else ""))
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines += ["", "| ratio | ab -c100 | wrk keep-alive -c100 |", "| --- | --- | --- |"]
    for case, reference in RATIOS:
        if case not in results or reference not in results:
            continue
        cells = []
        for load in LOADS:
            a, b = median(results[case][load]), median(results[reference][load])
            cells.append(f"{a / b:.2f}" if a and b else "-")
        lines.append(f"| {case} / {reference} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def _version(argv: list[str]) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (done.stdout or done.stderr).strip().splitlines()[0]
    return "?"


def _fpm() -> str:
    from corral.php.fpm import fpm_binary

    return fpm_binary()


# -- instructions per request (callgrind)


def _ask(port: int, requests: int, body: bytes, close: bool = False) -> None:
    """Keep-alive GETs on one connection, one after the other, each answer read whole;
    ``close``: each on a new connection, HTTP/1.0, as ab sends them."""
    if close:
        for _ in range(requests):
            with socket.create_connection((run.HOST, port), timeout=600) as sock:
                sock.sendall(b"GET / HTTP/1.0\r\nHost: bench\r\n\r\n")
                while sock.recv(65536):
                    pass
        return
    with socket.create_connection((run.HOST, port), timeout=600) as sock:
        for _ in range(requests):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
            data = b""
            while not data.endswith((body, b"\r\n0\r\n\r\n")):  # (php's: chunked)
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError("closed")
                data += chunk


def _worker_instructions(case: str, requests: int, args: argparse.Namespace) -> int:
    """The instructions corral's workers ran over a front's life (callgrind, the master's
    left out) in which ``requests`` requests went one after the other."""
    directory = OUT / "callgrind"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    WRAP[:] = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={directory}/cg.%p"]
    try:
        running = CASES[case](run.Ports(args.first_port))
        try:
            _ask(running.port, requests, BODIES[case.partition("-")[0]], args.close)
        finally:
            running.stop(grace=60.0)
    finally:
        WRAP.clear()
    total = 0
    for found in directory.glob("cg.*"):
        if found.name != f"cg.{running.front.proc.pid}":
            text = found.read_text(errors="replace")
            total += int(re.search(r"^(?:totals|summary): (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
    return total


def instructions(args: argparse.Namespace) -> None:
    """User-space instructions per request in the front's worker: two lives of different
    lengths, the difference over the difference in requests (start and stop left out)."""
    os.environ["PYTHONHASHSEED"] = "0"  # string hashes decide dict probes: counts repeat
    short, long = (int(n) for n in args.requests_per_life.split(","))
    names = [name.strip() for name in args.cases.split(",")] if args.cases else ["php-corral"]
    for case in names:
        few, many = (_worker_instructions(case, n, args) for n in (short, long))
        print(f"{case}: {(many - few) / (long - short):,.0f} instructions per request", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default="", help=f"some of {','.join(CASES)}")
    parser.add_argument("--requests", type=int, default=100_000, help="ab's -n (100000)")
    parser.add_argument("--duration", type=float, default=5.0, help="wrk's seconds (5)")
    parser.add_argument("--json", type=Path, default=OUT / "results.json")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    parser.add_argument("--render", action="store_true", help="only render --json's tables")
    parser.add_argument(
        "--instructions", action="store_true", help="callgrind: the front worker's count"
    )
    parser.add_argument("--requests-per-life", default="500,1500", help="(--instructions)")
    parser.add_argument(
        "--close", action="store_true", help="(--instructions) a new connection per request"
    )
    parser.add_argument(
        "--first-port",
        type=int,
        default=run.FIRST_PORT,
        help="the servers' ports from here (another bench on the machine: another range)",
    )
    args = parser.parse_args()
    if args.instructions:
        instructions(args)
        return
    if args.render:
        print(markdown(json.loads(args.json.read_text())))
        return
    data = rounds(args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=1, default=str))
    text = markdown(data)
    if args.markdown:
        args.markdown.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

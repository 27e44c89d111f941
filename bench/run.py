"""Side-by-side load runs of corral and its peers; writes bench/RESULTS.md.

Run it with the benchmark venv's interpreter (bench/setup.sh makes it), so every
Python server runs on the same interpreter:

    bench/.venv/bin/python bench/run.py                       # everything, 3 rounds
    bench/.venv/bin/python bench/run.py --duration 2 --rounds 1 --scenarios A
    bench/.venv/bin/python bench/run.py --only corral,granian
    bench/.venv/bin/python bench/run.py --render              # re-render from results.json
    bench/.venv/bin/python bench/run.py --scenarios S,Z,J     # files, compression (issue 32)
    bench/.venv/bin/python bench/run.py --scenarios T         # hello over TLS (issue 33)
    bench/.venv/bin/python bench/run.py --scenarios L         # limits configured (issue 34)

Each (server, configuration) is started once per round, measured at all its
loads (connection counts, keep-alive or `Connection: close`), measured for RSS
and stopped; the rounds interleave the servers (round 1: every server, round 2:
every server, ...). The server runs under `taskset -c 0` and wrk under
`taskset -c 1` unless a configuration says it runs unpinned. A server that
fails to start, or answers wrongly, is recorded as failed and the run goes on.

Standard library only (scenario T also uses the `openssl` and `ab` commands: tls_load.py).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gzip
import http.client
import json
import os
import platform
import random
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import tls_load

BENCH = Path(__file__).resolve().parent
APPS = BENCH / "apps"
OUT = BENCH / "out"
LOGS = OUT / "logs"
RESULTS_JSON = OUT / "results.json"
RESULTS_MD = BENCH / "RESULTS.md"
# the files of scenarios S, Z and J (write_site): nginx's root is SITE, the others serve FILES
# under /static
SITE = OUT / "site"
FILES = SITE / "static"
SMALL_FILE, LARGE_FILE = "1k.css", "1m.bin"
PAGE_FILE, JSON_FILE = "page-100k.html", "list-20k.json"  # bench/compressors.py's bodies
CERTS = OUT / "tls"  # scenario T's certificates, made anew by each run (tls_load.py)
EXPIRES_S = 86400  # every server's Cache-Control max-age for the files: Granian's default
PY = sys.executable
VENV_BIN = Path(PY).parent
HOST = "127.0.0.1"
SERVER_CPU = "0"
CLIENT_CPU = "1"
FIRST_PORT = 18100
HELLO = b"Hello, world!"
CLK_TCK = os.sysconf("SC_CLK_TCK")
NOISY_CPU_PCT = 10.0  # other processes' CPU, in % of one core, worth a mention
PEER_PACKAGES = [
    "corral",
    "gunicorn",
    "uWSGI",
    "granian",
    "waitress",
    "uvicorn",
    "hypercorn",
    "Django",
    "djangorestframework",
    "uvloop",
    "httptools",
    "bjoern",
    "whitenoise",
    "starlette",
]


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class App:
    """A WSGI application to serve: module:callable, its directory, what to GET. static: the
    server also serves FILES under /static (each server its own way: see the builders); gzip:
    the server compresses its answers with gzip at level 1 (corral by --compression, nginx by
    its gzip module)."""

    name: str
    target: str
    directory: Path
    path: str
    check: Callable[[bytes], str | None]
    static: bool = False
    gzip: bool = False
    certificate: str = ""  # served over TLS with CERTS' certificate of this kind (tls_load)
    limits: bool = False  # corral with a rate limit every client stays inside, and the rest

    @property
    def scheme(self) -> str:
        return "https" if self.certificate else "http"


@dataclass(frozen=True)
class Load:
    """One wrk measurement: a connection count, keep-alive or not. A named load fetches its
    own path (not the app's) with extra request fields: body is the file of FILES whose bytes
    its answer carries (gunzipped when it asks for gzip), revalidate adds an If-None-Match of
    the ETag the server gives the file (each server's own, fetched before the load), and
    metric says what the figure is: req/s, or bytes/s (wrk's Transfer/sec)."""

    connections: int
    keepalive: bool = True
    name: str = ""
    path: str = ""
    headers: tuple[str, ...] = ()
    body: str = ""
    revalidate: bool = False
    metric: str = "rps"  # or "bytes"
    client: str = "wrk"  # or "ab": a new connection and a full TLS handshake per request
    certificate: str = ""  # only on servers whose app has this certificate kind ("": every one)
    resumed: bool = False  # checked first that the server resumes a TLS session

    def applies(self, app: App) -> bool:
        return not self.certificate or self.certificate == app.certificate

    @property
    def key(self) -> str:
        kind = f"{'ka' if self.keepalive else 'close'}-{self.connections}"
        return f"{re.sub(r'[^a-z0-9]+', '-', self.name.lower())}-{kind}" if self.name else kind

    @property
    def label(self) -> str:
        kind = f"{'keep-alive' if self.keepalive else 'close'} c={self.connections}"
        unit = " (MiB/s)" if self.metric == "bytes" else ""
        return f"{self.name}, {kind}{unit}" if self.name else kind


Builder = Callable[["App", int, int, int], list[str]]  # app, workers, threads, port -> argv


@dataclass(frozen=True)
class Server:
    """How to start one server: family is the name --only selects."""

    family: str
    label: str
    build: Builder
    reference: bool = False
    asgi: bool = False  # runs ASGI applications only: not in the WSGI scenarios
    everywhere: bool = True  # in scenario A's every-WSGI-server list (else named by a scenario)


@dataclass(frozen=True)
class Config:
    """A server in one configuration, as one scenario runs it. Configurations with
    the same group are compared with each other in the ratio table."""

    server: str
    app: App
    workers: int = 1
    threads: int = 1
    pin: bool = True
    group: str = ""

    @property
    def spec(self) -> Server:
        return SERVERS[self.server]

    @property
    def id(self) -> str:
        grouped = f"-w{self.workers}" + (f"-t{self.threads}" if self.threads > 1 else "")
        if self.app.certificate:  # scenario T's groups are the certificate kinds
            return f"{self.server}-{self.app.certificate}"
        if self.app.limits:  # scenario L's group is the limited server
            return f"{self.server}-limited"
        return self.server + (grouped if self.group else "")

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def label(self) -> str:
        limited = ", limits configured" if self.app.limits else ""
        return self.spec.label + limited + (f" ({self.group})" if self.group else "")

    def argv(self, port: int) -> list[str]:
        return self.spec.build(self.app, self.workers, self.threads, port)


@dataclass
class Scenario:
    key: str
    title: str
    description: str
    loads: list[Load]
    configs: list[Config] = field(default_factory=list)


# --------------------------------------------------------------------------- apps


def check_hello(body: bytes) -> str | None:
    return None if body == HELLO else f"unexpected body {body[:60]!r}"


def check_json(body: bytes) -> str | None:
    return None if body == b'{"message":"Hello, world!"}' else f"unexpected body {body[:60]!r}"


def check_drf(body: bytes) -> str | None:
    try:
        users = json.loads(body)
    except ValueError:
        return f"body is not JSON: {body[:60]!r}"
    if not isinstance(users, list) or len(users) < 1:
        return f"expected a list of users, got {body[:60]!r}"
    return None


def check_file(name: str) -> Callable[[bytes], str | None]:
    """A check that the body is the file FILES/name (read when checking: run() writes it)."""

    def check(body: bytes) -> str | None:
        want = (FILES / name).read_bytes()
        return None if body == want else f"not {name}'s {len(want)} bytes: {body[:60]!r}"

    return check


DRF_DIR = OUT / "drf"
HELLO_APP = App("hello", "hello:application", APPS, "/", check_hello)
SLEEP_APP = App("sleep", "sleep:application", APPS, "/", check_hello)
DRF_APP = App("drf", "drfproj.wsgi:application", DRF_DIR, "/users/", check_drf)
# scenario L: every limit of issue 34 configured, none reached by the load (wrk's 100
# connections share one client address, whose rate is far above what one core answers)
LIMITED_HELLO_APP = App("hello-limited", "hello:application", APPS, "/", check_hello, limits=True)
LIMITS = (
    "--limit-rate 10000000r/s --limit-burst 1000 --limit-nodelay --limit-conn 1000 "
    "--limit-concurrency 1000 "
    "--allow-from 127.0.0.0/8"
)
ASGI_HELLO_APP = App("hello-asgi", "hello_asgi:app", APPS, "/", check_hello)
FASTAPI_APP = App("fastapi-json", "fastapi_json:app", APPS, "/json", check_json)
# the hello app behind each server's own file serving; readiness is the 1 KiB file
STATIC_APP = App(
    "static",
    "hello:application",
    APPS,
    f"/static/{SMALL_FILE}",
    check_file(SMALL_FILE),
    static=True,
)
STATIC_GZIP_APP = App(
    "static-gzip",
    "hello:application",
    APPS,
    f"/static/{PAGE_FILE}",
    check_file(PAGE_FILE),
    static=True,
    gzip=True,
)
# a Starlette app answering the 20 KiB JSON list: corral compresses it itself, Uvicorn runs
# it behind Starlette's GZipMiddleware (json_gzip:gzipped)
JSON_GZIP_APP = App("json-gzip", "json_gzip:app", APPS, "/json", check_file(JSON_FILE), gzip=True)
# hello and ASGI hello over TLS (scenario T), with each kind of certificate
TLS_APPS = {
    kind: App(f"hello-tls-{kind}", "hello:application", APPS, "/", check_hello, certificate=kind)
    for kind in tls_load.CERTIFICATES
}
TLS_ASGI_APPS = {
    kind: App(f"hello-asgi-tls-{kind}", "hello_asgi:app", APPS, "/", check_hello, certificate=kind)
    for kind in tls_load.CERTIFICATES
}


# --------------------------------------------------------------------------- servers


def cmd(*parts: str | Path) -> list[str]:
    """argv from flags written as space-separated text; Path parts stay whole."""
    argv: list[str] = []
    for part in parts:
        argv += [str(part)] if isinstance(part, Path) else part.split()
    return argv


def corral(app: App, workers: int, threads: int, port: int) -> list[str]:
    flags = f"-m corral {app.target} -w {workers} --threads {threads} -b {HOST}:{port}"
    # the share route --static writes; --compression: settings.http.compression for text and
    # JSON (among other types), gzip at level 1
    static = ["--static", f"/static={FILES}", "--static-expires", str(EXPIRES_S)]
    gzip = ["--compression", "gzip:1"]
    cert, key = tls_files(app)
    tls = cmd("--certfile", cert, "--keyfile", key)
    return (
        cmd(Path(PY), flags)
        + (static if app.static else [])
        + (gzip if app.gzip else [])
        + (tls if app.certificate else [])
        + (cmd(LIMITS) if app.limits else [])
    )


def tls_files(app: App) -> tuple[Path, Path]:
    """The certificate and key files of an app served over TLS."""
    return tls_load.certificate_files(CERTS, app.certificate or "ecdsa")


def corral_python(app: App, workers: int, threads: int, port: int) -> list[str]:
    """corral's pure-Python core (CORRAL_NO_EXTENSIONS=1), beside the compiled one."""
    return ["env", "CORRAL_NO_EXTENSIONS=1", *corral(app, workers, threads, port)]


def gunicorn_sync(app: App, workers: int, threads: int, port: int) -> list[str]:
    return cmd(VENV_BIN / "gunicorn", f"-w {workers} -k sync -b {HOST}:{port} {app.target}")


def gunicorn_gthread(app: App, workers: int, threads: int, port: int) -> list[str]:
    flags = f"-w {workers} -k gthread --threads {threads} -b {HOST}:{port} {app.target}"
    return cmd(VENV_BIN / "gunicorn", flags)


def whitenoise(app: App, workers: int, threads: int, port: int) -> list[str]:
    """gthread on hello behind WhiteNoise (apps/whitenoise_app.py: FILES under /static/,
    autorefresh off, max_age EXPIRES_S), as a Django or Flask site serves its files today."""
    served = App(app.name, "whitenoise_app:application", app.directory, app.path, app.check)
    return gunicorn_gthread(served, workers, threads, port)


def uwsgi(app: App, workers: int, threads: int, port: int, socket: str = "http") -> list[str]:
    return cmd(
        VENV_BIN / "uwsgi",
        f"--{socket}-socket {HOST}:{port} --module {app.target}",
        "--pythonpath", app.directory, "--chdir", app.directory,
        "--virtualenv", Path(sys.prefix),
        f"--processes {workers} --threads {threads} --master --disable-logging",
        "--listen 1024 --die-on-term",
    )  # fmt: skip


def uwsgi_http11(app: App, workers: int, threads: int, port: int) -> list[str]:
    # --http-socket closes the connection after every response; --http11-socket
    # keeps it alive (and so holds the single thread on one connection at a time).
    return uwsgi(app, workers, threads, port, socket="http11")


def granian(app: App, workers: int, threads: int, port: int, interface: str = "wsgi") -> list[str]:
    # --blocking-threads is the WSGI pool; an ASGI app runs on the runtime's thread
    pool = f"--blocking-threads {threads} " if interface == "wsgi" else ""
    # its static route, served by its Rust side before the application
    static = cmd(
        "--static-path-route /static --static-path-mount", FILES,
        f"--static-path-expires {EXPIRES_S}",
    ) if app.static else []  # fmt: skip
    # its TLS flags; its minimum version made corral's (1.2: its default is 1.3, which every
    # client here negotiates anyway)
    cert, key = tls_files(app)
    tls = cmd(
        "--ssl-certificate", cert, "--ssl-keyfile", key, "--ssl-protocol-min tls1.2"
    ) if app.certificate else []  # fmt: skip
    return cmd(
        VENV_BIN / "granian",
        f"--interface {interface} --http 1 --host {HOST} --port {port}",
        f"--workers {workers} {pool}--runtime-threads 1",
        "--no-access-log --log-level warning --working-dir", app.directory,
    ) + static + tls + [app.target]  # fmt: skip


def granian_asgi(app: App, workers: int, threads: int, port: int) -> list[str]:
    return granian(app, workers, threads, port, interface="asgi")


def uvicorn(app: App, workers: int, threads: int, port: int) -> list[str]:
    # its fastest stack: httptools and uvloop, as corral's
    flags = f"--host {HOST} --port {port} --workers {workers} --http httptools --loop uvloop"
    cert, key = tls_files(app)
    tls = cmd("--ssl-certfile", cert, "--ssl-keyfile", key) if app.certificate else []
    return cmd(VENV_BIN / "uvicorn", flags, "--no-access-log --log-level warning", *tls, app.target)


def uvicorn_gzip(app: App, workers: int, threads: int, port: int) -> list[str]:
    """Uvicorn on the app behind Starlette's GZipMiddleware (compresslevel=1): the module's
    `gzipped` beside its `app`."""
    module, _ = app.target.split(":")
    gzipped = App(app.name, f"{module}:gzipped", app.directory, app.path, app.check)
    return uvicorn(gzipped, workers, threads, port)


def hypercorn(app: App, workers: int, threads: int, port: int) -> list[str]:
    # uvloop, as Uvicorn and corral; its access log is off unless asked for
    flags = f"--bind {HOST}:{port} --workers {workers} --worker-class uvloop"
    return cmd(VENV_BIN / "hypercorn", flags, "--log-level warning", app.target)


def gunicorn_asgi(app: App, workers: int, threads: int, port: int) -> list[str]:
    # gunicorn's own ASGI worker (its parser, asyncio; uvloop when installed, as here)
    return cmd(VENV_BIN / "gunicorn", f"-w {workers} -k asgi -b {HOST}:{port} {app.target}")


def waitress(app: App, workers: int, threads: int, port: int) -> list[str]:
    # Single process: the threads of every "worker" go into its one pool.
    flags = f"--listen={HOST}:{port} --threads={workers * threads} --connection-limit=1000"
    return cmd(VENV_BIN / "waitress-serve", flags, app.target)


def nginx(app: App, workers: int, threads: int, port: int) -> list[str]:
    """nginx.conf (return 200) or, for an app with static files, nginx-files.conf with its
    root at SITE, and its gzip on when the app compresses."""
    name = "nginx-files" if app.static else "nginx-tls" if app.certificate else "nginx"
    # a directory per configuration: RESULTS.md's command names the file that ran
    prefix = OUT / ("nginx-gzip" if app.static and app.gzip else name)
    if app.certificate:
        prefix = OUT / f"{name}-{app.certificate}"
    (prefix / "tmp").mkdir(parents=True, exist_ok=True)
    text = (BENCH / f"{name}.conf").read_text()
    text = re.sub(r"listen\s+[\d.]+:\d+(\s+ssl)?;", rf"listen {HOST}:{port}\1;", text)
    if app.certificate:
        cert, key = tls_files(app)
        text = re.sub(r"(?m)^(\s*)ssl_certificate\s+[^;]+;", rf"\g<1>ssl_certificate {cert};", text)
        text = re.sub(
            r"(?m)^(\s*)ssl_certificate_key\s+[^;]+;", rf"\g<1>ssl_certificate_key {key};", text
        )
    if app.static:
        text = re.sub(r"(?m)^(\s*)root\s+[^;]+;", rf"\g<1>root {SITE};", text)
        text = re.sub(r"(?m)^(\s*)gzip\s+off;", rf"\g<1>gzip {'on' if app.gzip else 'off'};", text)
    conf = prefix / "nginx.conf"
    conf.write_text(text)
    binary = Path(shutil.which("nginx") or "/usr/sbin/nginx")
    return cmd(binary, "-p", prefix, "-c", conf, "-e stderr")


def bjoern(app: App, workers: int, threads: int, port: int) -> list[str]:
    # Always one process, one thread: bjoern has no workers nor threads to set.
    launcher = APPS / "bjoern_serve.py"
    return cmd(Path(PY), launcher, f"--host {HOST} --port {port} {app.target}")


def bare(app: App, workers: int, threads: int, port: int) -> list[str]:
    return cmd(Path(PY), BENCH / "bare.py", f"--host {HOST} --port {port}")


def bare_asgi(app: App, workers: int, threads: int, port: int) -> list[str]:
    return cmd(Path(PY), BENCH / "bare_asgi.py", f"--host {HOST} --port {port}", app.target)


def bare_asgi_task(app: App, workers: int, threads: int, port: int) -> list[str]:
    return [*bare_asgi(app, workers, threads, port), "--task"]


SERVERS: dict[str, Server] = {
    "corral": Server("corral", "corral", corral),
    "corral-asgi": Server("corral", "corral ASGI", corral, asgi=True, everywhere=False),
    "corral-python": Server("corral", "corral, Python core", corral_python),
    "gunicorn-sync": Server("gunicorn", "gunicorn sync", gunicorn_sync),
    "gunicorn-gthread": Server("gunicorn", "gunicorn gthread", gunicorn_gthread),
    "whitenoise": Server(
        "whitenoise", "WhiteNoise, gunicorn gthread", whitenoise, everywhere=False
    ),
    "uwsgi": Server("uwsgi", "uWSGI", uwsgi),
    "uwsgi-http11": Server("uwsgi", "uWSGI --http11-socket", uwsgi_http11),
    "granian": Server("granian", "Granian", granian),
    "granian-asgi": Server("granian", "Granian ASGI", granian_asgi, asgi=True),
    "uvicorn": Server("uvicorn", "Uvicorn", uvicorn, asgi=True),
    "uvicorn-gzip": Server(
        "uvicorn",
        "Uvicorn, Starlette GZipMiddleware",
        uvicorn_gzip,
        asgi=True,
        everywhere=False,
    ),
    "hypercorn": Server("hypercorn", "Hypercorn", hypercorn, asgi=True),
    "gunicorn-asgi": Server("gunicorn", "gunicorn ASGI worker", gunicorn_asgi, asgi=True),
    "waitress": Server("waitress", "Waitress", waitress),
    "bjoern": Server("bjoern", "bjoern (reference)", bjoern, reference=True),
    "nginx": Server("nginx", "nginx (reference)", nginx, reference=True),
    "bare": Server("bare", "bare loop (reference)", bare, reference=True),
    "bare-asgi": Server(
        "bare-asgi", "bare ASGI loop (reference)", bare_asgi, reference=True, asgi=True
    ),
    "bare-asgi-task": Server(
        "bare-asgi",
        "bare ASGI loop, a task per request (reference)",
        bare_asgi_task,
        reference=True,
        asgi=True,
    ),
}


# --------------------------------------------------------------------------- scenarios


def scenarios() -> list[Scenario]:
    """The seven scenarios, each with its loads and server configurations."""
    counts = [1, 5, 20, 100]
    hello, sleep, drf = HELLO_APP, SLEEP_APP, DRF_APP
    a = Scenario(
        "A",
        "hello, 1 worker x 1 thread",
        "Hello-world app; one worker process with one thread, pinned to core 0. "
        "Keep-alive and `Connection: close` (a new TCP connection per request) at "
        "1, 5, 20 and 100 connections. gunicorn's sync worker and uWSGI's `--http-socket` "
        "close every connection; uWSGI also runs with `--http11-socket`, which keeps it alive. "
        "nginx (`return 200`, no Python) and bench/bare.py (uvloop + httptools, no checks) "
        "are references, not WSGI servers; bjoern (a WSGI server in C on libev, one process, "
        "one thread, started by bench/apps/bjoern_serve.py) is a reference WSGI server.",
        [Load(c) for c in counts] + [Load(c, keepalive=False) for c in counts],
    )
    a.configs = [
        Config(name, hello)
        for name, server in SERVERS.items()
        if not server.asgi and server.everywhere
    ]

    python_peers = ["corral", "gunicorn-gthread", "uwsgi", "granian", "waitress"]
    b = Scenario(
        "B",
        "sleep 0.2 s, 2 workers x 50 threads",
        "The app sleeps 0.2 s per request, so at most 100 requests are in flight and "
        "the ideal is 100 / 0.2 = 500 req/s: this measures concurrency, not CPU. "
        "Servers run **unpinned** (they are not CPU-bound); wrk stays on core 1. "
        "Waitress is a single process: it runs with `--threads 100`.",
        [Load(100)],
    )
    b.configs = [Config(name, sleep, 2, 50, pin=False) for name in python_peers]

    c = Scenario(
        "C",
        "hello, 1 worker x 4 threads",
        "Hello-world app; one worker with a pool of 4 threads, pinned to core 0, "
        "100 keep-alive connections: the cost of handing requests to threads.",
        [Load(100)],
    )
    c.configs = [Config(name, hello, 1, 4) for name in python_peers]

    d = Scenario(
        "D",
        "Django REST framework users list",
        "GET /users/ of a minimal Django + DRF project (sqlite, 10 users, JSON; built by "
        "bench/apps/make_drf.py), 20 keep-alive connections, 1 and 2 worker processes "
        "with one thread each. 1-worker configurations are pinned to core 0; "
        "2-worker configurations run **unpinned** (both cores, shared with wrk on core 1). "
        "Waitress is a single process: `--threads` equals the worker count.",
        [Load(20)],
    )
    for w in (1, 2):
        group = f"{w} worker{'s' if w > 1 else ''}"
        d.configs += [
            Config(name, drf, w, 1, pin=w == 1, group=group)
            for name in [*python_peers[:1], "gunicorn-sync", *python_peers[1:]]
        ]

    e = Scenario(
        "E",
        "hello, 2 workers x 1 or 4 threads",
        "Hello-world app; two worker processes with one thread or a pool of four, beside "
        "gunicorn's gthread worker with the same counts, keep-alive and `Connection: close` at "
        "1, 20 and 100 connections: how a pool of threaded workers accepts (corral's "
        "load-balanced accept, acceptor.py). Servers run **unpinned**, wrk on core 1.",
        [Load(c) for c in (1, 20, 100)] + [Load(c, keepalive=False) for c in (1, 20, 100)],
    )
    for t in (1, 4):
        group = f"2 x {t} thread{'s' if t > 1 else ''}"
        e.configs += [
            Config(name, hello, 2, t, pin=False, group=group)
            for name in ("corral", "gunicorn-gthread")
        ]

    f = Scenario(
        "F",
        "ASGI hello, 1 worker",
        "Hello-world ASGI app (bench/apps/hello_asgi.py, the same answer as hello.py); one worker "
        "process pinned to core 0, keep-alive at 1, 20 and 100 connections and `Connection: "
        "close` at 1 and 100, beside Uvicorn (httptools and uvloop), Granian's ASGI interface, "
        "Hypercorn (uvloop) and gunicorn's ASGI worker (`-k asgi`). nginx (`return 200`) and "
        "bench/bare.py (uvloop + httptools writing a fixed answer) are the references, as in "
        "scenario A: what a round trip costs on this machine with no request path at all; "
        "bench/bare_asgi.py the least an ASGI server does (a scope, the application's coroutine "
        "stepped where its request was parsed, no checks), and the same with a task per request "
        "(`--task`), as every real ASGI server runs it.",
        [Load(c) for c in (1, 20, 100)] + [Load(c, keepalive=False) for c in (1, 100)],
    )
    asgi_servers = ("corral", "uvicorn", "granian-asgi", "hypercorn", "gunicorn-asgi")
    references = ("nginx", "bare", "bare-asgi", "bare-asgi-task")
    f.configs = [Config(name, ASGI_HELLO_APP) for name in (*asgi_servers, *references)]
    g = Scenario(
        "G",
        "FastAPI JSON, 1 worker",
        'A FastAPI endpoint answering `{"message":"Hello, world!"}` (bench/apps/'
        "fastapi_json.py, TechEmpower's JSON test); one worker pinned to core 0, keep-alive at 1 "
        "and 100 connections, beside the same peers as scenario F.",
        [Load(c) for c in (1, 100)],
    )
    g.configs = [Config(name, FASTAPI_APP) for name in asgi_servers]
    return [a, b, c, d, e, f, g, *file_scenarios(), tls_scenario(), limits_scenario()]


def file_scenarios() -> list[Scenario]:
    """Issue 32's files and compression: S (static files), Z (a file gzipped on the fly),
    J (an application's JSON gzipped)."""
    small, large = f"/static/{SMALL_FILE}", f"/static/{LARGE_FILE}"
    s = Scenario(
        "S",
        "static files, 1 worker",
        "Files served before any application, each server its own way, one worker pinned to "
        "core 0, 100 keep-alive connections: a 1 KiB CSS file (req/s), a 1 MiB file (MiB/s: "
        "wrk's Transfer/sec) and 304 revalidations of the 1 KiB file (every request with "
        "`If-None-Match` of the ETag that server gives it, fetched before the load). corral: "
        "its share route (`--static /static=DIR`); nginx: `sendfile on`, `open_file_cache "
        "max=1000 inactive=20s`, `open_file_cache_valid 1s` (bench/nginx-files.conf); "
        "Granian: its static route (`--static-path-route /static --static-path-mount DIR`, "
        "served by its Rust side, chunked, with neither `ETag` nor `Last-Modified`: nothing to "
        "revalidate, so its 304 cell is n/a); WhiteNoise (`autorefresh` off) around the hello "
        "app under gunicorn's gthread worker with 4 threads (bench/apps/whitenoise_app.py). "
        "Every one sends a max-age of 24 h. Before each load one request of its kind is "
        "checked (the file's bytes, or a 304), and under the load every answer must have that "
        "answer's size (wrk's bytes read per request). Issue 32's targets: 1 KiB at least "
        "1.0x nginx and 2x Granian; 1 MiB at least 0.9x nginx; 304 at least 0.8x nginx.",
        [
            Load(100, name="1 KiB file", path=small, body=SMALL_FILE),
            Load(100, name="1 MiB file", path=large, body=LARGE_FILE, metric="bytes"),
            Load(100, name="304 of the 1 KiB file", path=small, revalidate=True),
        ],
    )
    s.configs = [
        Config("corral", STATIC_APP),
        Config("nginx", STATIC_APP),
        Config("granian", STATIC_APP),
        Config("whitenoise", STATIC_APP, 1, 4),
    ]
    gzip_field = ("Accept-Encoding: gzip",)
    z = Scenario(
        "Z",
        "a 100 KiB text file gzipped on the fly, 1 worker",
        "bench/compressors.py's 100 KiB HTML page as a file with no precompressed sibling, "
        "asked for with `Accept-Encoding: gzip` and compressed for every request, 100 "
        "keep-alive connections, one worker pinned to core 0: corral's share route with "
        "`settings.http.compression` gzip at level 1 (`--compression gzip:1`) against nginx's "
        "gzip module (`gzip on; gzip_comp_level 1; "
        "gzip_types text/plain; gzip_vary on`: text/html is always in its types) on the "
        "configuration of scenario S. Each answer is checked to gunzip to the page; the "
        "compressed sizes are under the table. Issue 32's target: at least 1.0x nginx, with a "
        "compressed size within 5 % of nginx's.",
        [
            Load(
                100,
                name="100 KiB gzip",
                path=f"/static/{PAGE_FILE}",
                headers=gzip_field,
                body=PAGE_FILE,
            )
        ],
    )
    z.configs = [Config("corral", STATIC_GZIP_APP), Config("nginx", STATIC_GZIP_APP)]
    j = Scenario(
        "J",
        "a 20 KiB JSON answer gzipped, 1 worker",
        "bench/compressors.py's 20 KiB JSON list answered by a Starlette endpoint "
        "(bench/apps/json_gzip.py) and gzipped at level 1 (`Accept-Encoding: gzip`), 100 "
        "keep-alive connections, one worker pinned to core 0: corral compressing it itself "
        "(`--compression gzip:1`, as in scenario Z) against Uvicorn "
        "(httptools, uvloop) running the same endpoint behind Starlette's "
        "`GZipMiddleware(compresslevel=1)`. Issue 32's target: at least 2x Uvicorn.",
        [Load(100, name="20 KiB JSON gzip", path="/json", headers=gzip_field, body=JSON_FILE)],
    )
    j.configs = [Config("corral", JSON_GZIP_APP), Config("uvicorn-gzip", JSON_GZIP_APP)]
    return [s, z, j]


def tls_scenario() -> Scenario:
    """Issue 33's hello over TLS: keep-alive, new connections with full handshakes (ECDSA and
    RSA certificates) and with resumed sessions."""
    ecdsa, rsa = tls_load.CERTIFICATES
    t = Scenario(
        "T",
        "hello over TLS, 1 worker",
        "The hello app (WSGI; ASGI for Uvicorn and for corral beside it) over TLS, one worker "
        "pinned to core 0, the client on core 1, with a self-signed ECDSA P-256 or RSA 2048 "
        "certificate made by the run (`openssl req -x509`, bench/tls_load.py). corral: "
        "`--certfile/--keyfile`; Granian: `--ssl-certificate/--ssl-keyfile` (and "
        "`--ssl-protocol-min tls1.2`, corral's default); Uvicorn (httptools, uvloop): "
        "`--ssl-certfile/--ssl-keyfile`; nginx `return 200` over TLS (bench/nginx-tls.conf: "
        "`ssl_session_cache shared:SSL:10m`, `ssl_session_tickets on`) the reference. Every "
        "client negotiates TLS 1.3 (TLS_AES_256_GCM_SHA384, X25519). Loads: wrk keep-alive at "
        "100 connections; a new connection per request with a **full handshake**: "
        "`ab -r -t D -n 100000000 -c 100 https://...` (HTTP/1.0; ab never offers a session); a "
        "new connection per request **resumed**: wrk with `Connection: close` at 100 "
        "connections (wrk offers each connection's last session when it reconnects; before "
        "that load the runner checks that the server resumes a session, else n/a). The RSA "
        "rows measure the full handshake only: after it, the certificate plays no part. "
        "Issue 33's targets (point 7): keep-alive at least 1.25x Granian and 1.25x Uvicorn; the "
        "new-connection loads at least 1.0x the best Python peer, nginx the reference.",
        [
            Load(100, certificate=ecdsa),
            Load(100, keepalive=False, name="full handshake", client="ab", certificate=ecdsa),
            Load(100, keepalive=False, name="resumed", resumed=True, certificate=ecdsa),
            Load(100, keepalive=False, name="full handshake RSA", client="ab", certificate=rsa),
        ],
    )
    for kind, label in tls_load.CERTIFICATES.items():
        wsgi, asgi = TLS_APPS[kind], TLS_ASGI_APPS[kind]
        t.configs += [
            Config("corral", wsgi, group=label),
            Config("corral-asgi", asgi, group=label),
            Config("granian", wsgi, group=label),
            Config("uvicorn", asgi, group=label),
            Config("nginx", wsgi, group=label),
        ]
    return t


def limits_scenario() -> Scenario:
    """Issue 34, point 6: scenario A's corral beside the same with its limits configured."""
    el = Scenario(
        "L",
        "hello with limits configured, 1 worker",
        "Scenario A's corral (hello, one worker with one thread pinned to core 0) beside the "
        f"same server with every limit of issue 34 that a request passes through (`{LIMITS}`: "
        "a rate and a connection count per client in shared tables, a concurrency limit, "
        "an allowed network), "
        "none of them reached by the load: every request is counted and let in. Keep-alive "
        "at 1 and 100 connections, `Connection: close` at 100. Issue 34's target (point 6): "
        "the limited server within 3 % of the other at keep-alive.",
        [Load(1), Load(100), Load(100, keepalive=False)],
    )
    el.configs = [Config("corral", HELLO_APP), Config("corral", LIMITED_HELLO_APP)]
    return el


# --------------------------------------------------------------------------- processes


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((HOST, port)) != 0


class Ports:
    """Hands out a fresh free port per server start, so no answer can come from a
    server that outlived its run."""

    def __init__(self, first: int = FIRST_PORT) -> None:
        self.next = first

    def take(self) -> int:
        while not port_is_free(self.next):
            self.next += 1
        port = self.next
        self.next += 1
        if self.next > 28000:
            self.next = FIRST_PORT
        return port


def proc_tree(root: int) -> list[dict[str, Any]]:
    """The process root and all its descendants, with VmRSS in KiB."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    tree = [root] if root in parents else []
    frontier = list(tree)
    while frontier:
        children = [pid for pid, ppid in parents.items() if ppid in frontier]
        tree += children
        frontier = children
    procs = []
    for pid in tree:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        procs.append(
            {
                "pid": pid,
                "ppid": parents.get(pid, 0),
                "name": comm,
                "role": "root" if pid == root else "child",
                "rss_kib": int(match.group(1)) if match else 0,
            }
        )
    return procs


class ServerProcess:
    """A server started in its own process group, stopped with everything it spawned."""

    def __init__(self, argv: list[str], cwd: Path, log: Path, pin: bool) -> None:
        self.argv = (["taskset", "-c", SERVER_CPU] if pin else []) + argv
        env = dict(os.environ)
        env["PYTHONPATH"] = str(cwd)
        env["PYTHONUNBUFFERED"] = "1"
        env["VIRTUAL_ENV"] = sys.prefix
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = log
        self._logfile = log.open("wb")
        self.proc = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def stop(self, grace: float = 8.0) -> None:
        """SIGINT the group (a quick shutdown for every server here), then SIGKILL
        the group and any descendant that left it. Not interruptible."""
        with Interrupts.held():
            self._stop(grace)

    def _stop(self, grace: float) -> None:
        pids = [p["pid"] for p in proc_tree(self.proc.pid)]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.proc.poll() is not None and not any(_alive(p) for p in pids):
                break
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in pids:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self._logfile.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def http_get(port: int, path: str, timeout: float = 2.0, tls: bool = False) -> tuple[int, bytes]:
    conn = (
        http.client.HTTPSConnection(HOST, port, timeout=timeout, context=tls_load.client_context())
        if tls
        else http.client.HTTPConnection(HOST, port, timeout=timeout)
    )
    try:
        conn.request("GET", path, headers={"Host": f"{HOST}:{port}"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def ignores_close(port: int, path: str, tls: bool = False) -> bool:
    """Whether the server keeps a connection open after answering a request that asked for
    ``Connection: close`` (RFC 9112 9.6: it must close): wrk then goes on using it, and a
    close-per-request load measures keep-alive."""
    request = f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nConnection: close\r\n\r\n"
    with tls_load.connect(HOST, port, 2.0, tls) as sock:
        sock.sendall(request.encode())
        sock.settimeout(1.5)
        try:
            while sock.recv(65536):
                pass
        except TimeoutError:
            return True
    return False


def wait_ready(server: ServerProcess, port: int, app: App, deadline_s: float) -> str | None:
    """Poll with real requests until the app answers correctly; the error otherwise."""
    deadline = time.monotonic() + deadline_s
    last = "no answer"
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return f"exited with status {server.proc.returncode} before answering"
        try:
            status, body = http_get(port, app.path, tls=bool(app.certificate))
        except (OSError, http.client.HTTPException) as exc:
            last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)
            continue
        if status != 200:
            return f"GET {app.path} answered {status}"
        return app.check(body)
    return f"not ready after {deadline_s:g} s ({last})"


@dataclass
class Reply:
    """One answer read off the wire: status, fields (names lowered), body (unchunked) and
    the bytes it took on the wire, head and chunk framing included."""

    status: int
    fields: dict[str, str]
    body: bytes
    size: int


def exchange(
    port: int, path: str, fields: list[str], timeout: float = 5.0, tls: bool = False
) -> Reply:
    """GET path as wrk asks for it (HTTP/1.1, Host, the load's fields, keep-alive) and read
    one answer, framed by Content-Length, chunked, or bodiless (1xx, 204, 304)."""
    head = f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
    request = head + "".join(f"{field}\r\n" for field in fields) + "\r\n"
    with tls_load.connect(HOST, port, timeout, tls) as sock:
        sock.sendall(request.encode("latin-1"))
        stream = sock.makefile("rb")
        line = stream.readline()
        size, status, answer = len(line), int(line.split()[1]), {}
        while (line := stream.readline()) not in (b"\r\n", b""):
            size += len(line)
            name, _, value = line.decode("latin-1").partition(":")
            answer[name.strip().lower()] = value.strip()
        size += len(line)
        pieces = []
        if status in (204, 304) or status < 200:
            pass
        elif "chunked" in answer.get("transfer-encoding", "").lower():
            while (length := int((line := stream.readline()).split(b";")[0], 16)) > 0:
                piece = stream.read(length + 2)
                size += len(line) + len(piece)
                pieces.append(piece[:length])
            size += len(line)
            while (line := stream.readline()) not in (b"\r\n", b""):  # trailers
                size += len(line)
            size += len(line)
        else:
            pieces.append(stream.read(int(answer.get("content-length", "0"))))
            size += len(pieces[0])
    return Reply(status, answer, b"".join(pieces), size)


class LoadProblem(Exception):
    """A load this server cannot be measured at: a wrong answer, or (unsupported) one that
    shows it cannot do what the load asks, such as a file served without an ETag."""

    def __init__(self, reason: str, unsupported: bool = False) -> None:
        super().__init__(reason)
        self.unsupported = unsupported


def prepare_load(
    port: int, path: str, load: Load, tls: bool = False
) -> tuple[list[str], dict[str, Any]]:
    """The fields wrk sends for this load on this server (If-None-Match: the ETag this server
    gives the file), and what one answer to them was: status, encoding, sizes. LoadProblem
    when that answer is not the one the load measures."""
    fields = list(load.headers)
    try:
        if load.revalidate:
            first = exchange(port, path, fields, tls=tls)
            if first.status != 200 or "etag" not in first.fields:
                ok = first.status == 200
                reason = "without an ETag" if ok else f"{first.status}, not 200"
                raise LoadProblem(f"GET {path} answered {reason}", unsupported=ok)
            fields.append(f"If-None-Match: {first.fields['etag']}")
        reply = exchange(port, path, fields, tls=tls)
        if load.resumed and (why := tls_load.resumes(HOST, port, path)):
            raise LoadProblem(f"no TLS resumption: {why}", unsupported=True)
    except (OSError, ValueError, IndexError) as exc:
        raise LoadProblem(f"GET {path}: {type(exc).__name__}: {exc}") from None
    want = 304 if load.revalidate else 200
    if reply.status != want:
        asked = f" with {'; '.join(fields)}" if fields else ""
        raise LoadProblem(
            f"GET {path}{asked} answered {reply.status}, not {want}",
            unsupported=load.revalidate and reply.status == 200,
        )
    coding = reply.fields.get("content-encoding", "")
    asked_gzip = any(re.match(r"(?i)accept-encoding:.*\bgzip\b", field) for field in fields)
    if asked_gzip and coding != "gzip":
        raise LoadProblem(f"GET {path} asking for gzip answered {coding or 'not encoded'}")
    facts: dict[str, Any] = {
        "status": reply.status,
        "response_bytes": reply.size,
        "body_bytes": len(reply.body),
        "content_encoding": coding,
        "etag": reply.fields.get("etag", ""),
    }
    if load.body:
        try:
            body = gzip.decompress(reply.body) if coding == "gzip" else reply.body
        except (OSError, EOFError, zlib.error) as exc:
            raise LoadProblem(f"GET {path}: the gzip body does not decode: {exc}") from None
        if error := check_file(load.body)(body):
            raise LoadProblem(f"GET {path}: {error}")
        facts["identity_bytes"] = len(body)
    return fields, facts


def size_mismatch(result: dict[str, Any], facts: dict[str, Any], load: Load) -> str | None:
    """Whether wrk read more or less than the checked answer's size times the answers it
    counted: some answers were not that one (a 200 among 304s, an error page). The slack is
    wrk's rounding (2 %) and one answer in flight per connection when the load stopped."""
    read, count, each = result.get("bytes_read"), result.get("requests"), facts["response_bytes"]
    if not read or not count:
        return None
    if abs(read - count * each) <= 0.02 * count * each + load.connections * each:
        return None
    return f"{read / count:,.0f} bytes read per answer under the load, {each:,} in the checked one"


# --------------------------------------------------------------------------- wrk


def wrk_argv(
    load: Load,
    port: int,
    path: str,
    duration: float,
    fields: Sequence[str] = (),
    scheme: str = "http",
) -> list[str]:
    if load.client == "ab":
        return tls_load.ab_argv(
            CLIENT_CPU, load.connections, f"{scheme}://{HOST}:{port}{path}", duration
        )
    flags = f"wrk -t1 -c{load.connections} -d{duration:g}s --timeout 5s --latency"
    argv = cmd("taskset -c", CLIENT_CPU, flags)
    if not load.keepalive:
        argv += ["-H", "Connection: close"]
    for line in fields:
        argv += ["-H", line]
    return [*argv, f"{scheme}://{HOST}:{port}{path}"]


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}
METRICS = {"rps": "rps", "bytes": "bytes_per_s"}  # a Load's metric -> its figure in a result
UNITS = {"rps": "req/s", "bytes": "MiB/s"}
_BYTES = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}  # wrk's are binary


def parse_wrk(text: str) -> dict[str, Any]:
    """Requests/sec, request count, bytes read (total and per second), socket errors,
    non-2xx/3xx and latency (ms)."""
    out: dict[str, Any] = {
        "rps": None,
        "requests": None,
        "bytes_read": None,
        "bytes_per_s": None,
        "non2xx": 0,
        "socket_errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0},
        "latency_ms": {},
    }
    if m := re.search(r"Requests/sec:\s+([\d.]+)", text):
        out["rps"] = float(m.group(1))
    if m := re.search(r"(\d+) requests in \S+, ([\d.]+)([KMGT]?B) read", text):
        out["requests"] = int(m.group(1))
        out["bytes_read"] = round(float(m.group(2)) * _BYTES[m.group(3)])
    if m := re.search(r"Transfer/sec:\s+([\d.]+)([KMGT]?B)", text):
        out["bytes_per_s"] = round(float(m.group(1)) * _BYTES[m.group(2)])
    if m := re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text):
        out["non2xx"] = int(m.group(1))
    if m := re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    ):
        out["socket_errors"] = dict(
            zip(["connect", "read", "write", "timeout"], map(int, m.groups()), strict=True)
        )
    if m := re.search(r"Latency\s+([\d.]+)(us|ms|s|m)\s", text):
        out["latency_ms"]["avg"] = round(float(m.group(1)) * _UNITS[m.group(2)], 3)
    for pct, value, unit in re.findall(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M):
        out["latency_ms"][f"p{pct}"] = round(float(value) * _UNITS[unit], 3)
    return out


def error_count(m: dict[str, Any]) -> int:
    return int(m.get("non2xx") or 0) + sum((m.get("socket_errors") or {}).values())


def closed_every_time(m: dict[str, Any]) -> bool:
    """wrk's read errors alone, one per response: the server closes the connection
    after each response without saying so, and wrk has to reconnect."""
    se = m.get("socket_errors") or {}
    reads, others = se.get("read", 0), error_count(m) - se.get("read", 0)
    return others == 0 and reads > 0 and abs(reads - (m.get("requests") or 0)) <= 0.02 * reads


def cpu_seconds_busy() -> tuple[float, float]:
    """CPU seconds of the whole machine since boot: (busy in processes, in interrupts).

    Interrupt time (irq, softirq) is apart: on loopback most of it is the benchmark's
    own traffic, charged to no process. Steal (the hypervisor's) counts as busy."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + steal) / CLK_TCK, (irq + softirq) / CLK_TCK


def cpu_seconds_of(pids: list[int]) -> float:
    """CPU seconds (user + system, all threads) used so far by these processes."""
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def wait_quiet(limit: float) -> float:
    """Wait up to limit seconds for the machine to be idle (under NOISY_CPU_PCT of a
    core busy over 0.5 s, the server under test being idle); the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        busy, t0 = cpu_seconds_busy()[0], time.monotonic()
        time.sleep(0.5)
        if 100 * (cpu_seconds_busy()[0] - busy) / (time.monotonic() - t0) < NOISY_CPU_PCT:
            break
    return time.monotonic() - start


def run_wrk(
    load: Load,
    port: int,
    path: str,
    duration: float,
    server_pid: int | None = None,
    fields: Sequence[str] = (),
    scheme: str = "http",
) -> dict[str, Any]:
    """One wrk (or ab) run. With server_pid, also the server tree's CPU seconds and the CPU
    that neither the server tree nor the client used meanwhile (other_cpu_pct, in % of one
    core): noise from the rest of the machine."""
    argv = wrk_argv(load, port, path, duration, fields, scheme)
    pids = [p["pid"] for p in proc_tree(server_pid)] if server_pid else []
    (busy, irq), server, children = cpu_seconds_busy(), cpu_seconds_of(pids), _children_cpu()
    start = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        return {"rps": None, "error": "wrk did not finish"}
    elapsed = time.monotonic() - start
    result = tls_load.parse_ab(done.stdout) if load.client == "ab" else parse_wrk(done.stdout)
    if result["rps"] is None:
        result["error"] = (
            f"{load.client} failed ({done.returncode}): {(done.stderr or done.stdout)[-300:]}"
        )
    if server_pid:
        busy_now, irq_now = cpu_seconds_busy()
        busy, irq = busy_now - busy, irq_now - irq
        server = cpu_seconds_of(pids) - server
        wrk = _children_cpu() - children
        result["server_cpu_pct"] = round(100 * server / elapsed, 1)
        result["server_cpu_s"] = round(server, 3)
        result["wrk_cpu_pct"] = round(100 * wrk / elapsed, 1)
        result["irq_cpu_pct"] = round(100 * irq / elapsed, 1)
        result["other_cpu_pct"] = round(max(0.0, 100 * (busy - server - wrk) / elapsed), 1)
    return result


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --------------------------------------------------------------------------- running


def command_line(config: Config, pin: bool) -> str:
    """The exact command of a configuration, cwd and environment included, port as $PORT."""
    app = config.app
    argv = (["taskset", "-c", SERVER_CPU] if pin else []) + config.argv(0)
    text = shlex.join(argv).replace(f"{HOST}:0", f"{HOST}:$PORT")
    text = re.sub(r"--port 0\b", "--port $PORT", text)
    return f"cd {app.directory} && PYTHONPATH={app.directory} {text}"


def run_config(
    scenario: Scenario,
    config: Config,
    record: dict[str, Any],
    args: argparse.Namespace,
    ports: Ports,
) -> None:
    """Start one server, measure every load of the scenario, record RSS, stop it.
    Fills record as it goes, so an interrupted run keeps what it measured."""
    rnd = record["round"]
    try:
        port = ports.take()
        argv = config.argv(port)
    except OSError as exc:
        record.update(status="failed", error=f"cannot prepare: {exc}")
        return
    if not Path(argv[0]).exists() and shutil.which(argv[0]) is None:
        record.update(status="failed", error=f"not installed: {argv[0]}")
        return
    log = LOGS / f"{scenario.key}-{config.id}-r{rnd}.log"
    pin = config.pin and not args.no_pin
    server: ServerProcess | None = None
    try:
        with Interrupts.held():  # a server that starts is always stopped
            try:
                server = ServerProcess(argv, config.app.directory, log, pin)
            except OSError as exc:
                record.update(status="failed", error=f"cannot start: {exc}")
                return
        error = wait_ready(server, port, config.app, args.start_timeout)
        if error:
            time.sleep(0.5)  # let the server flush what it logged about it
            tail = server.log_tail(40)
            hint = log_hint(tail)
            print(f"    FAILED: {error}" + (f"\n      log: {hint}" if hint else ""))
            record.update(status="failed", error=error, log_tail=tail)
            return
        if config.workers > 1 and args.settle > 0:
            # the first answer comes from the first worker that loaded the app; a burst of
            # keep-alive connections opened before the others serve stays with that one
            time.sleep(args.settle)
        tls = bool(config.app.certificate)
        loads = [load for load in scenario.loads if load.applies(config.app)]
        closing = [load for load in loads if not load.keepalive and load.client == "wrk"]
        kept_alive = bool(closing) and ignores_close(port, config.app.path, tls)
        for load in loads:
            if args.wait_quiet > 0:
                waited = wait_quiet(args.wait_quiet)
                if waited > 1:
                    print(f"    (waited {waited:.0f} s for the machine to be quiet)")
            path, fields, facts = load.path or config.app.path, [], None
            if load.name:
                try:
                    fields, facts = prepare_load(port, path, load, tls)
                except LoadProblem as exc:
                    why = "unsupported" if exc.unsupported else "error"
                    record["loads"][load.key] = {"rps": None, why: str(exc)}
                    print(f"    {load.label:<18}     {why}: {exc}")
                    continue
            scheme = config.app.scheme
            if args.warmup > 0:
                run_wrk(load, port, path, args.warmup, fields=fields, scheme=scheme)
            result = run_wrk(load, port, path, args.duration, server.proc.pid, fields, scheme)
            if kept_alive and not load.keepalive:
                result["kept_alive"] = True  # not a close-per-request figure: see render
            if facts is not None:
                result["answer"] = facts
                # a close load's answers say `Connection: close` (ab's HTTP/1.0 ones may differ
                # more): the checked keep-alive answer's size is not theirs
                if load.keepalive and (mismatch := size_mismatch(result, facts, load)):
                    result["size_mismatch"] = mismatch
            record["loads"][load.key] = result
            errs = error_count(result)
            figure = result.get(METRICS[load.metric])
            other = result.get("other_cpu_pct", 0.0)
            shown = f"{_fmt(figure, load.metric):>10} {UNITS[load.metric]}"
            print(
                f"    {load.label:<18} {shown if figure is not None else '    failed'}"
                + (f"  ({errs} errors)" if errs else "")
                + (f"  {result['error']}" if "error" in result else "")
                + (f"  ({result['size_mismatch']})" if "size_mismatch" in result else "")
                + (f"  (other processes: {other:.0f}% of a core)" if other >= NOISY_CPU_PCT else "")
            )
            if server.proc.poll() is not None:
                record.update(
                    status="failed",
                    error=f"server exited during {load.label}",
                    log_tail=server.log_tail(),
                )
                break
        record["processes"] = proc_tree(server.proc.pid)
        total = sum(p["rss_kib"] for p in record["processes"])
        print(f"    RSS {total / 1024:.1f} MiB in {len(record['processes'])} processes")
        if tls and server.proc.poll() is None:
            pid = server.proc.pid
            idle = tls_load.idle_connections(
                HOST, port, lambda: sum(p["rss_kib"] for p in proc_tree(pid))
            )
            record["idle_tls"] = idle
            per = idle["kib_per_connection"]
            print(
                f"    {idle['open_when_measured']} idle TLS connections: "
                + (f"{per:.1f} KiB each" if per is not None else "none held open")
            )
    finally:
        if server is not None:
            server.stop()


def write_site() -> None:
    """The files of scenarios S, Z and J in FILES, the same bytes every run: a 1 KiB
    stylesheet, 1 MiB of seeded random bytes (nothing compresses them), bench/compressors.py's
    100 KiB page and 20 KiB JSON list."""
    FILES.mkdir(parents=True, exist_ok=True)
    rule = ".card-{0} {{ margin: 0 auto; padding: {0}px; color: #{0:03x}; }}\n"
    css = "".join(rule.format(n) for n in range(17))  # 949 bytes, then a comment
    css += "/*" + " " * (1024 - len(css) - 5) + "*/\n"
    made = {SMALL_FILE: css.encode(), LARGE_FILE: random.Random(32).randbytes(1 << 20)}
    for name, body in made.items():
        if not (FILES / name).exists() or (FILES / name).read_bytes() != body:
            (FILES / name).write_bytes(body)
    # its bodies (the page, the JSON list, and two this runner does not use) are written beside
    # and copied only when they differ: a file's mtime, in its ETag, changes with its bytes only
    with_bodies = OUT / "bodies"
    compressors = [PY, str(BENCH / "compressors.py"), "--write-bodies", str(with_bodies)]
    subprocess.run(compressors, check=True, stdout=subprocess.DEVNULL)
    for name in (PAGE_FILE, JSON_FILE):
        body = (with_bodies / name).read_bytes()
        if not (FILES / name).exists() or (FILES / name).read_bytes() != body:
            (FILES / name).write_bytes(body)


def selected(config: Config, only: set[str] | None) -> bool:
    return only is None or config.family in only or config.id in only


def machine_info() -> dict[str, Any]:
    def first_line(argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return "not found"
        lines = (done.stdout + done.stderr).strip().splitlines()
        return lines[0] if lines else "?"

    cpu = "?"
    with contextlib.suppress(OSError):
        cpuinfo = Path("/proc/cpuinfo").read_text()
        if m := re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M):
            cpu = m.group(1).strip()
    versions = {}
    for name in PEER_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    sysctls = {}
    for key in ("net.core.somaxconn", "net.ipv4.tcp_tw_reuse", "net.ipv4.ip_local_port_range"):
        with contextlib.suppress(OSError):
            sysctls[key] = Path("/proc/sys", *key.split(".")).read_text().split()
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "os": first_line(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "python_executable": PY,
        "packages": versions,
        "tools": {
            "wrk": first_line(["wrk", "-v"]),
            "nginx": first_line([shutil.which("nginx") or "/usr/sbin/nginx", "-v"]),
            "ab": first_line(["ab", "-V"]),
        },
        "sysctl": {k: " ".join(v) for k, v in sysctls.items()},
        "ulimit_nofile": _nofile(),
    }


def _nofile() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def run(args: argparse.Namespace) -> dict[str, Any]:
    wanted = {s.strip().upper() for s in args.scenarios.split(",")} if args.scenarios else None
    only = {s.strip() for s in args.only.split(",")} if args.only else None
    chosen = [s for s in scenarios() if wanted is None or s.key in wanted]
    for s in chosen:
        s.configs = [c for c in s.configs if selected(c, only)]
        if args.connections:
            keep = {int(n) for n in args.connections.split(",")}
            s.loads = [load for load in s.loads if load.connections in keep]
    chosen = [s for s in chosen if s.configs and s.loads]
    if not chosen:
        raise SystemExit("nothing selected")
    if any(c.app is DRF_APP for s in chosen for c in s.configs):
        subprocess.run([PY, str(APPS / "make_drf.py"), "--dest", str(DRF_DIR)], check=True)
    if any(c.app.static or c.app.gzip for s in chosen for c in s.configs):
        write_site()
    if any(c.app.certificate for s in chosen for c in s.configs):
        tls_load.make_certificates(CERTS)
    results: dict[str, Any] = {
        "meta": machine_info()
        | {
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "settle_s": args.settle,
            "wait_quiet_s": args.wait_quiet,
            "rounds": args.rounds,
            "pinned": not args.no_pin,
            "server_cpu": SERVER_CPU,
            "client_cpu": CLIENT_CPU,
            "wrk_command": shlex.join(wrk_argv(Load(0), 0, "/PATH", args.duration))
            .replace("-c0", "-c$N")
            .replace(f"{HOST}:0", f"{HOST}:$PORT"),
        },
        "scenarios": {},
    }
    for s in chosen:
        results["scenarios"][s.key] = {
            "title": s.title,
            "description": s.description,
            "loads": [asdict(load) | {"key": load.key, "label": load.label} for load in s.loads],
            "configs": [
                {
                    "id": c.id,
                    "family": c.family,
                    "label": c.label,
                    "group": c.group,
                    "pinned": c.pin and not args.no_pin,
                    "reference": c.spec.reference,
                    "workers": c.workers,
                    "threads": c.threads,
                    "app": c.app.name,
                    "certificate": c.app.certificate,
                    "path": c.app.path,
                    "command": command_line(c, c.pin and not args.no_pin),
                }
                for c in s.configs
            ],
            "runs": [],
        }
    per_config = sum(
        len([ld for ld in s.loads if ld.applies(c.app)]) for s in chosen for c in s.configs
    ) * (args.duration + args.warmup)
    print(f"estimated time: {per_config * args.rounds / 60:.1f} min plus start-ups")
    save(results, args)
    ports = Ports()
    for rnd in range(1, args.rounds + 1):
        for s in chosen:
            for config in s.configs:
                print(f"[round {rnd}/{args.rounds}] {s.key} {config.label}")
                record = {"round": rnd, "config": config.id, "status": "ok", "loads": {}}
                results["scenarios"][s.key]["runs"].append(record)
                try:
                    run_config(s, config, record, args, ports)
                except KeyboardInterrupt:
                    record.update(status="failed", error="interrupted")
                    raise
                finally:
                    save(results, args)
    return results


def save(results: dict[str, Any], args: argparse.Namespace) -> None:
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(path)


# --------------------------------------------------------------------------- rendering


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt_rps(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _fmt(value: float | None, metric: str = "rps") -> str:
    """A table's figure: req/s, or bytes/s shown in MiB/s."""
    if value is None or metric == "rps":
        return _fmt_rps(value)
    return f"{value / (1 << 20):,.0f}"


def _cell_stats(
    runs: list[dict[str, Any]], config: str, load: str, metric: str = "rps"
) -> tuple[float | None, int, int, bool]:
    """Median figure (req/s or bytes/s) over the rounds, rounds counted, rounds with errors,
    and whether the server kept its connections alive under a close-per-request load
    (`ignores_close`)."""
    values, errored, kept_alive = [], 0, False
    for run_ in runs:
        if run_["config"] != config:
            continue
        m = run_.get("loads", {}).get(load)
        if not m or m.get(METRICS[metric]) is None:
            continue
        values.append(m[METRICS[metric]])
        errored += error_count(m) > 0 or "size_mismatch" in m
        kept_alive |= bool(m.get("kept_alive"))
    return _median(values), len(values), errored, kept_alive


def _unsupported(runs: list[dict[str, Any]], config: str, load: str) -> str | None:
    """Why a server cannot be measured at this load (a peer without what it asks for)."""
    for run_ in runs:
        m = run_.get("loads", {}).get(load) if run_["config"] == config else None
        if m and m.get("unsupported"):
            return str(m["unsupported"])
    return None


def render(results: dict[str, Any]) -> str:
    """RESULTS.md from the raw results (also used by --render)."""
    meta = results["meta"]
    out: list[str] = ["# Benchmark results", ""]
    out += [
        f"Generated by `bench/run.py` on {meta['date']}: {meta['rounds']} round(s), "
        f"{meta['duration_s']:g} s per measurement after a {meta['warmup_s']:g} s warm-up. "
        "Raw numbers: `bench/out/results.json`; re-render with "
        "`bench/.venv/bin/python bench/run.py --render`.",
        "",
        "## Machine",
        "",
        "| | |",
        "| --- | --- |",
        f"| CPUs (`nproc`) | {meta['nproc']} |",
        f"| CPU model | {meta['cpu']} |",
        f"| OS, kernel | {meta['os']}, {meta['kernel']} |",
        f"| Python | {meta['python']} (`{meta['python_executable']}`) |",
    ]
    out += [f"| {name} | {version} |" for name, version in meta["packages"].items()]
    out += [f"| {name} | {version} |" for name, version in meta["tools"].items()]
    out += [f"| sysctl {k} | {v} |" for k, v in meta.get("sysctl", {}).items()]
    out += [f"| open files limit | {meta.get('ulimit_nofile', '?')} |", ""]
    pin = (
        f"Pinned servers run under `taskset -c {meta['server_cpu']}` and wrk always under "
        f"`taskset -c {meta['client_cpu']}`; configurations marked *unpinned* run the server "
        "on every core."
        if meta["pinned"]
        else "Pinning was disabled for this run (`--no-pin`)."
    )
    out += [
        "## Method",
        "",
        f"- {pin}",
        "- Each server configuration starts once per round and is measured at all its loads; "
        "rounds interleave the servers. A server counts as started when `GET` of its path "
        "answers 200 with the expected body; a server of several worker processes then gets "
        f"{meta.get('settle_s', 0):g} s more, for its siblings to load the app too.",
        f"- Client: `{meta['wrk_command']}` (plus `-H 'Connection: close'` for *close* loads); "
        "a warm-up run of the same load precedes each measurement.",
        "- Tables show the **median** req/s over the rounds. ⚠ marks a cell where at least one "
        "round had non-2xx/3xx answers or socket errors (details below each table); in "
        "keep-alive loads, read errors usually mean the server closed the connection without "
        "saying so.",
        "- Flags beyond worker and thread counts: uWSGI `--listen 1024` (a backlog like the "
        "others' defaults) and `--die-on-term`; Granian `--http 1 --no-access-log`; Waitress "
        "`--connection-limit=1000` (its default, 100, equals the largest connection count). "
        "Access logs are off everywhere (gunicorn's and corral's default).",
        *(
            [
                f"- Before each load the runner waited up to {meta['wait_quiet_s']:g} s for the "
                "rest of the machine to be idle (`--wait-quiet`)."
            ]
            if meta.get("wait_quiet_s")
            else []
        ),
        "- Each measurement also records the CPU used by the server's process tree, by wrk, "
        "by interrupts (mostly the loopback traffic itself) and by every other process on "
        "the machine (`/proc/stat`); measurements where other "
        f"processes took at least {NOISY_CPU_PCT:.0f}% of a core are listed under their table.",
        "- RSS: sum of `VmRSS` over the server's process tree (master and workers) right after "
        "its last load, median over rounds.",
        "",
    ]
    noise = [v for sc in results["scenarios"].values() for v in _other_cpu(sc["runs"], None, None)]
    if noise and statistics.median(noise) >= NOISY_CPU_PCT:
        out[out.index("## Machine") : out.index("## Machine")] = [
            f"> **Noisy machine**: other processes used a median of "
            f"{statistics.median(noise):.0f}% of a core during the measurements (up to "
            f"{max(noise):.0f}%), competing with the servers and wrk; see the tables of "
            "other processes' CPU under each scenario.",
            "",
        ]
    for key, sc in results["scenarios"].items():
        out += _render_scenario(key, sc)
    return "\n".join(out).rstrip() + "\n"


def _render_scenario(key: str, sc: dict[str, Any]) -> list[str]:
    loads, configs, runs = sc["loads"], sc["configs"], sc["runs"]
    out = [f"## Scenario {key}: {sc['title']}", "", sc["description"], "", "Commands:", "", "```"]
    out += [f"# {c['label']}\n{c['command']}" for c in configs]
    out += ["```", ""]
    head = "| server | " + " | ".join(load["label"] for load in loads) + " |"
    in_bytes = any(load.get("metric") == "bytes" for load in loads)
    title = "Median req/s (MiB/s where the column says so):" if in_bytes else "Median req/s:"
    out += [title, "", head, "|" + " --- |" * (len(loads) + 1)]
    medians: dict[tuple[str, str], float | None] = {}
    kept_alive_seen = False
    for c in configs:
        cells = []
        for load in loads:
            if not _applies(load, c):
                cells.append("")
                continue
            metric = load.get("metric", "rps")
            med, n, errored, kept_alive = _cell_stats(runs, c["id"], load["key"], metric)
            # a keep-alive figure under a close load compares with nothing there
            medians[c["id"], load["key"]] = None if kept_alive else med
            rounds = sum(1 for r in runs if r["config"] == c["id"])
            cell = _fmt(med, metric)
            if med is None and _unsupported(runs, c["id"], load["key"]):
                cell = "n/a"
            elif med is None and rounds:
                cell = "failed"
            elif n and n < rounds:
                cell += f" ({n}/{rounds} rounds)"
            if errored:
                cell += " ⚠"
            if kept_alive:
                cell += " †"
                kept_alive_seen = True
            cells.append(cell)
        name = c["label"] + ("" if c["pinned"] else " *unpinned*")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out.append("")
    if kept_alive_seen:
        out += [
            "† The server ignored the requests' `Connection: close` and kept the connection "
            "open (RFC 9112 9.6 requires it to close), so wrk reused it: a keep-alive figure, "
            "left out of the ratios and the charts.",
            "",
        ]
    out += _render_problems(configs, loads, runs)
    out += _render_noise(configs, loads, runs)
    out += _render_ratios(configs, loads, medians)
    out += _render_sizes(configs, loads, runs)
    out += _render_cpu_per_request(configs, loads, runs)
    out += _render_rss(configs, runs)
    out += _render_idle_tls(configs, runs)
    return out


def _applies(load: dict[str, Any], config: dict[str, Any]) -> bool:
    """Whether a load runs on a configuration (Load.applies, from the raw results)."""
    return not load.get("certificate") or load["certificate"] == config.get("certificate")


def _render_cpu_per_request(
    configs: list[dict[str, Any]], loads: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> list[str]:
    """The server's CPU time per request (its process tree's, from /proc), median over the
    rounds: per handshake under the new-connection loads. Only for the TLS scenario."""
    if not any(c.get("certificate") for c in configs):
        return []
    out = [
        "Server CPU per request (µs: the server tree's user + system CPU seconds over the "
        "measurement / requests answered, median over the rounds; a new-connection load's "
        "figure is per handshake):",
        "",
        "| server | " + " | ".join(load["label"] for load in loads) + " |",
        "|" + " --- |" * (len(loads) + 1),
    ]
    for c in configs:
        cells = []
        for load in loads:
            values = [
                1e6 * m["server_cpu_s"] / m["requests"]
                for r in runs
                if r["config"] == c["id"]
                and (m := r.get("loads", {}).get(load["key"]))
                and m.get("server_cpu_s") is not None
                and m.get("requests")
            ]
            cells.append(f"{statistics.median(values):,.0f}" if values else "")
        out.append(f"| {c['label']} | " + " | ".join(cells) + " |")
    return [*out, ""]


def _render_idle_tls(configs: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[str]:
    """Memory per idle TLS connection (tls_load.idle_connections), median over the rounds."""
    rows = []
    for c in configs:
        probes = [r["idle_tls"] for r in runs if r["config"] == c["id"] and r.get("idle_tls")]
        per = [p["kib_per_connection"] for p in probes if p["kib_per_connection"] is not None]
        if not probes:
            continue
        held = min(p["open_when_measured"] for p in probes)
        asked = probes[0]["asked"]
        cell = f"{statistics.median(per):.1f}" if per else "—"
        before = statistics.median(p["rss_before_kib"] for p in probes) / 1024
        during = statistics.median(p["rss_with_kib"] for p in probes) / 1024
        rows.append(f"| {c['label']} | {cell} | {before:.1f} | {during:.1f} | {held} of {asked} |")
    if not rows:
        return []
    return [
        "Idle TLS connections: the server tree's RSS before and while the runner holds "
        "idle TLS connections open (handshake made, no request; opened after the loads, "
        "50 handshakes at a time), median over the rounds:",
        "",
        "| server | KiB per connection | RSS before (MiB) | RSS with them (MiB) "
        "| open when measured (fewest) |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]


def log_hint(tail: str) -> str:
    """The most telling line of a log tail: the last exception line, else the last line."""
    lines = [line.strip() for line in tail.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Operation|Exit)\b", line):
            return line
    return lines[-1] if lines else ""


def _render_problems(
    configs: list[dict[str, Any]], loads: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> list[str]:
    labels = {c["id"]: c["label"] for c in configs}
    load_labels = {load["key"]: load["label"] for load in loads}
    lines: list[str] = []
    closing: dict[str, list[str]] = {}  # config -> loads where it closed every connection
    failures: dict[tuple[str, str, str], list[str]] = {}  # (config, error, hint) -> rounds
    unsupported: dict[tuple[str, str], str] = {}  # (config, load) -> why
    for r in runs:
        who = f"{labels.get(r['config'], r['config'])}, round {r['round']}"
        if r["status"] != "ok":
            key = (r["config"], r.get("error", "?"), log_hint(r.get("log_tail") or "")[:200])
            failures.setdefault(key, []).append(str(r["round"]))
        for lk, m in r.get("loads", {}).items():
            where = f"{who}, {load_labels.get(lk, lk)}"
            if "error" in m:
                lines.append(f"- {where}: {m['error']}")
            elif m.get("unsupported"):
                unsupported.setdefault((r["config"], lk), m["unsupported"])
            elif closed_every_time(m):
                closing.setdefault(r["config"], []).append(f"{load_labels.get(lk, lk)}")
            elif error_count(m):
                se = m.get("socket_errors", {})
                parts = [f"{m.get('non2xx', 0)} non-2xx/3xx"]
                parts += [f"{v} {k} errors" for k, v in se.items() if v]
                lines.append(f"- {where}: {', '.join(parts)} (of {m.get('requests')} requests)")
            if m.get("size_mismatch"):
                lines.append(
                    f"- {where}: not every answer was the checked one: {m['size_mismatch']}"
                )
    failed = []
    for (config, error, hint), rounds in failures.items():
        last = f" — log: `{hint}`" if hint else ""
        when = f"round{'s' if len(rounds) > 1 else ''} {', '.join(rounds)}"
        failed.append(f"- {labels.get(config, config)}, {when}: **failed**: {error}{last}")
    lines[:0] = failed
    for config, where in closing.items():
        unique = sorted(set(where), key=where.index)
        lines.append(
            f"- {labels.get(config, config)}: closed the connection after every response "
            "without `Connection: close` (wrk read errors = responses, so wrk reconnected "
            f"for each request) at {', '.join(unique)}"
        )
    for (config, lk), why in unsupported.items():
        lines.append(
            f"- {labels.get(config, config)}, {load_labels.get(lk, lk)}: n/a, the server "
            f"cannot do what the load asks: {why}"
        )
    return ["Errors and failures:", "", *lines, ""] if lines else []


def _other_cpu(runs: list[dict[str, Any]], config: str | None, load: str | None) -> list[float]:
    """other_cpu_pct of the matching measurements (None matches everything)."""
    return [
        m["other_cpu_pct"]
        for r in runs
        if config is None or r["config"] == config
        for key, m in r.get("loads", {}).items()
        if (load is None or key == load) and m.get("other_cpu_pct") is not None
    ]


def _render_noise(
    configs: list[dict[str, Any]], loads: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> list[str]:
    if not any(v >= NOISY_CPU_PCT for v in _other_cpu(runs, None, None)):
        return []
    out = [
        f"CPU used by other processes during the measurements (% of one core, median over "
        f"the rounds; shown because some reached {NOISY_CPU_PCT:.0f}%):",
        "",
        "| server | " + " | ".join(load["label"] for load in loads) + " |",
        "|" + " --- |" * (len(loads) + 1),
    ]
    for c in configs:
        cells = []
        for load in loads:
            values = _other_cpu(runs, c["id"], load["key"])
            cells.append(f"{statistics.median(values):.0f}" if values else "—")
        out.append(f"| {c['label']} | " + " | ".join(cells) + " |")
    return [*out, ""]


def _render_ratios(
    configs: list[dict[str, Any]],
    loads: list[dict[str, Any]],
    medians: dict[tuple[str, str], float | None],
) -> list[str]:
    mine = [c for c in configs if c["family"] == "corral"]
    if not mine:
        return []
    figures = "req/s or MiB/s" if any(load.get("metric") == "bytes" for load in loads) else "req/s"
    out = [
        f"Ratio corral / peer (median {figures}; above 1 means corral answered more):",
        "",
        "| corral vs | " + " | ".join(load["label"] for load in loads) + " |",
        "|" + " --- |" * (len(loads) + 1),
    ]
    for own in mine:
        for peer in configs:
            if peer["family"] == "corral" or peer["group"] != own["group"]:
                continue
            cells = []
            for load in loads:
                a, b = medians.get((own["id"], load["key"])), medians.get((peer["id"], load["key"]))
                cells.append(f"{a / b:.2f}" if a is not None and b else "—")
            # with several corral configurations, each row says whose ratio it is
            who = f"{own['label']} vs " if len(mine) > 1 else ""
            out.append(f"| {who}{peer['label']} | " + " | ".join(cells) + " |")
    return [*out, ""]


def _render_sizes(
    configs: list[dict[str, Any]], loads: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> list[str]:
    """The size of each server's encoded answer to the loads that ask for an encoding (the
    checked answer of its last round), beside the body it encodes."""
    encoded = [
        load
        for load in loads
        if any("accept-encoding" in h.lower() for h in load.get("headers", []))
    ]
    if not encoded:
        return []
    out = [
        "Size of the encoded body (the checked answer's, last round; % of the body it encodes):",
        "",
        "| server | " + " | ".join(load["label"] for load in encoded) + " |",
        "|" + " --- |" * (len(encoded) + 1),
    ]
    for c in configs:
        cells = []
        for load in encoded:
            a = _last_answer(runs, c["id"], load["key"])
            if a is None:
                cells.append("—")
                continue
            pct = 100 * a["body_bytes"] / a["identity_bytes"] if a.get("identity_bytes") else 0
            coding = a.get("content_encoding") or "identity"
            cells.append(f"{a['body_bytes']:,} B ({pct:.1f} %, {coding})")
        out.append(f"| {c['label']} | " + " | ".join(cells) + " |")
    # corral's size beside each peer's: issue 32 wants it within 5 % of nginx's
    compared = [""]
    for own in (c for c in configs if c["family"] == "corral"):
        for peer in (c for c in configs if c["family"] != "corral"):
            ratios = []
            for load in encoded:
                a = _last_answer(runs, own["id"], load["key"])
                b = _last_answer(runs, peer["id"], load["key"])
                if a and b and b["body_bytes"]:
                    ratios.append(f"{a['body_bytes'] / b['body_bytes']:.3f} ({load['label']})")
            if ratios:
                compared.append(f"- {own['label']} / {peer['label']}, size: {', '.join(ratios)}")
    return [*out, *(compared if len(compared) > 1 else []), ""]


def _last_answer(runs: list[dict[str, Any]], config: str, load: str) -> dict[str, Any] | None:
    """The checked answer of a configuration's last round that measured this load."""
    found = [
        m["answer"]
        for r in runs
        if r["config"] == config and (m := r.get("loads", {}).get(load)) and m.get("answer")
    ]
    return found[-1] if found else None


def _render_rss(configs: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[str]:
    out = [
        "RSS after the run (MiB):",
        "",
        "| server | processes | total | first process + each child (last round) |",
        "| --- | --- | --- | --- |",
    ]
    for c in configs:
        trees = [r["processes"] for r in runs if r["config"] == c["id"] and r.get("processes")]
        if not trees:
            out.append(f"| {c['label']} | — | — | — |")
            continue
        totals = [sum(p["rss_kib"] for p in t) / 1024 for t in trees]
        last = trees[-1]
        mib = {p["pid"]: f"{p['rss_kib'] / 1024:.1f}" for p in last}
        root = [mib[p["pid"]] for p in last if p["role"] == "root"]
        kids = [mib[p["pid"]] for p in sorted(last, key=lambda p: p["pid"]) if p["role"] != "root"]
        each = ", ".join(root) + (f" + {', '.join(kids)}" if kids else "")
        out.append(f"| {c['label']} | {len(last)} | {statistics.median(totals):.1f} | {each} |")
    return [*out, ""]


# --------------------------------------------------------------------------- main


def check_environment() -> list[str]:
    problems = []
    for tool in ("wrk", "taskset"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} not found (run bench/setup.sh)")
    if sys.prefix == sys.base_prefix:
        problems.append(f"not running in a venv ({PY}); use bench/.venv/bin/python")
    if (os.cpu_count() or 1) < 2:
        problems.append("fewer than 2 CPUs: server and wrk cannot have a core each")
    return problems


def list_configs() -> Iterator[str]:
    for s in scenarios():
        yield f"{s.key}: {s.title} — loads: {', '.join(load.label for load in s.loads)}"
        for c in s.configs:
            yield f"   {c.id:<22} {command_line(c, c.pin)}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Benchmark corral against its peers.")
    p.add_argument("--duration", type=float, default=5, help="seconds per measurement (5)")
    p.add_argument("--warmup", type=float, default=1, help="warm-up seconds per load (1)")
    p.add_argument("--rounds", type=int, default=3, help="rounds, servers interleaved (3)")
    p.add_argument("--scenarios", help="comma list of scenarios, e.g. A,C (all)")
    p.add_argument("--only", help="comma list of servers or config ids, e.g. corral,granian")
    p.add_argument("--connections", help="comma list: keep only these connection counts")
    p.add_argument("--start-timeout", type=float, default=30, help="seconds to become ready")
    p.add_argument(
        "--settle",
        type=float,
        default=3,
        metavar="S",
        help="seconds a server of several workers gets after its first answer (3)",
    )
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="S",
        help="before each load, wait up to S seconds for other processes to go idle",
    )
    p.add_argument("--no-pin", action="store_true", help="do not pin servers to core 0")
    p.add_argument("--json", default=str(RESULTS_JSON), help="raw results file")
    p.add_argument("--markdown", default=str(RESULTS_MD), help="rendered results file")
    p.add_argument("--render", action="store_true", help="only re-render from --json")
    p.add_argument("--list", action="store_true", help="print scenarios and commands")
    return p.parse_args(argv)


class Interrupts:
    """SIGINT and SIGTERM end the run with KeyboardInterrupt (so the running server is
    stopped on the way out), but never in the middle of stopping a server."""

    deferred: int | None = None
    stopping = False

    @classmethod
    def install(cls) -> None:
        signal.signal(signal.SIGINT, cls.handle)
        signal.signal(signal.SIGTERM, cls.handle)

    @classmethod
    def handle(cls, signum: int, frame: object) -> None:
        if cls.stopping:
            cls.deferred = signum
            return
        raise KeyboardInterrupt(f"signal {signum}")

    @classmethod
    @contextlib.contextmanager
    def held(cls) -> Iterator[None]:
        cls.stopping = True
        try:
            yield
        finally:
            cls.stopping = False
            if cls.deferred is not None:
                signum, cls.deferred = cls.deferred, None
                raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    Interrupts.install()
    if args.list:
        print("\n".join(list_configs()))
        return 0
    if not args.render:
        problems = check_environment()
        for problem in problems:
            print(f"warning: {problem}", file=sys.stderr)
        if shutil.which("wrk") is None:
            return 2
        try:
            run(args)
        except KeyboardInterrupt:
            print("interrupted: every server is stopped; rendering what was measured")
            if not Path(args.json).exists():
                return 130
    results = json.loads(Path(args.json).read_text())
    Path(args.markdown).write_text(render(results))
    print(f"wrote {args.markdown} and {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The language servers of bench/polyglot.py's go, perl, ruby and java cases, started as
corral's master starts them, for the cases where nginx is the front.

A ``*-nginx`` case must measure nginx in front of the very backend corral's ``*-corral`` case
runs: the same program, command line, workers and threads, the same socket handed over. So the
backend is not described twice: the application's Unit document goes through corral's own
validation, its pool (`corral.external.supervisor.ExternalPool`: the places and the process
count), its kind's command builder (``corral/external/languages.py``: Starman, Puma, Jetty;
``external`` for go) and corral's ``spawn.start`` (fork, descriptor 3 with ``LISTEN_FDS``, exec),
here in the bench instead of in a master. nginx then proxies to the pool's addresses.

The programs the documents name are built here once per run: the Go hello (``go build``,
Debian's ``golang-go``) and the Java one's webapp directory (``javac`` against Debian's
``libservlet-api-java``, a ``web.xml`` mapping the servlet at ``/``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import run  # bench/run.py: the CPU the servers are pinned to

SERVLET_API = "/usr/share/java/servlet-api.jar"


def go_hello(apps: Path, out: Path) -> Path:
    """``apps/hello.go`` built into ``out`` (again when the source is newer)."""
    binary = out / "hello-go"
    source = apps / "hello.go"
    if not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime:
        env = dict(os.environ, GOCACHE=str(out / "go-cache"), GOFLAGS="-mod=mod")
        env.setdefault("HOME", str(out))
        subprocess.run(["go", "build", "-o", str(binary), str(source)], check=True, env=env)
    return binary


def java_webapp(apps: Path, out: Path) -> Path:
    """A webapp directory whose servlet (``apps/Hello.java``) answers every path."""
    root = out / "webapp-java"
    classes = root / "WEB-INF" / "classes"
    source = apps / "Hello.java"
    compiled = classes / "Hello.class"
    if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        argv = ["javac", "-cp", SERVLET_API, "-d", str(classes), str(source)]
        subprocess.run(argv, check=True)
    (root / "WEB-INF" / "web.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<web-app xmlns="http://xmlns.jcp.org/xml/ns/javaee" version="3.1">\n'
        "  <servlet><servlet-name>hello</servlet-name><servlet-class>Hello</servlet-class>"
        "</servlet>\n"
        "  <servlet-mapping><servlet-name>hello</servlet-name><url-pattern>/</url-pattern>"
        "</servlet-mapping>\n"
        "</web-app>\n"
    )
    return root


class Pool:
    """An application's processes started as corral's master starts them (not supervised:
    a bench run is short), pinned to the servers' CPU; the interface of `run.ServerProcess`
    that bench/polyglot.py's `Running` uses."""

    def __init__(self, name: str, document: dict[str, Any], log: Path) -> None:
        from corral.config.document import validate_document
        from corral.external import spawn
        from corral.external.kinds import kind_of
        from corral.external.supervisor import ExternalPool

        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_bytes(b"")
        self.log = log
        document = {**document, "stdout": str(log), "stderr": str(log)}
        app = validate_document({"applications": {name: document}}).applications[name]
        kind = kind_of(app)
        if kind is None:
            raise SystemExit(f"{name}: {document['type']!r} is not a supervised pool's type")
        self.pool = ExternalPool(name, app, kind)
        self.pids: list[int] = []
        everywhere = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {int(run.SERVER_CPU)})  # the children inherit it at the fork
        try:
            for slot in range(self.pool.count):
                place = self.pool.places.at(slot)
                command = kind.command(name, app, place)
                self.pids.append(spawn.start(name, command, place, self.pool.places.socket))
        finally:
            os.sched_setaffinity(0, everywhere)
        self.pid = self.pids[0]

    @property
    def addresses(self) -> list[str]:
        """Where the processes listen: ``127.0.0.1:PORT``, the shared socket's or each one's."""
        return self.pool.places.addresses

    @property
    def port(self) -> int:
        return int(self.addresses[0].rpartition(":")[2])

    def log_tail(self, lines: int = 8) -> str:
        text = self.log.read_text(errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])

    def stop(self, grace: float = 8.0) -> None:
        """SIGTERM (Starman's master ends its workers on it), SIGKILL after ``grace``."""
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        waiting = set(self.pids)
        while waiting and time.monotonic() < deadline:
            for pid in list(waiting):
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        continue
                waiting.discard(pid)
            time.sleep(0.05)
        for pid in waiting:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.pool.places.close()


# each language's server and toolchain, and the command that says its version
_VERSIONS = {
    "go": [["go", "version"]],
    "perl": [["starman", "--version"]],
    "ruby": [["puma", "--version"], ["ruby", "--version"]],
    "java": [["dpkg-query", "-W", "-f", "jetty9 ${Version}", "jetty9"], ["java", "-version"]],
}


def versions(languages: tuple[str, ...], cases: list[str]) -> str:
    """``, <version>, ...`` for the languages some of ``cases`` measured."""
    found = []
    for language in languages:
        if not any(case.startswith(f"{language}-") for case in cases):
            continue
        for argv in _VERSIONS[language]:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
                text = (done.stdout or done.stderr).strip()
                if text:
                    found.append(text.splitlines()[0])
    return "".join(f", {line}" for line in found)

"""NGINX Unit's language types run by their languages' own servers: ``"perl"`` (Starman),
``"ruby"`` (Puma), ``"java"`` (Jetty 9), ``"go"`` and ``"nodejs"`` (``external``), beside php
(php-fpm) and Python (corral's workers).

The seed article's seven "Hello, Unit!" applications (tests/integration/languages/; the Go and
Node.js ones use their standard libraries where the article's linked Unit's own) run side by
side behind one listener's routes; then each type's keys, with applications that say what
their server gave them. Real servers from Debian's packages (starman, puma, jetty9 with
default-jdk-headless, golang-go, nodejs, php-fpm: .ci/run installs them); a test skips naming
the package it lacks.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from corral.external.languages import JETTY_HOME
from corral.php.fpm import fpm_binary
from tests.integration.control import listening_port, short_dir
from tests.integration.server import Server, children, wait_for
from tests.integration.test_external import ready, serving, status_of

LANGUAGES = Path(__file__).parent / "languages"
PHP = Path(__file__).parent / "apps" / "php"
HELLO = b"Hello, Unit!\n"
WEB = "127.0.0.1:0"
SERVLET_API = "/usr/share/java/servlet-api.jar"

# what each test needs, and the Debian package that has it
TOOLS = {
    "starman": "starman",
    "puma": "puma",
    "java": "default-jdk-headless",
    "javac": "default-jdk-headless",
    "go": "golang-go",
    "node": "nodejs",
}


def needs(*tools: str) -> pytest.MarkDecorator:
    missing = {TOOLS[tool] for tool in tools if tool in TOOLS and shutil.which(tool) is None}
    if "php-fpm" in tools and not os.access(fpm_binary(), os.X_OK):
        missing.add("php-fpm")
    if "java" in tools and not os.path.exists(os.path.join(JETTY_HOME, "start.jar")):
        missing.add("jetty9")
    if "javac" in tools and not os.path.exists(SERVLET_API):
        missing.add("libservlet-api-java")
    return pytest.mark.skipif(
        bool(missing), reason=f"needs Debian's {', '.join(sorted(missing))} (not installed)"
    )


def request(port: int, path: str = "/") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def fields(body: bytes) -> dict[str, str]:
    """``name=value`` lines of an application's answer."""
    return dict(line.split("=", 1) for line in body.decode().splitlines() if "=" in line)


def webapp(build: Path, servlet: str, *sources: str) -> Path:
    """A web application directory: ``servlet`` (compiled with ``sources``) answering every
    path."""
    root = build / f"webapp-{servlet}"
    if root.exists():  # built for the other core
        return root
    classes = root / "WEB-INF" / "classes"
    classes.mkdir(parents=True)
    files = [str(LANGUAGES / f"{name}.java") for name in (servlet, *sources)]
    subprocess.run(["javac", "-cp", SERVLET_API, "-d", str(classes), *files], check=True)
    (root / "WEB-INF" / "web.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<web-app xmlns="http://xmlns.jcp.org/xml/ns/javaee" version="3.1">\n'
        f"  <servlet><servlet-name>s</servlet-name><servlet-class>{servlet}</servlet-class>"
        "</servlet>\n"
        "  <servlet-mapping><servlet-name>s</servlet-name><url-pattern>/</url-pattern>"
        "</servlet-mapping>\n"
        "</web-app>\n"
    )
    return root


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("languages")


def go_hello(build: Path) -> Path:
    binary = build / "hello-go"
    if not binary.exists():
        env = dict(os.environ, GOCACHE=str(build / "go-cache"), GOFLAGS="-mod=mod")
        env.setdefault("HOME", str(build))
        subprocess.run(
            ["go", "build", "-o", str(binary), str(LANGUAGES / "hello.go")], check=True, env=env
        )
    return binary


@needs("starman", "puma", "java", "javac", "go", "node", "php-fpm")
@pytest.mark.usefixtures("each_core")
def test_the_seven_hello_unit_applications_behind_one_listener(build: Path) -> None:
    applications = {
        "go": {"type": "go", "executable": str(go_hello(build))},
        "nodejs": {
            "type": "external",
            "executable": "node",
            "arguments": [str(LANGUAGES / "hello.js")],
        },
        "java": {"type": "java", "webapp": str(webapp(build, "Hello"))},
        "perl": {"type": "perl", "script": str(LANGUAGES / "hello.psgi")},
        "php": {"type": "php", "root": str(PHP), "script": "index.php"},
        "python": {"type": "python", "path": str(LANGUAGES), "module": "hello"},
        "ruby": {"type": "ruby", "script": str(LANGUAGES / "config.ru")},
    }
    routes = [
        {"match": {"uri": f"/{name}"}, "action": {"pass": f"applications/{name}"}}
        for name in applications
    ]
    with serving(applications, listeners={WEB: {"pass": "routes"}}, routes=routes) as (
        server,
        control,
        _,
    ):
        listens = {"java": "port", "php": "unix"}
        for name in ("go", "nodejs", "java", "perl", "php", "ruby"):
            ready(server, name, timeout=60)
            pool = status_of(control, name)
            assert pool["processes"]["running"] == 1, (name, pool)  # supervised, in /status
            assert pool["external"]["listen"] == listens.get(name, "fd"), (name, pool)
        port = wait_for(lambda: listening_port(server, WEB))
        for name in applications:
            path = f"/{name}"
            wait_for(lambda: request(port, path)[0] == 200, timeout=30)  # noqa: B023
            _, headers, body = request(port, path)
            assert body == HELLO, (name, body)
            kind = "text/html" if name == "php" else "text/plain"  # php's default
            assert headers["content-type"].startswith(kind), (name, headers)
        assert request(port, "/cobol")[0] == 404  # no route: corral's own answer
        assert "Traceback" not in server.stderr, server.stderr


def answers(server: Server, name: str, path: str = "/") -> dict[str, str]:
    port = wait_for(lambda: listening_port(server, WEB))
    status, _, body = request(port, path)
    assert status == 200, body
    return fields(body)


@needs("starman")
def test_perl_under_starman() -> None:
    """``script`` (relative to ``working_directory``), ``processes`` as Starman's workers,
    ``environment``, ``limits.requests`` as Starman's ``--max-requests``."""
    app = {
        "type": "perl",
        "script": "keys.psgi",
        "working_directory": str(LANGUAGES),
        "processes": 3,
        "environment": {"GREETING": "hello from perl"},
        "limits": {"requests": 1},
    }
    with serving({"perl": app}, listeners={WEB: {"pass": "applications/perl"}}) as (
        server,
        _,
        _,
    ):
        (starman,) = ready(server, "perl", timeout=30)
        wait_for(lambda: len(children(int(starman))) == 3)  # one Starman, its 3 workers
        first = answers(server, "perl")
        assert first["greeting"] == "hello from perl"
        assert first["cwd"] == str(LANGUAGES)
        # each worker answers one request, then Starman replaces it
        seen = {first["pid"], *(answers(server, "perl")["pid"] for _ in range(5))}
        assert len(seen) == 6
        wait_for(lambda: len(children(int(starman))) == 3)  # and keeps 3


@needs("starman")
def test_starmans_workers_go_with_a_starman_killed_and_it_is_restarted() -> None:
    """A Starman master killed with SIGKILL (corral's own death, a stop past
    ``graceful_timeout``) takes its workers along: none is left serving on the socket."""
    app = {"type": "perl", "script": str(LANGUAGES / "keys.psgi"), "processes": 2}
    with serving({"perl": app}, listeners={WEB: {"pass": "applications/perl"}}) as (
        server,
        _,
        _,
    ):
        (starman,) = ready(server, "perl", timeout=30)
        workers = wait_for(lambda: len(found := children(int(starman))) == 2 and found)
        os.kill(int(starman), signal.SIGKILL)
        wait_for(lambda: not any(_alive(pid) for pid in workers))
        server.wait_log(rf"perl process \d+ ready \(pid (?!{starman}\))\d+\)", timeout=30)
        assert int(answers(server, "perl")["pid"]) not in workers


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@needs("puma")
def test_ruby_under_puma() -> None:
    """``script``, ``processes`` (a Puma each, sharing corral's socket), ``threads``
    (Puma's), ``environment``, ``working_directory``."""
    app = {
        "type": "ruby 3.1",
        "script": str(LANGUAGES / "keys.ru"),
        "working_directory": str(LANGUAGES),
        "processes": 2,
        "threads": 3,
        "environment": {"GREETING": "hello from ruby"},
    }
    with serving({"ruby": app}, listeners={WEB: {"pass": "applications/ruby"}}) as (
        server,
        _,
        _,
    ):
        pids = set(ready(server, "ruby", 2, timeout=30))
        seen = set()
        for _ in range(16):
            found = answers(server, "ruby")
            assert (found["greeting"], found["cwd"]) == ("hello from ruby", str(LANGUAGES))
            assert found["threads"] == "3"
            seen.add(found["pid"])
        assert seen and seen <= pids
        server.wait_log(r"ruby 3\.1.*corral runs the Puma \(and ruby\) found on PATH")


@needs("puma")
def test_rubys_hooks_under_puma() -> None:
    """Unit's ``hooks``: on_worker_boot before the application loads, on_thread_boot in each
    thread before its first request, on_worker_shutdown as Puma stops."""
    with short_dir() as marks:
        app = {
            "type": "ruby",
            "script": "keys.ru",
            "hooks": "hooks.rb",
            "working_directory": str(LANGUAGES),
            "threads": 2,
            "environment": {"HOOKS_DIR": str(marks)},
        }
        with serving({"ruby": app}, listeners={WEB: {"pass": "applications/ruby"}}) as (
            server,
            _,
            _,
        ):
            (pid,) = ready(server, "ruby", timeout=30)
            assert (marks / f"worker_boot.{pid}").exists()
            for _ in range(4):
                assert answers(server, "ruby")["pid"] == pid
            booted = list(marks.glob(f"thread_boot.{pid}.*"))
            assert 1 <= len(booted) <= 2  # (the probe's thread booted too)
        assert (marks / f"worker_shutdown.{pid}").exists()
        assert "on_thread_shutdown is not called" not in server.stderr


@needs("java", "javac")
def test_java_under_jetty(build: Path) -> None:
    """``webapp`` (at ``/``), ``classpath`` (a class outside the webapp), ``options`` (the
    JVM's), ``processes`` (a JVM each, on its own port)."""
    root = webapp(build, "Keys")
    extra = build / "extra"
    extra.mkdir()
    subprocess.run(["javac", "-d", str(extra), str(LANGUAGES / "Extra.java")], check=True)
    app = {
        "type": "java",
        "webapp": str(root),
        "classpath": [str(extra)],
        "options": ["-Dgreeting=hello from java"],
        "processes": 2,
    }
    with serving({"java": app}, listeners={WEB: {"pass": "applications/java"}}) as (
        server,
        _,
        _,
    ):
        ready(server, "java", 2, timeout=60)
        for _ in range(4):
            found = answers(server, "java", "/any/path")
            assert found == {"greeting": "hello from java", "extra": "from the classpath"}


@needs("node")
def test_nodejs_and_go_are_external_applications() -> None:
    """``"nodejs"`` (corral's) and ``"go"`` (Unit's older name) take ``external``'s keys."""
    app = {"type": "nodejs", "executable": "node", "arguments": [str(LANGUAGES / "hello.js")]}
    with serving({"node": app}, listeners={WEB: {"pass": "applications/node"}}) as (
        server,
        _,
        _,
    ):
        ready(server, "node", timeout=30)
        port = wait_for(lambda: listening_port(server, WEB))
        assert request(port)[2] == HELLO


def test_a_language_application_missing_its_key_is_one_line() -> None:
    with short_dir() as directory:
        path = directory / "conf.json"
        path.write_text('{"applications": {"shop": {"type": "ruby", "processes": 2}}}')
        checked = subprocess.run(
            [sys.executable, "-m", "corral", f"--config={path}", "--check-config"],
            capture_output=True,
            text=True,
        )
    assert checked.returncode != 0
    assert (
        checked.stderr.strip()
        .splitlines()[-1]
        .endswith('$.applications.shop: missing required key "script" (the rack file, config.ru)')
    ), checked.stderr
    assert "Traceback" not in checked.stderr

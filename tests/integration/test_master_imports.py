"""What the master of a plain WSGI application imports: no subsystem its configuration does
not use (issue 36, point 5).

Why: workers are forked from the master, so each module the master imports is memory in the
master and in every worker (its anonymous pages are theirs from the fork on). A subsystem is
imported where the configuration first uses it: the uWSGI ini reader for an ini file, the
control API when it is configured, TLS for a listener with TLS, a language's command for an
application of that language... The tests that show each of those still works when it is
configured are their own (test_uwsgi.py, test_control.py, test_tls*.py, test_php.py,
test_languages.py, test_emperor.py, test_systemd.py...).

How: ``PYTHONPROFILEIMPORTTIME=1`` makes every process of the tree print each module it
imports on standard error (``import time: self | cumulative | name``, indented by depth).
The workers print there too (what they import after the fork): a name below must be imported
by neither, which is stronger than the master alone. (`importlib.import_module` is not timed:
the application's own module is not in the list; corral's lazy imports are statements.)
"""

from __future__ import annotations

import re

import pytest

from tests.integration.server import Server, http_get, run_cli

IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")

# The master's own subsystems a plain `corral basic:application` does not configure.
MASTER_SIDE = (
    "corral.config.uwsgi",  # a uWSGI ini file (-c FILE.ini, --ini)
    "corral.config.uwsgi_options",
    "corral.config.static_routes",  # --static, static_map
    "corral.config.docs",
    "corral.config.helptext",  # --help's opening words
    "corral.control",  # --control, --state-dir: the API, its server, the store's handlers
    "corral.master.daemon",  # --daemon
    "corral.master.emperor",  # --emperor
    "corral.interpreter.handover",  # an application whose `home` another Python made
    "corral.interpreter.spawned",
    "corral.external.kinds",  # a program the master supervises (external, php, languages)
    "corral.external.command",
    "corral.external.languages",  # perl, ruby, java applications
    "corral.php.command",  # php applications: php-fpm's configuration and command
    "corral.php.fpm",
    "corral.observe.accesslog",  # --access-logfile
    "pathlib",  # --reload's file patterns
    "corral.routing",  # routes or upstreams, or a listener passing to them
    "corral.filters.connlimit",  # limit_conn, limit_concurrency_total
    "corral.filters.ratelimit",  # rate_limit
    "corral.tls.store",  # a listener with tls (the settings' files, the store's names)
    "corral.tls.bundle",
    "shutil",  # (bz2, lzma) argparse's terminal width, php-fpm's lookup
    "random",  # max_requests_jitter, max_worker_lifetime_jitter
    "hashlib",  # hand-off sockets (routes), the language commands
    "glob",
    "tempfile",
    "shlex",  # GUNICORN_CMD_ARGS
)
# The worker's own subsystems (its graph is lazy too: tests/unit/test_worker_imports.py runs a
# worker alone): neither the master nor its worker of a plain application imports them.
WORKER_SIDE = (
    "corral.php",  # php applications (the FastCGI speaker, the sites)
    "corral.fastcgi",
    "corral.tls",  # a listener with TLS: its contexts, sessions, renewals, door
    "corral.server.tlsdoor",
    "corral.server.tlstransport",
    "corral.actions.application",  # routes: each kind of action's handler
    "corral.actions.external",
    "corral.actions.fastcgi",
    "corral.actions.limited",
    "corral.actions.proxy",
    "corral.actions.proxy_head",
    "corral.actions.share",
    "corral.actions.upstreams",
    "corral.http.upstream",
    "corral.server.routed",  # routes and hand-offs
    "corral.server.handoff",
    "corral.server.relay",
    "corral.static.answer",  # shares: the file engine
    "corral.static.files",
    "corral.static.mime",
    "corral.static.opener",
    "corral.apps.asgi",  # the other interface's adapter
    "corral.http.uwsgi",  # a uwsgi listener
    "ctypes",  # request_timeout's watchdog, the static opener
    "mimetypes",
    "sysconfig",  # a home virtualenv, an application that failed to import
    "httptools",  # an absolute-form request target
)


def imported_modules(stderr: str) -> set[str]:
    return {match.group(1) for line in stderr.splitlines() if (match := IMPORTED.match(line))}


def unwanted(found: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    names = [name for name in MASTER_SIDE + WORKER_SIDE if name not in allowed]
    return sorted(m for m in found if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize(
    ("interface", "flags"),
    [
        ("wsgi", ()),
        ("auto", ()),
        ("auto", ("--preload",)),
        ("auto", ("-k", "uvicorn.workers.UvicornWorker")),
    ],
)
def test_a_plain_wsgi_master_imports_no_subsystem_it_does_not_use(interface, flags):
    """The adapter the workers run is imported by the master before it forks them (its pages
    shared: server/needs.py's `share`); with ``interface`` auto, both while the application is
    not imported (not preloaded), the one the application needs once it is, the ASGI one alone
    with an ASGI worker class."""
    asgi = "-k" in flags
    app = "asgi_apps:both" if asgi else "basic:application"  # (both: which it was called as)
    with Server(
        app,
        "--interface",
        interface,
        *flags,
        workers=1,
        env={"PYTHONPROFILEIMPORTTIME": "1"},
        log_level="info",
    ) as server:
        status, body = http_get(server, "/")
        assert (status, body) == (200, b"asgi" if asgi else b"Hello, world!")
        assert server.stop() == 0
    found = imported_modules(server.stderr)
    assert {"corral.cli", "corral.master.arbiter", "corral.server.worker"} <= found
    if asgi:
        assert "corral.apps.asgi.adapter" in found
        assert "corral.apps.wsgi.runner" not in found
        return
    allowed = ("corral.apps.asgi",) if (interface, flags) == ("auto", ()) else ()
    assert not unwanted(found, allowed), unwanted(found, allowed)


def test_the_configuration_alone_imports_no_subsystem_it_does_not_use():
    result = run_cli(
        "basic:application", "-w", "2", "--check-config", env={"PYTHONPROFILEIMPORTTIME": "1"}
    )
    assert result.returncode == 0, result.stderr
    found = imported_modules(result.stderr)
    assert "corral.config.sources" in found
    assert not unwanted(found), unwanted(found)


def test_a_uwsgi_ini_file_imports_its_reader(tmp_path):
    """The check above is not blind: the same parse finds the ini reader when one is read."""
    ini = tmp_path / "app.ini"
    ini.write_text("[uwsgi]\nmodule = basic:application\nprocesses = 2\n")
    result = run_cli("--ini", str(ini), "--check-config", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 0, result.stderr
    found = imported_modules(result.stderr)
    assert {"corral.config.uwsgi", "corral.config.uwsgi_options"} <= found

"""The commands that run NGINX Unit's ``"perl"``, ``"ruby"`` and ``"java"`` applications under
their languages' own servers, from Debian's packages (docs/polyglot.md).

- perl: Starman (``starman``), a preforking PSGI server: one Starman per application, whose
  ``--workers`` are the application's ``processes`` and ``--max-requests`` its
  ``limits.requests``. Its connections are not kept alive (``--disable-keepalive``): a worker
  serves one connection at a time, and corral's proxy keeps more idle connections than
  Starman has workers, so the connections beyond those would wait in the backlog behind kept
  ones (Starman's documented case for the flag; and Starman's ``--max-requests`` counts
  connections, which are then requests). It takes the socket corral binds as Server::Starter
  hands one over: ``SERVER_STARTER_PORT=127.0.0.1:PORT=3``.
- ruby: Puma (``puma``), in single mode (no forking of its own): one Puma per process of the
  application, each with ``threads`` threads, all accepting on the socket corral binds, which
  Puma takes from ``LISTEN_FDS`` when its ``--bind`` names the same address. Each Puma loads
  a configuration file corral writes (``max_fast_inline 0``: why at `_PUMA_SETTINGS`), and
  Unit's ``hooks`` run from another.
- java: Jetty 9 (``jetty9``, ``default-jdk-headless``): one JVM per process, each binding the
  loopback port corral picked, with a ``jetty.base`` of its own whose one context deploys the
  ``webapp`` at ``/`` with the ``classpath`` added; ``options`` are the JVM's, and
  ``thread_stack_size`` its ``-Xss``.

Each command is otherwise an external application's: the ``environment``, the
``working_directory`` (where a relative ``script`` or ``webapp`` is found), the ``user`` and
``group``, the ``stdout`` and ``stderr`` files.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from msgspec import UNSET

from corral.config.app_types import pool_size
from corral.external.command import Command, Place
from corral.external.places import run_directory

__all__ = [
    "JETTY_HOME",
    "jetty_command",
    "puma_command",
    "puma_connections",
    "starman_command",
    "starman_connections",
]

# Debian's jetty9; an application's environment may name another (JETTY_HOME)
JETTY_HOME = "/usr/share/jetty9"


def _command(app: Any, argv: list[str], **env: str) -> Command:
    return Command(
        argv=tuple(argv),
        env={**env, **app.env},
        cwd=app.chdir,
        user=app.user,
        group=app.group,
        stdout=app.stdout,
        stderr=app.stderr,
    )


# A corral worker's connections to a Starman or a Puma at most (``proxy_max_conns`` when that
# setting is 0), twice what the server serves at once: a connection per Starman worker or per
# Puma thread busy, as many waiting (a request's next one, a closing one). More would not be
# served sooner: they would wait in the listener's backlog, and Puma, whose threads keep a
# connection alive only while none waits there (lib/puma/request.rb, with max_fast_inline 0),
# then closes a connection after nearly every answer (behind 4 threads, wrk -c100: one
# connection ended per three requests, 7,903 req/s; capped at 8: 25 in 5 s, 10,950 req/s).


def starman_connections(app: Any) -> int:
    """Twice Starman's workers (the comment above says why)."""
    return 2 * pool_size(app)


def puma_connections(app: Any) -> int:
    """Twice the threads of all the application's Pumas (the comment above says why)."""
    return 2 * int(app.threads) * pool_size(app)


def starman_processes(app: Any) -> int:
    """One Starman, whose own workers are the application's processes."""
    return 1


# Loaded into Starman (-M): each worker asks the kernel for SIGTERM when its master dies, as
# corral's master does for the Starman it starts (PR_SET_PDEATHSIG is not inherited by a
# fork): else a Starman master killed with SIGKILL leaves its workers serving on the socket.
_STARMAN_MODULE = """package CorralStarmanWorkers;
use strict;
use warnings;
use Starman::Server;
my $init = \\&Starman::Server::child_init_hook;
my $prctl = eval { require "syscall.ph"; &SYS_prctl };
{
    no warnings "redefine";
    *Starman::Server::child_init_hook = sub {
        my ($server) = @_;
        if (defined $prctl) {
            syscall($prctl, 1, 15);  # PR_SET_PDEATHSIG, SIGTERM
            exit 0 if getppid() != $server->{server}{ppid};  # the master went before
        }
        return $init->(@_);
    };
}
1;
"""


def _starman_module() -> str:
    """The directory holding ``CorralStarmanWorkers.pm`` (written once per master)."""
    directory = os.path.join(run_directory(), "perl")
    path = os.path.join(directory, "CorralStarmanWorkers.pm")
    if not os.path.exists(path):
        os.makedirs(directory, mode=0o755, exist_ok=True)
        os.chmod(directory, 0o755)  # the application's user reads it (run_directory is 0711)
        with open(path, "w", encoding="utf-8") as file:
            file.write(_STARMAN_MODULE)
        os.chmod(path, 0o644)
    return directory


def starman_command(name: str, app: Any, place: Place) -> Command:
    """Starman serving the PSGI ``script`` with ``processes`` workers on descriptor 3."""
    del name
    workers = pool_size(app)
    module = ["-I", _starman_module(), "-MCorralStarmanWorkers"]
    # a connection per request (the module's text says why)
    argv = ["starman", *module, "--workers", str(workers), "--disable-keepalive"]
    if app.max_requests:
        argv += ["--max-requests", str(app.max_requests)]
    return _command(app, [*argv, app.script], SERVER_STARTER_PORT=f"{place.address}=3")


# Loaded into every Puma. Having served a request, a Puma thread waits up to 0.2 s for the next
# one on the same connection (its "fast track") unless it has served max_fast_inline (10) there
# already and requests wait elsewhere. corral's proxy spreads requests over many kept
# connections, so the next one seldom comes on the same connection: the threads sat waiting
# while requests on the others queued (ab -n 10000 -c 100 through corral to 4 threads: 2,586
# req/s; with 0, 8,310), and Puma's closing of connections after 10 requests when busy had
# corral open one connection every ten requests (0.1 per request; 0.002 with 0).
_PUMA_SETTINGS = """# Written by corral (corral/external/languages.py): its settings of every Puma.
max_fast_inline 0
"""


def _puma_settings() -> str:
    """The path of the Puma configuration file of `_PUMA_SETTINGS` (written once per master)."""
    path = os.path.join(run_directory(), "puma-settings.rb")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as file:
            file.write(_PUMA_SETTINGS)
        os.chmod(path, 0o644)  # the application's user reads it (run_directory is 0711)
    return path


def puma_command(name: str, app: Any, place: Place) -> Command:
    """One Puma in single mode serving the rack ``script`` with ``threads`` threads on the
    socket of descriptor 3 (its ``--bind`` names that socket's address), with corral's Puma
    settings and, if the application has Unit's ``hooks``, the file that runs them."""
    threads = f"{app.threads}:{app.threads}"
    argv = ["puma", "--bind", f"tcp://{place.address}", "--threads", threads]
    argv += ["--config", _puma_settings()]
    if app.hooks is not UNSET:
        argv += ["--config", _puma_hooks(name, app)]
    return _command(app, [*argv, app.script])


# Unit's hooks file under Puma's single mode, as a Puma configuration file: the file is
# evaluated in a module Unit whose on_worker_boot, on_worker_shutdown, on_thread_boot and
# on_thread_shutdown keep their blocks, as Unit does; the worker's boot runs before the
# application loads, its shutdown at exit, a thread's boot before the first request it serves
# (Puma 5 has no thread hooks: the application is wrapped), a thread's shutdown never (said).
_PUMA_HOOKS = """# Written by corral: NGINX Unit's "hooks" of a ruby application, under Puma.
hooks_file, rack_file = %s, %s
module Unit
  @hooks = {}
  def self.hooks
    @hooks
  end
  %%w[on_worker_boot on_worker_shutdown on_thread_boot on_thread_shutdown].each do |name|
    define_singleton_method(name) { |&block| @hooks[name] = block }
  end
end
Unit.module_eval(File.read(hooks_file), hooks_file, 1)
warn "corral: on_thread_shutdown is not called under Puma" if Unit.hooks["on_thread_shutdown"]
Unit.hooks["on_worker_boot"]&.call
at_exit { Unit.hooks["on_worker_shutdown"]&.call }
thread_boot = Unit.hooks["on_thread_boot"]
if thread_boot
  builder = begin  # rack's builder, else Puma's own copy of it (as Puma loads a rackup)
    require "rack/builder"
    Rack::Builder
  rescue LoadError
    require "puma/rack/builder"
    Puma::Rack::Builder
  end
  inner = builder.parse_file(rack_file)
  inner = inner.first if inner.is_a?(Array)  # rack 2: [app, options]
  app(lambda do |env|
    unless Thread.current.thread_variable_get(:corral_thread_booted)
      Thread.current.thread_variable_set(:corral_thread_booted, true)
      thread_boot.call
    end
    inner.call(env)
  end)
end
"""


def _puma_hooks(name: str, app: Any) -> str:
    """The Puma configuration file that runs the application's ``hooks`` (one per content)."""
    directory = app.chdir or os.getcwd()
    paths = [os.path.join(directory, app.hooks), os.path.join(directory, app.script)]
    # a JSON string is a Ruby one, but for "#{", which Ruby would interpolate
    text = _PUMA_HOOKS % tuple(json.dumps(path).replace("#", "\\#") for path in paths)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = os.path.join(run_directory(), f"{name}.puma.{digest}.rb")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(path, 0o644)
    return path


def jetty_command(name: str, app: Any, place: Place) -> Command:
    """One Jetty on the loopback port ``place`` names, deploying ``webapp`` at ``/``."""
    home = app.env.get("JETTY_HOME", JETTY_HOME)
    base = _jetty_base(name, app, place)
    jvm = list(app.options) if isinstance(app.options, list) else []
    if app.thread_stack_size is not None:
        jvm.append(f"-Xss{app.thread_stack_size}")
    argv = [
        "java",
        *jvm,
        "-jar",
        os.path.join(home, "start.jar"),
        f"jetty.home={home}",
        f"jetty.base={base}",
        "--module=http,deploy",
        "jetty.http.host=127.0.0.1",
        f"jetty.http.port={place.port}",
    ]
    return _command(app, argv)


def xml_text(text: str) -> str:
    """``text`` as XML character data. Not xml.sax.saxutils.escape: its import (urllib.request,
    http.client, email...) cost every worker 2.4 MiB for the one Jetty file written here."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _jetty_base(name: str, app: Any, place: Place) -> str:
    """A ``jetty.base`` for one process (its port's): the context that deploys ``webapp`` at
    ``/`` with ``classpath`` (paths relative to ``working_directory`` made whole, since Jetty
    resolves them against its own base)."""
    base = os.path.join(run_directory(), f"{name}.jetty.{place.port}")
    webapps = os.path.join(base, "webapps")
    os.makedirs(webapps, mode=0o755, exist_ok=True)
    os.chmod(base, 0o755)  # the application's user reads it (run_directory is 0711)

    def whole(path: str) -> str:
        return os.path.join(app.chdir or os.getcwd(), path)

    extra = ",".join(whole(path) for path in app.classpath) if app.classpath is not UNSET else ""
    context = (
        '<?xml version="1.0"?>\n'
        '<!DOCTYPE Configure PUBLIC "-//Jetty//Configure//EN" '
        '"http://www.eclipse.org/jetty/configure_9_3.dtd">\n'
        '<Configure class="org.eclipse.jetty.webapp.WebAppContext">\n'
        '  <Set name="contextPath">/</Set>\n'
        f'  <Set name="war">{xml_text(whole(app.webapp))}</Set>\n'
        + (f'  <Set name="extraClasspath">{xml_text(extra)}</Set>\n' if extra else "")
        + "</Configure>\n"
    )
    path = os.path.join(webapps, "root.xml")
    with open(path, "w", encoding="utf-8") as file:
        file.write(context)
    os.chmod(path, 0o644)
    return base

"""A worker's boot, in the child after the fork, up to the worker's own loop (server/worker.py).

What the child closes of the master's (the other workers' heartbeat pipes, the listeners and
hand-off sockets its pool does not use, the control API's connections), the environment it
leaves (what the master took of an application's at start-up) and enters (its own), its
process title, access log, standard streams and user, and then the `WorkerSpec` it runs. It
never returns: `run` ends the process with the worker's exit code, and an error on the way is
one line (or a traceback) and `EXIT_APP_LOAD` where a respawn would fail the same way. A worker
whose application's `home` was made by another Python is not run here: the child executes that
interpreter instead (`corral.interpreter`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, NoReturn

from corral.apps.stdio import StdioError, open_stdio, redirect_stdio
from corral.config.php_keys import is_php
from corral.interpreter.choice import foreign_python
from corral.master.fork import Fork
from corral.master.identity import Identity
from corral.master.title import master_title
from corral.server.needs import prepare
from corral.server.worker import EXIT_APP_LOAD, WorkerSpec, run_worker
from corral.wire import Failed, encode


def run(
    fork: Fork,
    *,
    close: list[int],
    close_sockets: list[socket.socket],
    control: Any,
    entered: Entered,
    start_cwd: str,
) -> NoReturn:
    """The child's whole life: close what is the master's, enter the application's
    environment, run the worker, exit."""
    code = 1
    pool = fork.pool
    try:
        signal.set_wakeup_fd(-1)
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        for sock in close_sockets:
            sock.close()
        if control is not None:
            control.close_in_child()  # else a worker holds API connections open
        entered.undo()
        os.chdir(start_cwd)  # an application's relative chdir and paths start here
        apply_environment(pool.application)
        fork.hooks.call("post_fork")
        python = foreign_python(pool.application.home)  # another Python's virtualenv
        if python is None:
            code = worker_main(fork)
        else:
            from corral.interpreter.handover import exec_worker

            code = exec_worker(fork, python, start_cwd)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except ImportError as exc:
        # corral's or the loop's own import, after the application's (which says itself
        # why it failed): a respawn would fail the same way, so it stops as an application
        # that cannot load does, in one line
        sys.stderr.write(f"corral: error: {import_failure(exc, pool.identity)}\n")
        code = EXIT_APP_LOAD
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def worker_main(fork: Fork) -> int:
    """Title, access log, standard streams and user of the worker, then its loop."""
    pool, slot, beat_fd, max_requests = fork.pool, fork.slot, fork.beat_fd, fork.max_requests
    # Gunicorn's [proc_name] when one application runs, else the application's own name
    # (also for one made through the control API, which the master's title cannot know)
    proc_name = pool.settings.proc_name
    several = len(pool.doc.applications) > 1
    set_title(f"corral: worker [{proc_name if proc_name and not several else pool.name}]")
    app = pool.application
    settings = pool.settings
    access_log = None
    if pool.doc.access_logfile:  # opened before the switch, as Gunicorn does
        from corral.observe.accesslog import AccessLog

        access_log = AccessLog(pool.doc.access_logfile, pool.doc.access_logformat)
    stdio: dict[int, int] = {}
    if app.stdout is not None or app.stderr is not None:  # NGINX Unit's, as the access log
        try:
            stdio = open_stdio(app.stdout, app.stderr)
        except StdioError as exc:  # the master's one line says it, as for an import
            with contextlib.suppress(OSError):
                os.write(beat_fd, encode(Failed(str(exc))))
            return EXIT_APP_LOAD  # as an application that cannot import: it would again
    prepare(pool)  # what the worker imports, while the interpreter is readable (needs.py)
    try:
        pool.identity.switch()
    except OSError as exc:
        sys.stderr.write(f"corral: error: cannot switch the worker's user: {exc}\n")
        return EXIT_APP_LOAD  # the master stops: a respawn would fail the same way
    if stdio:  # after the switch's own error, which is corral's
        redirect_stdio(stdio, access_log)
    spec = WorkerSpec(
        application=app,
        settings=settings,
        listeners=pool.listeners,
        router=pool.router,
        app_name=pool.name,
        handoff_socket=pool.handoff,
        handoff_addresses=pool.handoff_addresses,
        heartbeat_fd=beat_fd,
        stacks_socket=fork.stacks,
        orders_socket=fork.orders,
        tls_contexts={
            address: pool.tls[address] for address in pool.sockets if address in pool.tls
        },
        loaded_app=pool.loaded_app,
        # other processes may serve it too (a dynamic pool may grow to max)
        multiprocess=max(app.workers, app.dynamic.max if app.dynamic else 1) > 1,
        access_log=access_log,
        max_requests=max_requests,
        hooks=fork.hooks,
        latency_histogram=fork.latency_histogram,
        handoff_timeout=settings.handoff_timeout,
        board=pool.board,
        slot=slot,
        route_limiters=pool.route_limiters,
        seat=fork.seat,
        total_conns=pool.total_conns,
        php=_php_applications(pool.doc),
    )
    return run_worker(spec)


def _php_applications(doc: Any) -> dict[str, Any]:
    """The document's php applications as the worker reaches them (`corral.php.apps`,
    imported only when there is one)."""
    if not any(is_php(app) for app in doc.applications.values()):
        return {}
    from corral.php.apps import php_applications

    return php_applications(doc)


def set_title(title: str) -> None:
    """The process title ``ps`` shows (the master's too)."""
    try:
        import setproctitle
    except ImportError:  # pragma: no cover - a declared dependency
        return
    setproctitle.setproctitle(title)


def set_master_title(name: str) -> None:
    """The master's title (`corral.master.title`), by which `corral ctl` finds it."""
    set_title(master_title(name))


@dataclass
class Entered:
    """What `apply_environment` changed: the sys.path entries it added and, for each
    environment variable it set, the value before (None: unset)."""

    paths: list[str] = field(default_factory=list)
    environ: dict[str, str | None] = field(default_factory=dict)

    def undo(self) -> None:
        for path in self.paths:
            with contextlib.suppress(ValueError):
                sys.path.remove(path)
        for key, before in self.environ.items():
            if before is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = before


def apply_environment(app: Any) -> Entered:
    """Enter ``app``'s environment: its chdir, pythonpath and env (undone by the result)."""
    entered = Entered()
    if app.chdir:
        os.chdir(app.chdir)
    for path in reversed(app.pythonpath or []):
        if path not in sys.path:
            sys.path.insert(0, path)
            entered.paths.append(path)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like gunicorn: the working directory is importable
        entered.paths.append(os.getcwd())
    for key, value in (app.env or {}).items():
        entered.environ[key] = os.environ.get(key)
        os.environ[key] = value
    return entered


def import_failure(exc: ImportError, identity: Identity) -> str:
    """One line for a worker that could not import a module it needs."""
    line = f"a worker could not import {exc.name or 'a module'}: {exc}"
    if identity.uid is not None or identity.gid is not None:
        line += (
            f" (the worker runs as another user: {sys.base_prefix} must be readable by it; "
            "use a virtualenv made from a Python every user can read, such as /usr/bin/python3)"
        )
    return line

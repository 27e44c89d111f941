"""Start-up: from the document to a running arbiter, or one line and an exit code.

The order matters and is kept here: the error log, the emperor's vassals, what an old master
(USR2) or systemd passed on, the control socket, the arbiter, hooks, the pid file, the
listeners (inherited ones first), the preloaded applications, then `Arbiter.run`. Every
failure before the arbiter runs is one line on standard error (``corral: error: ...``) and
its exit code: 2 for the configuration, 1 for a listener, 3 for an application that cannot
load.
"""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from corral.apps.loader import (
    application_traceback,
    describe_load_failure,
    load_entry_points,
    load_failure,
)
from corral.config import ConfigError, Document
from corral.hooks import HookError
from corral.master import child, systemd, upgrade
from corral.master.arbiter import EXIT_CONFIG, EXIT_LISTEN, Arbiter
from corral.master.generation import Origin
from corral.master.listeners import ListenError, bind_all, close_all
from corral.master.pidfile import PidFile
from corral.observe.errorlog import setup_logging
from corral.server.worker import EXIT_APP_LOAD, share_event_loop


def serve(
    doc: Document,
    origin: Origin | None = None,
    control: Any = None,
    started: Callable[[], None] | None = None,
    emperor: str | None = None,
    fd: int | None = None,
) -> int:
    """Run the server the document describes until it is stopped; returns the exit code.

    ``control`` (`corral.control.options.ControlOptions`, or None) turns the control API on;
    ``started`` is called once every worker of the first generation is ready (a daemon's
    foreground process is waiting for it). With ``emperor`` (a directory), ``doc`` holds the
    server-wide settings and the applications are the vassal files of that directory
    (master/emperor.py). ``fd``: Uvicorn's --fd, the socket to serve instead of binding.
    """
    settings = doc.settings
    try:
        log = setup_logging(settings)
    except ValueError as exc:
        sys.stderr.write(f"corral: error: --log-config: {exc}\n")
        return EXIT_CONFIG
    vassals = None
    if emperor is not None:
        from corral.master.emperor import Emperor

        vassals = Emperor(emperor, doc, log)
        vassals.look()
        doc = vassals.document()
        origin = replace(origin or Origin(None), reread=vassals.document)
    old_master = upgrade.take_old_master()
    inherited = upgrade.take_inherited_listeners()
    if control is None:
        return _serve(doc, origin, log, old_master, inherited, None, started, vassals, fd)
    from corral.control.server import ControlServer

    control_server = ControlServer(control, log)
    try:
        control_server.bind(inherited.pop(control_server.inherit_key, None))
    except (ConfigError, ListenError) as exc:
        sys.stderr.write(f"corral: error: {exc}\n")
        close_all(inherited, unlink=False)
        return EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_LISTEN
    try:
        return _serve(doc, origin, log, old_master, inherited, control_server, started, vassals, fd)
    finally:  # unless the arbiter ran and closed it: a start that failed
        control_server.close_socket(unlink=control_server.bound_here)


def _serve(
    doc: Document,
    origin: Origin | None,
    log: logging.Logger,
    old_master: int | None,
    inherited: dict[str, socket.socket],
    control_server: Any,
    started: Callable[[], None] | None = None,
    vassals: Any = None,
    fd: int | None = None,
) -> int:
    settings = doc.settings
    activated = systemd.listen_fds()
    handed = "systemd"  # who gave the sockets, if anyone
    if (passed_on := upgrade.take_activated()) is not None:  # an old master's, and who gave it
        activated, handed = inherited, passed_on
    elif not activated and fd is not None:  # Uvicorn's --fd
        handed = f"--fd {fd}"
        try:
            activated = systemd.take_fd(fd, settings.backlog)
        except ValueError as exc:
            sys.stderr.write(f"corral: error: --fd: {exc}\n")
            return EXIT_CONFIG
    if activated:  # Gunicorn's rule: they replace the configured binds, reloads included
        addresses = list(activated)
        if set(doc.listeners) != set(addresses):
            log.info("%s: not binding %s", handed, ", ".join(doc.listeners))
        doc = systemd.replace_binds(doc, addresses)
        if origin is not None and origin.reread is not None:
            reread = origin.reread
            origin = replace(origin, reread=lambda: systemd.replace_binds(reread(), addresses))
        inherited = activated
    if not doc.listeners and not doc.applications and control_server is None and not vassals:
        sys.stderr.write(
            "corral: error: nothing to serve: the document has no listener and no application "
            "(start with --control unix:PATH to configure them through the control API)\n"
        )
        return EXIT_CONFIG
    share_event_loop(settings.loop)
    try:
        arbiter = Arbiter(doc, log, origin, control_server)
    except ValueError as exc:
        sys.stderr.write(f"corral: error: {exc}\n")
        return EXIT_CONFIG
    arbiter.emperor = vassals
    if control_server is not None:
        control_server.arbiter = arbiter
        if control_server.options.owns_config:
            arbiter.reloads.persist = control_server.save
    if settings.reload:
        try:
            import watchfiles  # noqa: F401  (the watcher thread imports it again)
        except ImportError:
            sys.stderr.write(
                "corral: error: --reload needs the watchfiles package: "
                f"{sys.executable} -m pip install watchfiles\n"
            )
            return EXIT_CONFIG
    arbiter.upgrade.old_master = old_master
    arbiter.upgrade.activated = handed if activated else None
    arbiter.started = started
    if arbiter.current.application is not None:
        arbiter.supervisor.entered = child.apply_environment(arbiter.current.application)
    try:
        arbiter.hooks.load(settings.hooks)
    except HookError as exc:
        sys.stderr.write(f"corral: error: {exc}\n")
        close_all(inherited, unlink=False)
        return EXIT_CONFIG
    arbiter.hooks.call("nworkers_changed", arbiter.num_workers)
    pidfile = PidFile(settings.pid) if settings.pid else None
    if pidfile is not None:
        try:
            pidfile.create()
        except (RuntimeError, OSError) as exc:
            sys.stderr.write(f"corral: error: {exc}\n")
            close_all(inherited, unlink=False)
            return EXIT_LISTEN
    arbiter.upgrade.pidfile = pidfile
    try:
        arbiter.hooks.call("on_starting")
        sockets = {a: s for a, s in inherited.items() if a in doc.listeners}
        close_all({a: s for a, s in inherited.items() if a not in sockets}, unlink=False)
        try:
            sockets.update(
                bind_all(
                    [address for address in doc.listeners if address not in sockets],
                    backlog=settings.backlog,
                    unix_mode=settings.unix_socket_mode,
                    reuse_port=settings.reuse_port,
                )
            )
        except ListenError as exc:
            sys.stderr.write(f"corral: error: {exc}\n")
            close_all(sockets, unlink=False)
            return EXIT_LISTEN
        arbiter.generations.sockets = dict(sockets)
        try:
            arbiter.current.attach(
                sockets, arbiter.reloads.bind_handoffs(doc), arbiter.reloads.certificates()
            )
        except ListenError as exc:
            sys.stderr.write(f"corral: error: {exc}\n")
            return EXIT_LISTEN
        except _tls_error() as exc:  # a certificate file changed since the arbiter read it
            sys.stderr.write(f"corral: error: {exc}\n")
            return EXIT_CONFIG
        try:
            for pool in arbiter.current.pools.values():
                app = pool.application
                if not app.preload:
                    continue
                try:
                    pool.loaded_app = load_entry_points(app.entry_points, app.factory)
                except Exception as exc:
                    # the application's own frames where they explain, then the one line
                    shown = application_traceback(exc)
                    if shown is not None:
                        sys.stderr.write(f"{shown}\n")
                    why = load_failure(pool.name, app.entry_points, describe_load_failure(exc))
                    sys.stderr.write(f"corral: error: {why}\n")
                    return EXIT_APP_LOAD
            return arbiter.run()
        finally:
            close_all(arbiter.sockets, unlink=arbiter.upgrade.unlinks_on_close)
    finally:
        if pidfile is not None:
            pidfile.remove()
        arbiter.hooks.call("on_exit")


def _tls_error() -> type[ValueError]:
    """`corral.tls`'s error, imported when an exception is matched against it (an ``except``
    clause's class is looked up then): only a document with TLS imports `corral.tls`, and
    only it raises this."""
    from corral.tls.served import TlsError

    return TlsError

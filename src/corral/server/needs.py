"""What a worker imports beyond every worker's, from its pool's configuration (`modules_for`),
imported by the master before it forks the worker (`share`); and what a worker's rarer paths
import, imported in a fork's child before the worker's user switch (`prepare`).

A worker imports a subsystem where its configuration first uses it (server/worker.py,
server/plan.py, server/adapters.py, server/routed.py, corral.actions): a plain worker never
imports routes, TLS, the filters or the other interface's adapter, whose modules would cost
every worker their memory. A worker that switches to another user may no longer read the
interpreter's files (root's pyenv) by the time it needs one: what its configuration uses is the
master's already, and `prepare` imports the rest first.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

from corral.server.adapters import MODULES as ADAPTER_MODULES

__all__ = ["interfaces", "modules_for", "prepare", "share"]


def modules_for(pool: Any) -> list[str]:
    """The modules a worker of ``pool`` (corral.master.generation.Pool: its application,
    listeners, routes and sockets) imports as it starts and serves, beyond every worker's:
    those of its interface (`interfaces`), of what its listeners have (TLS, the PROXY
    protocol, ``forwarded``, uwsgi, limits, probes) and of its routes (the handlers of the
    kinds of action they give, the file engine for shares)."""
    application = pool.application
    names: list[str] = []
    for kind in interfaces(pool):
        names += ADAPTER_MODULES[kind]
    if application.request_timeout > 0:
        names += ["corral.apps.deadline", "ctypes"]
    if pool.board is not None:
        names.append("corral.server.acceptor")
    own = f"applications/{pool.name}"
    routed = pool.handoff is not None
    for listener in pool.listeners:
        routed = routed or listener.pass_target not in (None, own)
        if listener.tls is not None:
            names += ["corral.server.tlsdoor", "corral.server.renewal"]
        if listener.proxy is not None:
            names.append("corral.server.proxied")
        if listener.forwarded is not None:
            names.append("corral.filters.forwarded")
        if listener.protocol == "uwsgi":
            names.append("corral.http.uwsgi")
        if listener.gate is not None:
            names.append("corral.filters.gate")
        if listener.limiter is not None:
            names.append("corral.filters.ratelimit")
        if listener.conn_limit is not None or pool.total_conns is not None:
            names.append("corral.filters.connlimit")
        if listener.health is not None:
            names.append("corral.server.health")
    if routed:
        from corral.actions import KINDS

        names += ["corral.server.routed", "corral.server.handoff", "corral.routing"]
        router = pool.router  # (None: hand-offs only, to this application or answered)
        kinds = () if router is None else KINDS if router.kinds is None else router.kinds
        named = {kind if isinstance(kind, str) else kind.__name__ for kind in kinds}
        named |= {"Respond", "ToApplication"}  # (of any table, and of no table)
        names += sorted({KINDS[kind][0] for kind in named})
        if "Share" in named:
            names.append("corral.static.files")
    return names


def interfaces(pool: Any) -> tuple[str, ...]:
    """The interfaces a worker of ``pool`` may call its application by: the ``interface``
    setting's, or with ``auto`` what the worker will choose (`choose_interface`) when the
    master knows it already (an ASGI worker class, a preloaded application), else both."""
    application = pool.application
    if application.interface != "auto":
        return (application.interface,)
    if application.protocol == "asgi":
        return ("asgi",)
    if pool.loaded_app is not None:
        from corral.apps.loader import choose_interface

        return (choose_interface("auto", application.protocol, pool.loaded_app[0]),)
    return ("wsgi", "asgi")


def share(pool: Any) -> None:
    """In the master, before it forks a worker of ``pool``: what the worker will import
    (`modules_for`), imported once here, so that every worker maps the master's pages of those
    modules instead of importing a private copy after its fork (the WSGI adapter alone is
    0.6 MiB). With ``interface`` auto and the application not imported yet, both adapters."""
    for name in modules_for(pool):
        # (one that cannot be imported fails in the worker, which says so as a failed import)
        with contextlib.suppress(ImportError):
            __import__(name)  # (a statement's import: PYTHONPROFILEIMPORTTIME shows it)


def prepare(pool: Any) -> None:
    """In a fork's child, before it switches to the worker's user (a worker that does not
    switch imports each module when it needs it): what its rarer paths import (why an
    application could not import: sysconfig; its live stacks: json; a spooled body: tempfile;
    an absolute-form target: httptools), while the interpreter's files are readable. What its
    configuration uses (`modules_for`) the master imported before the fork (`share`)."""
    identity = pool.identity
    if identity.uid is None and identity.gid is None:
        return
    for name in ("sysconfig", "json", "tempfile", "httptools"):
        importlib.import_module(name)

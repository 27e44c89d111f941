"""Generations and pools: which document the workers were started from, and which
application's workers accept on which listener.

A `Generation` is one document put in place: its listeners' sockets laid out on a `Pool` per
application (with routes, the hand-off sockets too). The arbiter keeps the current one and,
during a reload or an apply, the pending one; a pool whose workers would start exactly as
its predecessor's did is carried into the next generation instead of restarted
(`Pool.same_workers`). Nothing here forks or signals: these are the plain data the master's
decisions read.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import msgspec

from corral.config import Application, Document
from corral.config.app_types import runs_in_workers
from corral.config.gate_routes import gate_of
from corral.config.listener_tls import Tls, settings_files
from corral.config.php_keys import is_php
from corral.jsonpath import member
from corral.master.connlimits import conn_limits, total_table
from corral.master.identity import Identity
from corral.master.ratelimits import limiters
from corral.observe.refusals import tally_for
from corral.server.acceptor import LoadBoard
from corral.server.health import probes_of
from corral.server.plan import ListenerSpec

if TYPE_CHECKING:
    from corral.tls.served import ListenerTls

BOARD_SLOTS = 64  # room on a pool's load board for workers that TTIN or scaling add

# The pool of a document whose listeners serve only routes (files, `return` answers) and that
# has no application: its name is none an application may have, its workers' application
# never answers (apps/unrouted.py).
ROUTES_POOL = "(routes)"
ROUTES_APPLICATION = Application(module="corral.apps.unrouted", callable="application")


class ApplyFailed(Exception):
    """A document that could not be put in place; the running configuration is unchanged.

    ``status`` is the control API's answer: 400 for a document this server cannot run, 500
    for one that failed while it was being applied (a bind, the user, the application).
    """

    def __init__(self, detail: str, status: int = 500) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


@dataclass(frozen=True)
class Origin:
    """Where the running document came from, so that reload and upgrade can redo it."""

    # the document as the command line and file say now; None: the running document is its
    # own source (the control API's state directory owns it), so a reload restarts it
    reread: Callable[[], Document] | None
    argv: list[str] = field(default_factory=list)  # the command's arguments, for USR2
    cwd: str = field(default_factory=os.getcwd)  # where the command was started
    config_file: str | None = None
    config_note: str | None = None  # logged at start: how the config file was found


class Pool:
    """One application's workers in a generation: what they run and where they accept.

    A pool whose workers would get at their fork exactly what its predecessor's got (same
    application, settings, access log, listener sockets and their passes, routes, hand-off
    sockets and preloaded module) is *carried* into the next generation instead: its workers
    serve on, unrestarted (see `same_workers`).
    """

    def __init__(self, name: str, doc: Document, application: Any = None) -> None:
        self.name = name
        self.doc = doc  # the document it was started from (hooks read it as Gunicorn's cfg)
        # the document's, or ROUTES_APPLICATION for the ROUTES_POOL
        self.application: Any = application or doc.applications[name]
        self.settings = doc.settings
        self.access_log = doc.access_log
        app = self.application
        # resolved now: an unknown user or group is a configuration error (ValueError)
        self.identity = Identity(app.user, app.group)
        self.sockets: dict[str, socket.socket] = {}  # the listeners it accepts on, by address
        self.routes: Any = None  # the document's routes, when one of its listeners uses them
        self.router: Any = None  # ... compiled
        self.upstreams: Any = None  # the document's upstreams, which its router proxies to
        self.handoff: socket.socket | None = None  # its hand-off socket (with routes)
        self.handoff_addresses: dict[str, str] = {}  # those it may hand connections to, its own too
        self.loaded_app: Any = None  # the preloaded application, when preload is on
        # several threaded workers spread their connections by what each holds (acceptor.py)
        most = max(app.workers, app.dynamic.max if app.dynamic else 1)
        self.board = LoadBoard(max(most, BOARD_SLOTS)) if app.threads > 1 and most > 1 else None
        # the TLS context of each of its HTTPS listeners, by address (Generation.attach), and
        # what each serves (a renewal changes it: master/renewal.py)
        self.tls: dict[str, Any] = {}
        self.served: dict[str, ListenerTls] = {}
        self.limiters: dict[str, Any] = {}  # the rate limit of each that has one
        self.route_limiters: dict[str, Any] = {}  # ... and of each route step with one
        self.conn_limits: dict[str, Any] = {}  # the limit_conn of each that has one
        self.total_conns: Any = None  # the server's limit_concurrency_total count
        self.tallies: dict[str, Any] = {}  # the refusals of each (observe/refusals.py)
        self.ever_ready = False
        self.failed_to_load = False  # at start-up, from the state directory (see exits.on_exit)

    @property
    def workers(self) -> int:
        return int(self.application.workers)

    @property
    def serving(self) -> str:
        """What its workers serve, as the start-up log says it."""
        if self.name == ROUTES_POOL:
            return f"the routes with {self.workers} worker(s) (no application)"
        return f"{self.name} with {self.workers} worker(s) x {self.application.threads} thread(s)"

    @property
    def listeners(self) -> list[ListenerSpec]:
        """Each of its listening sockets with what its document listener says."""
        from corral.server.proxied import proxy_choice

        found = []
        for address, sock in self.sockets.items():
            listener = self.doc.listeners[address]
            forwarded, health = listener.forwarded, listener.health
            pass_target = listener.pass_
            gate = None
            if pass_target.startswith("routes") and self.routes is not None:
                gate = gate_of(self.routes, pass_target, self.name)
                if gate is not None:  # allow and deny only: straight to the application
                    pass_target = f"applications/{self.name}"
            found.append(
                ListenerSpec(
                    sock,
                    pass_target,
                    None if forwarded is msgspec.UNSET else forwarded,
                    proxy_choice(listener, self.settings),
                    protocol_of(self.doc, address),
                    self.tls.get(address),
                    self.limiters.get(address),
                    gate,
                    self.conn_limits.get(address),
                    self.tallies.get(address),
                    probes_of(None if health is msgspec.UNSET else health, self.settings),
                )
            )
        return found

    def same_workers(self, other: Pool) -> bool:
        """Whether ``other``'s workers would start exactly as this pool's did."""
        return (
            self.same_but_tls(other)
            and self.listeners == other.listeners  # the same socket objects, the same keys
            and (not self.application.preload or self.loaded_app is other.loaded_app)
        )

    def same_but_tls(self, other: Pool) -> bool:
        """Whether ``other``'s workers would start as this pool's did but for their
        listeners' TLS contexts (and a preloaded application, not loaded yet): the
        question of a renewal (master/renewal.py)."""
        return (
            self.application == other.application
            and self.settings == other.settings
            and self.access_log == other.access_log
            and [replace(spec, tls=None) for spec in self.listeners]
            == [replace(spec, tls=None) for spec in other.listeners]
            and self.routes == other.routes
            and self.upstreams == other.upstreams
            and self.handoff is other.handoff
            and self.handoff_addresses == other.handoff_addresses
            and _php(self.doc) == _php(other.doc)  # (its workers reach them: php/apps.py)
        )


def _php(doc: Document) -> dict[str, Any]:
    """The "php" applications of ``doc``, by name."""
    return {name: app for name, app in doc.applications.items() if is_php(app)}


def _served(doc: Document, addresses: Iterable[str], certificates: Any) -> dict[str, ListenerTls]:
    """What each HTTPS listener among ``addresses`` serves: its own `tls`, the store's
    certificates it names, or the settings' files for every other HTTP listener. `TlsError`
    for what cannot be served (the settings' files are read even without ``addresses``: the
    first generation's construction checks them). `corral.tls` is imported only for a
    document that has TLS: the master's modules are every forked worker's memory too."""
    addresses = list(addresses)
    if not _has_tls(doc, addresses):
        return {}
    from corral.tls.context import session_context
    from corral.tls.served import TlsError, settings_tls, store_tls
    from corral.tls.store import Unserved, listener_bundles

    shared = settings_tls(doc.settings)
    found: dict[str, ListenerTls] = {}
    for address in addresses:
        tls = doc.listeners[address].tls
        if protocol_of(doc, address) != "http" or tls is False:
            continue
        if not isinstance(tls, Tls):
            if shared is not None:
                found[address] = shared
            elif tls is True:
                raise TlsError(
                    f"$.listeners{member(address)}.tls: true serves the certfile setting's "
                    "certificate: set certfile (and keyfile), or name the store's certificate"
                )
            continue
        try:
            get = certificates.get if certificates is not None else dict[str, Any]().get
            bundles, authorities = listener_bundles(tls, get)
        except Unserved as exc:
            store = "" if certificates is not None else " (the store is the control API's)"
            path = f"$.listeners{member(address)}.tls.{exc.where}"
            raise TlsError(f"{path}: {exc.text}{store}") from None
        found[address] = store_tls(tls, bundles, authorities, doc.settings)
    if shared is not None:
        session_context(shared)  # made (and so checked) now, whether a listener serves it or not
    return found


def _has_tls(doc: Document, addresses: Iterable[str]) -> bool:
    """Whether the settings name TLS files or an HTTP listener among ``addresses`` a `tls`
    (what `_served` reads, or refuses)."""
    if settings_files(doc.settings):
        return True
    return any(
        isinstance(doc.listeners[address].tls, Tls) or doc.listeners[address].tls is True
        for address in addresses
        if protocol_of(doc, address) == "http"
    )


def protocol_of(doc: Document, address: str) -> str:
    """A listener's wire protocol: corral's `protocol` key, HTTP when absent."""
    listener = doc.listeners.get(address)
    protocol = listener.protocol if listener is not None else msgspec.UNSET
    return "http" if protocol is msgspec.UNSET else protocol


def scheme_of(doc: Document, address: str) -> str:
    """How a listener is reached, as its log line says it: ``https`` for an HTTP listener with
    the TLS settings, else its wire protocol."""
    protocol = protocol_of(doc, address)
    listener = doc.listeners.get(address)
    tls = msgspec.UNSET if listener is None else listener.tls
    if isinstance(tls, msgspec.UnsetType):
        tls = doc.settings.certfile is not None
    return "https" if protocol == "http" and tls is not False else protocol


def uses_routes(doc: Document) -> bool:
    """Whether a listener's requests are routed (its pass is not one application's name):
    then the applications sharing such listeners get hand-off sockets."""
    # (a pass to an application no worker runs is routed: to the proxy, actions/external.py,
    # or to php-fpm, actions/fastcgi.py)
    direct = {f"applications/{n}" for n, app in doc.applications.items() if runs_in_workers(app)}
    return any(listener.pass_ not in direct for listener in doc.listeners.values())


class Generation:
    """One document the workers were started from: the listeners and a pool per application.

    Which pool accepts on which listener: a listener passing to ``applications/NAME`` is
    NAME's alone; one passing to routes (or to an application named by variables) is shared
    by every application its routes may pass to (`Router.reached`), or by all of them when
    that cannot be told or is none (a table of ``return`` actions); a worker that routes a
    request to another application hands the connection to it (see handoff.py). A document
    with listeners and no application has one pool, `ROUTES_POOL`, whose workers run the
    routes alone (files and ``return`` answers need no application).
    """

    def __init__(
        self,
        number: int,
        doc: Document,
        sockets: dict[str, socket.socket],
        handoffs: dict[str, tuple[str, socket.socket]] | None = None,
        certificates: Any = None,
    ) -> None:
        self.number = number
        self.doc = doc
        self.settings = doc.settings
        apps = doc.applications
        self.pools = {n: Pool(n, doc) for n, app in apps.items() if runs_in_workers(app)}
        for app in doc.applications.values():  # its user and group resolved now, as a pool's
            if not runs_in_workers(app):  # (a supervised program's: corral/external/)
                Identity(app.user, app.group)
        if not self.pools and doc.listeners:
            self.pools[ROUTES_POOL] = Pool(ROUTES_POOL, doc, ROUTES_APPLICATION)
        self.fresh: set[str] = set(self.pools)  # pools not carried over from a predecessor
        # the applications its change restarts whatever their keys (None: every one, a reload)
        self.restart: Collection[str] | None = ()
        # set while it is the pending generation: the reason it was rolled back, or None
        self.settled: asyncio.Future[str | None] | None = None
        self.sockets: dict[str, socket.socket] = {}
        self.attach(sockets, handoffs or {}, certificates)

    def attach(
        self,
        sockets: dict[str, socket.socket],
        handoffs: dict[str, tuple[str, socket.socket]],
        certificates: Any = None,
    ) -> None:
        """Lay the listeners (and, with routes, the hand-off sockets) out on the pools, with
        the TLS contexts of their HTTPS listeners: the settings' files, or the certificates a
        listener's `tls` names in ``certificates`` (the control API's store,
        `corral.tls.store.CertificateStore`). `TlsError` (a ValueError) for what cannot be
        served."""
        self.sockets = sockets
        doc = self.doc
        served = _served(doc, sockets, certificates)
        contexts: dict[str, Any] = {}
        if served:
            from corral.tls.context import session_context

            contexts = {address: session_context(tls) for address, tls in served.items()}
        # (not the first generation's construction, before its sockets; and none to forget
        # when no generation made one)
        if sockets and "corral.tls.context" in sys.modules:
            from corral.tls.context import forget_others

            forget_others(list(contexts.values()))
        router = None
        if uses_routes(doc):
            from corral.config.document import route_targets
            from corral.net.upstream import ProxyOptions
            from corral.routing import compile_routes

            routes = None if doc.routes is msgspec.UNSET else doc.routes
            router = compile_routes(
                routes,
                applications=route_targets(doc.applications),
                upstreams=doc.upstreams,
                proxy=ProxyOptions.of(doc.settings),
            )
        # (the tables once there are sockets: not for the first generation's check)
        limits, step_limits = limiters(doc, sockets) if sockets else ({}, {})
        conns = conn_limits(doc, sockets) if sockets else {}
        total = total_table(doc) if sockets else None
        tallies = {address: tally_for(address) for address in sockets}  # (made before the fork)
        for pool in self.pools.values():
            pool.sockets = {}
            pool.tls = contexts
            pool.served = dict(served)
            pool.limiters, pool.route_limiters = limits, step_limits
            pool.conn_limits, pool.total_conns, pool.tallies = conns, total, tallies
            if router is not None:  # its workers route by it: a routed listener's, a hand-off's
                pool.routes, pool.router, pool.upstreams = doc.routes, router, doc.upstreams
        for address, sock in sockets.items():
            for name in self._served_by(doc.listeners[address].pass_, router):
                self.pools[name].sockets[address] = sock
        # Every pool gets its hand-off socket, also one its routes do not reach now: the
        # workers a change retires still route by the old table while they drain, and a
        # connection they hand over must find a worker (which routes it by the new one).
        for name in self.pools.keys() & handoffs.keys():
            pool = self.pools[name]
            pool.handoff = handoffs[name][1]
            pool.handoff_addresses = {other: address for other, (address, _) in handoffs.items()}
        if router is not None:  # a pass to an external application is proxied to its programs
            from corral.actions.external import reach

            externals = reach(doc)
            for pool in self.pools.values():
                pool.handoff_addresses = {**pool.handoff_addresses, **externals}

    def _served_by(self, pass_: str, router: Any) -> list[str]:
        # "applications/NAME/TARGET" is NAME's too: its workers run every target
        name = pass_.removeprefix("applications/").partition("/")[0]
        if name in self.pools:
            return [name]
        reached = router.reached if pass_.startswith("routes") else None
        if reached and any(n not in self.pools for n in reached):
            reached = None  # an external application is among them: any worker proxies to it
        return [n for n in self.pools if not reached or n in reached]

    @property
    def application(self) -> Any:
        """The application when there is exactly one (what single-application views show)."""
        if len(self.pools) != 1 or ROUTES_POOL in self.pools:
            return None
        return next(iter(self.pools.values())).application

    @property
    def app_name(self) -> str | None:
        if len(self.pools) != 1 or ROUTES_POOL in self.pools:
            return None
        return next(iter(self.pools))


@dataclass
class Generations:
    """The master's generations: the one serving, the one a change is starting (until it
    commits or rolls back), and the listener and hand-off sockets they share. reload.py's
    `Reloads` changes them; the other parts of the master read them."""

    current: Generation
    pending: Generation | None = None
    sockets: dict[str, socket.socket] = field(default_factory=dict)  # every open listener
    # with routes, each application's hand-off socket and its address, by name
    handoffs: dict[str, tuple[str, socket.socket]] = field(default_factory=dict)

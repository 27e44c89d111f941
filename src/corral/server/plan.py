"""One listener of a worker: what the master gives it (`ListenerSpec`) and what the worker makes
of it once, when it starts (`ListenerPlan`).

A listener's features are data in its plan, not subclasses of the connection: the wire protocol
(its parser: HTTP/1.1 or uwsgi packets), a trusted proxy's ``forwarded`` headers, the PROXY
protocol, and routes (with the hand-off to other applications' workers: ``routing`` gives each
connection its own ``route``, `corral.server.routed.RouteState`, which is its parser's sink).
There is one connection class, `corral.server.connection.HttpConnection`; every connection of
the listener runs its plan, and a feature the listener does not have costs its connections one
attribute test, where that feature would act.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import Any

from corral.core import RequestParser
from corral.observe.refusals import Refusals

# What a listener has beyond plain HTTP/1.1 is imported when a plan first has it (uwsgi, the
# PROXY protocol, `forwarded`, probes, connection limits): a plain worker never imports them.


@dataclass(frozen=True, eq=True)
class ListenerSpec:
    """One listening socket of a pool and what its document listener says, as the master
    hands it to a worker at the fork (compared, socket by identity, to carry a pool over)."""

    socket: socket.socket
    pass_target: str | None = None  # "applications/NAME", "routes", "routes/NAME"; None: own
    forwarded: Any = None  # the listener's `forwarded` (config Forwarded), None without one
    proxy: Any = None  # the PROXY protocol (proxied.proxy_choice: mode, peers), None: off
    protocol: str = "http"  # or "uwsgi" (http/uwsgi.py)
    tls: Any = None  # the ssl.SSLContext of an HTTPS listener (corral.tls.context), None: plain
    limiter: Any = None  # its `rate_limit` (filters/ratelimit.Limiter, the master's), None: none
    gate: Any = None  # its routes' allow and deny, when that is all they do (filters/gate.py)
    # its `limit_conn` (connlimit.ConnTable, the master's, its limit, its status), None: none
    conn_limit: Any = None
    tally: Any = None  # its refusals' counts (observe/refusals.Tally, the master's), None: none
    health: Any = None  # its probes' paths, (readiness, liveness) (server/health.py), None: none


class ListenerPlan:
    """What one listener's connections do beyond plain HTTP/1.1, decided once per worker.

    ``routing`` (routed.Routing) is set (with ``pass_target``) only on a listener whose pass is
    not the worker's own application, and also on the plan of a connection adopted from a
    hand-off; ``forwarding`` (forwarded.Forwarding) only with ``forwarded``; ``proxy``
    (proxied.ProxyPlan) only with the PROXY protocol; ``tls`` (an ssl.SSLContext) only on an
    HTTPS listener, whose connections' transports decrypt what the connection reads."""

    __slots__ = (
        "conns",
        "forwarding",
        "gate",
        "limiter",
        "parser",
        "pass_target",
        "probes",
        "proxy",
        "refusals",
        "routing",
        "sockname",
        "steps",
        "tls",
        "tls_proxy",
        "uwsgi",
    )

    def __init__(
        self,
        sockname: Any = None,
        *,
        parser: Any = RequestParser,
        forwarding: Any = None,
        proxy: Any = None,
        routing: Any = None,
        pass_target: str | None = None,
        steps: Any = None,
        tls: Any = None,
        tls_proxy: Any = None,
        limiter: Any = None,
        gate: Any = None,
        conns: Any = None,
        refusals: Any = None,
        probes: Any = None,
    ) -> None:
        self.sockname = sockname  # the listener's address, known once per listener
        self.parser = parser  # the wire protocol's parser class
        # whether it reads uwsgi packets (its class says so: http/uwsgi.py), for the adapter
        self.uwsgi = getattr(parser, "uwsgi", False)
        self.forwarding = forwarding
        self.proxy = proxy
        self.routing = routing
        self.pass_target = pass_target
        # what stands between an answer's fields and body and the wire (compression: a
        # `corral.server.steps.Compress`), None without any: see HttpConnection.begin
        self.steps = steps
        self.tls = tls
        # on an HTTPS listener the PROXY header comes before the handshake: read by the door
        # (corral/server/tlsdoor.py), not by the connection (whose ``proxy`` is then None)
        self.tls_proxy = tls_proxy
        # its `rate_limit` (filters/ratelimit.Limiter), None without one: counted before routing
        self.limiter = limiter
        # allow and deny (filters/gate.ClientGate), None without: asked once per connection
        self.gate = gate
        # its connection counts (filters/connlimit.ConnGate), None without `limit_conn` and
        # `limit_concurrency_total`
        self.conns = conns
        # what counts and logs its refusals (observe/refusals.Refusals), None: not counted
        self.refusals = refusals
        # its readiness and liveness probes (server/health.Probes), None without
        self.probes = probes


PLAIN = ListenerPlan()  # a listener with none of it, its address read from each connection


class Plans:
    """Every listener plan of one worker is made here: one per listener (`for_listener`), and
    one per connection handed here from another application's worker (`for_handoff`), which
    runs its listener's features with the pass the hand-off names."""

    def __init__(
        self,
        listeners: Any,
        own_application: str,
        routing: Any,
        log: logging.Logger,
        *,
        discard_unsafe_fields: Any,
        steps: Any = None,
        counts: Any = None,
    ) -> None:
        self.own_pass = f"applications/{own_application}"
        self.routing = routing  # routed.Routing, or None when nothing routes here
        self.log = log
        self.steps = steps
        # the compiled `forwarded` of each listener that has one, by its socket address: a
        # connection handed off from such a listener trusts its proxy here too
        self.forwardings: dict[Any, Any] = {}
        for listener in listeners:
            if listener.forwarded is not None:
                from corral.filters.forwarded import Forwarding

                self.forwardings[listener.socket.getsockname()] = Forwarding.from_document(
                    listener.forwarded, discard_unsafe_fields
                )
        # ... and the rate limit of each that has one: a connection handed off is counted on
        self.limiters = {
            listener.socket.getsockname(): listener.limiter
            for listener in listeners
            if listener.limiter is not None
        }
        # ... and its connection counts and refusals (refusals.Counts makes them: the seat)
        self.conns: dict[Any, Any] = {}
        self.refusals: dict[Any, Any] = {}
        for listener in listeners if counts is not None else ():
            sockname = listener.socket.getsockname()
            self.conns[sockname] = counts.conns(listener.conn_limit)
            self.refusals[sockname] = counts.refusals(listener.tally)

    def for_listener(self, listener: ListenerSpec) -> ListenerPlan:
        """What one listener's connections do, decided once: a plain one never pays for
        routing, `forwarded`, the PROXY protocol or another wire protocol."""
        sockname = listener.socket.getsockname()
        probes = None
        if listener.health is not None:
            from corral.server.health import Probes

            ready_path, live_path = listener.health
            probes = Probes(ready_path, live_path)
        proxy = None
        if listener.proxy is not None:
            from corral.server.proxied import ProxyPlan

            mode, peers = listener.proxy
            proxy = ProxyPlan(mode, peers, self.log)
        if listener.protocol == "uwsgi":  # straight to this application (the document says so)
            from corral.http.uwsgi import UwsgiParser

            limiter = listener.limiter
            return ListenerPlan(
                sockname,
                parser=UwsgiParser,
                proxy=proxy,
                steps=self.steps,
                limiter=limiter,
                conns=self.conns.get(sockname),
                refusals=self.refusals.get(sockname),
                probes=probes,
            )
        forwarding = self.forwardings.get(sockname)
        tls_proxy = None
        if listener.tls is not None:
            proxy, tls_proxy = None, proxy
        gate = None
        if listener.gate is not None:
            from corral.filters.gate import ClientGate  # (it answers with actions/respond.py's)

            gate = ClientGate(listener.gate)
        routing, pass_target = None, None  # straight to this worker's application
        if listener.pass_target not in (None, self.own_pass):
            assert self.routing is not None
            routing, pass_target = self.routing, listener.pass_target
        return ListenerPlan(
            sockname,
            forwarding=forwarding,
            proxy=proxy,
            routing=routing,
            pass_target=pass_target,
            steps=self.steps,
            tls=listener.tls,
            tls_proxy=tls_proxy,
            limiter=listener.limiter,
            gate=gate,
            conns=self.conns.get(sockname),
            refusals=self.refusals.get(sockname),
            probes=probes,
        )

    def for_handoff(self, sockname: Any, pass_target: str) -> ListenerPlan:
        """The plan of a connection handed here from the listener at ``sockname``: routed by
        ``pass_target``, with that listener's `forwarded` (its PROXY header was read by the
        worker that accepted it)."""
        known = isinstance(sockname, (tuple, str))
        return ListenerPlan(
            sockname,
            forwarding=self.forwardings.get(sockname) if known else None,
            routing=self.routing,
            pass_target=pass_target,
            steps=self.steps,
            limiter=self.limiters.get(sockname) if known else None,
            conns=self.conns.get(sockname) if known else None,
            refusals=self.refusals.get(sockname) if known else None,
        )


class Counts:
    """What a worker makes its listeners' connection counts and refusals of (from its
    ``WorkerSpec``): its seat (the master's, at the fork), the server's whole count and limit
    (`limit_concurrency_total`), and its access log."""

    def __init__(self, spec: Any) -> None:
        self.seat = spec.seat
        self.total_limit = spec.settings.limit_concurrency_total
        self.total = spec.total_conns if self.total_limit else None
        self.access_log = spec.access_log

    def conns(self, conn_limit: Any) -> Any:
        """A listener's `corral.filters.connlimit.ConnGate`, None when nothing limits it."""
        if conn_limit is None and self.total is None:
            return None
        from corral.filters.connlimit import ConnGate

        table, limit, status = conn_limit if conn_limit is not None else (None, 0, 503)
        return ConnGate(table, limit, status, self.total, self.total_limit, self.seat)

    def refusals(self, tally: Any) -> Refusals:
        return Refusals(tally, self.access_log)

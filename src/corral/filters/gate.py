"""nginx's ``allow`` and ``deny`` decided once per client, not once per request.

`--allow-from` and `--deny-from` write NGINX Unit's routes: steps that answer a status to a
``source`` and a last one that passes to the application (config/gate_routes.py); a document
may write the same table itself. Routing such a table for every request
would cost a routed request's path (a third of a hello's instructions), for an answer that
depends on the client alone. So a listener whose routes are exactly that
(`corral.config.gate_routes.gate_of`) passes straight to its application and carries the
steps in its plan as a :class:`ClientGate`, which each connection asks once, when its client
is known (`for_client`): an allowed connection then pays nothing per request. Until then
(and for a PROXY header that names no client), and for a connection from a trusted proxy,
whose `forwarded` headers may name another client in each request, the gate is asked for
each request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from corral.actions.respond import AnsweringConnection, refuse
from corral.net.addresses import address_matcher, socket_address

if TYPE_CHECKING:
    from corral.config.gate_routes import GateSteps
    from corral.server.exchange import Exchange


class GatedConnection(AnsweringConnection, Protocol):
    """A connection whose client the gate judges, as read here: `corral.server.connection`'s
    `HttpConnection`, which imports this module (through its listener's plan)."""

    peer: Any  # the peer's address, as the transport gives it
    trusted: bool  # whether the peer is a proxy whose `forwarded` headers count


class ClientCheck:
    """What a connection asks about each request's client (its ``gate``): a compiled class,
    so that the connection calls it in C, with nothing to pay when the answer is no."""

    __slots__ = ()

    def refuses(self, conn: GatedConnection, exchange: Exchange) -> bool:
        """True when ``exchange`` is refused (its answer then set)."""
        raise NotImplementedError


class Refused(ClientCheck):
    """A connection whose client the gate refuses: every request answered the status (as the
    route's ``return`` answered it, the connection kept open as far as the request allows)."""

    __slots__ = ("status",)

    def __init__(self, status: int) -> None:
        self.status = status

    def refuses(self, conn: GatedConnection, exchange: Exchange) -> bool:
        return refuse(conn, exchange, self.status, "denied")


class ClientGate(ClientCheck):
    """A listener's `gate_of` steps, compiled (the plan's ``gate``): asked for each request
    until a connection's client is known (`for_client`)."""

    __slots__ = ("refusals", "steps")

    def __init__(self, steps: GateSteps) -> None:
        self.steps = tuple((address_matcher(list(sources)), status) for sources, status in steps)
        self.refusals = {status: Refused(status) for _, status in steps}

    def status_of(self, client: Any) -> int:
        """The status the first step matching ``client`` (a peer address) answers; 0: none."""
        address = socket_address(client)
        for matches, status in self.steps:
            if matches(address):
                return status
        return 0

    def for_client(self, conn: GatedConnection) -> Any:
        """What ``conn`` asks for each request (its ``gate``), once its client is known:
        None when the client is let in, its refusal when not, a `ProxiedClients` when a
        trusted proxy's headers may name another client in each request."""
        status = self.status_of(conn.peer)
        if conn.trusted:
            return ProxiedClients(self, status)
        return self.refusals[status] if status else None

    def refuses(self, conn: GatedConnection, exchange: Exchange) -> bool:
        """One request: its client is the one a trusted proxy's headers name, else the peer."""
        forwarded = exchange.forwarded
        client = conn.peer
        if forwarded is not None and forwarded.address is not None:
            client = (forwarded.address, forwarded.port or 0)
        status = self.status_of(client)
        return bool(status) and self.refusals[status].refuses(conn, exchange)


class ProxiedClients(ClientCheck):
    """The gate of a trusted proxy's connection: each request is judged by the client its
    headers name (the last one's answer kept: a proxy's connection often carries one client's
    requests in a row), one without such headers by the proxy's own address."""

    __slots__ = ("client", "client_status", "gate", "peer_status")

    def __init__(self, gate: ClientGate, peer_status: int) -> None:
        self.gate = gate
        self.peer_status = peer_status
        self.client: str | None = None
        self.client_status = 0

    def refuses(self, conn: GatedConnection, exchange: Exchange) -> bool:
        forwarded = exchange.forwarded
        if forwarded is None or forwarded.address is None:
            status = self.peer_status
        else:
            if forwarded.address != self.client:
                self.client = forwarded.address
                self.client_status = self.gate.status_of((forwarded.address, 0))
            status = self.client_status
        return bool(status) and self.gate.refusals[status].refuses(conn, exchange)

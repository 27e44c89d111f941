"""Readiness and liveness probes, answered by the worker that reads them, never by the
application: a load balancer or Kubernetes asks whether to send this server traffic
(readiness) and whether to restart it (liveness).

A listener with probes (``health``, or its own ``health`` key in the document) has a `Probes`
in its plan; each request's head is compared with the two paths before anything else looks at
it (limits, routes, the application), so a probe is answered even when those would refuse or
queue it. Readiness is 503 from the moment a graceful stop begins: at once on TERM, through
the ``shutdown_delay`` in which the worker still serves everything else (the time the
balancer takes to stop sending), and through the drain after it. Through the delay each
answer closes its connection (``Connection: close``, as in the drain), so that a balancer's
kept connections leave for the other instances while the answers are the client's, not on a
close of the server's that could cross a request. Liveness is 200 while the worker answers
at all, draining included: a server that drains is not to be restarted.

The master says the same of the whole server in the control API's ``/status`` (`readiness`:
starting, ready, no worker ready, draining), which a probe cannot: a worker that answers is
started, and none answers while none is.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

from corral.actions.respond import AnsweringConnection, Reply

if TYPE_CHECKING:
    from corral.server.exchange import Exchange

# how the master tells its workers that the whole server stops (TERM alone retires one worker,
# a reload's or a recycle's): readiness 503 now, the drain after ``shutdown_delay``, and what
# waits in the listeners' accept queues is served before they close
SERVER_STOPS = signal.SIGRTMIN + 1

_TEXT = "Content-Type: text/plain\r\nCache-Control: no-store\r\n"
# the answers, the same for every probe (answered in their turn: actions/respond.py)
READY = Reply(200, None, _TEXT, b"ready\n")
DRAINING = Reply(503, None, _TEXT, b"draining\n")
LIVE = Reply(200, None, _TEXT, b"live\n")


class Probes:
    """A listener's two probe paths (bytes, as the request target has them) and the answers."""

    __slots__ = ("liveness", "readiness")

    def __init__(self, readiness: str, liveness: str) -> None:
        self.readiness = readiness.encode("latin-1")
        self.liveness = liveness.encode("latin-1")

    def answers(self, conn: AnsweringConnection, exchange: Exchange) -> bool:
        """Whether ``exchange`` is a probe: then it is answered in its turn (its answerer set),
        and nothing else sees it."""
        target = exchange.head.target
        query = target.find(b"?")
        path = target if query < 0 else target[:query]
        if path == self.readiness:
            exchange.action = DRAINING if conn.server.draining else READY
            return True
        if path == self.liveness:
            exchange.action = LIVE
            return True
        return False


def probes_of(listener_health: Any, settings: Any) -> tuple[str, str] | None:
    """A listener's probe paths, (readiness, liveness), or None: its own ``health`` key if
    the document gives one, else the ``health`` setting."""
    on = settings.health if listener_health is None else listener_health
    return (settings.readiness_path, settings.liveness_path) if on else None


def server_readiness(
    stopping: bool, ever_ready: bool, ready_workers: int, runs_workers: bool = True
) -> str:
    """The whole server's readiness, as ``/status`` says it: ``ever_ready``, its start-up
    is over; ``runs_workers``, its document has something for workers to serve (without,
    external programs or nothing: ready once started)."""
    if stopping:
        return "draining"
    if ready_workers or (ever_ready and not runs_workers):
        return "ready"
    return "no worker ready" if ever_ready else "starting"

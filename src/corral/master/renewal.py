"""New certificates in the running workers: a renewal without new workers (issue 33).

When a change (a HUP, a touched certificate file, the control API's document) finds that a
pool would start exactly as it runs but for its listeners' certificates (same settings,
versions, ciphers, session settings and client authorities), the pool is carried into the
next generation and its certificates are *renewed* in place: nothing forks, no application
is imported again. At the commit:

- the master serves the new certificates on its own copy of the listeners' session contexts
  (`corral.tls.context.renew`): a worker forked from then on (a respawn, a dynamic pool's
  new worker) inherits them;
- it sends each of the pool's workers a `corral.tls.served.Renewal` on the worker's *orders
  socket* (a ``SOCK_SEQPACKET`` pair made at the fork: one message, one ``send``), with the
  PEM of the new certificates, which the workers' user may not be allowed to read from
  their files;
- each worker makes the contexts from memory, serves them to every new handshake at once
  (server/renewal.py), and says ``renewed N`` on its heartbeat pipe; the control API's answer
  waits for that (`acted_on`), so a connection opened after it meets the new certificate.

Open connections go on with the certificate they were accepted with, and sessions resume
across the renewal (the session context, its ticket keys and its cache, stay). Whatever
cannot be served is refused before anything changes: the master makes the contexts first
(`prepare`), and a `TlsError` is the change's one-line failure, the old certificates serving.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.master.generation import Generation, Pool
    from corral.master.process import WorkerProcess
    from corral.tls.served import ListenerTls

__all__ = ["ACK_WAIT", "Prepared", "acted_on", "carried", "deliver", "orders_pair", "prepare"]

ACK_WAIT = 2.0  # seconds the control API's answer waits for the running workers' "renewed"


def orders_pair() -> tuple[socket.socket, socket.socket]:
    """A new worker's orders socket: (the master's end, the worker's end), non-blocking
    (the worker reads it on its loop)."""
    ends = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for end in ends:
        end.setblocking(False)
    return ends


@dataclass
class Prepared:
    """A renewal of one pool, checked: the master's contexts for its new certificates are
    made; nothing serves them until `deliver`."""

    pool: Pool
    listeners: dict[str, ListenerTls]
    contexts: dict[str, list[Any]] = field(default_factory=dict)  # by address


def certificate_changes(old: Pool, new: Pool) -> dict[str, ListenerTls] | None:
    """What ``new``'s listeners serve that ``old``'s do not, when that is certificates only
    (by address; empty: nothing differs); None when the pools differ otherwise."""
    if not old.same_but_tls(new) or old.served.keys() != new.served.keys():
        return None
    changes = {}
    for address, served in new.served.items():
        before = old.served[address]
        if before.recipe != served.recipe:
            return None
        if before.certificates != served.certificates:
            changes[address] = served
    return changes


def carried(
    current: Generation, gen: Generation, restart: Collection[str] | None, renew: bool
) -> tuple[dict[str, dict[str, ListenerTls]], bool]:
    """The pools of ``gen`` that the running ones serve as they are but for their
    certificates (by name, their new certificates by address), and whether nothing differs
    at all (the same document, every pool the same).

    With ``restart`` None (a reload), they are a renewal only if ``renew`` allows one, the
    document is unchanged and some certificate is new: then every pool is carried (one whose
    certificates are the same, as it is); else none is. Otherwise (the control API), the
    pools that ``restart`` does not name and that differ from the running ones by their
    certificates only.
    """
    found: dict[str, dict[str, ListenerTls]] = {}
    others = False  # a pool that differs by more than its certificates
    for name, pool in gen.pools.items():
        old = current.pools.get(name)
        changes = None if old is None else certificate_changes(old, pool)
        if changes is None:
            others = True
        elif restart is None or name not in restart:
            found[name] = changes
    same = gen.doc == current.doc and not others and gen.pools.keys() == current.pools.keys()
    unchanged = same and not any(found.values())
    if restart is None and not (renew and same and not unchanged):
        return {}, unchanged
    return found, unchanged


def prepare(current: Generation, carried: dict[str, dict[str, ListenerTls]]) -> list[Prepared]:
    """The master's contexts for the carried pools' new certificates (each listener's made
    once: pools that share a listener share its renewal). Raises `TlsError`."""
    from corral.tls.context import certificate_contexts

    made: dict[str, list[Any]] = {}
    prepared = []
    for name, changes in carried.items():
        if not changes:
            continue
        renewal = Prepared(current.pools[name], changes)
        for address, served in changes.items():
            if address not in made:
                made[address] = certificate_contexts(served)
            renewal.contexts[address] = made[address]
        prepared.append(renewal)
    return prepared


def deliver(
    prepared: Iterable[Prepared],
    number: int,
    workers: Iterable[WorkerProcess],
    log: logging.Logger,
) -> list[WorkerProcess]:
    """Serve the new certificates: in the master's session contexts, and in every running
    worker of each renewed pool (sent as renewal ``number``); the workers it was sent to."""
    from corral.tls.context import renew
    from corral.tls.served import Renewal

    workers = list(workers)
    told = []
    for renewal in prepared:
        pool = renewal.pool
        for address, served in renewal.listeners.items():
            renew(pool.tls[address], served, renewal.contexts[address])
        pool.served.update(renewal.listeners)
        message = Renewal(number, renewal.listeners).encode()
        sent = [w for w in workers if w.pool is pool and _send(w, message, log)]
        told += sent
        log.info(
            "TLS: new certificates on %s, served by %s's %d running worker(s) from now on "
            "(no new worker)",
            ", ".join(renewal.listeners),
            pool.name,
            len(sent),
        )
    return told


def _send(worker: WorkerProcess, message: bytes, log: logging.Logger) -> bool:
    sock = worker.orders
    if sock is None or sock.fileno() < 0:
        return False
    try:
        sock.send(message)
    except (BlockingIOError, OSError) as exc:  # its end is closed (it exits), or full
        log.warning(
            "TLS: worker %d (pid %d) did not get the new certificates: %s",
            worker.slot,
            worker.pid,
            exc,
        )
        return False
    return True


async def acted_on(
    workers: Mapping[int, WorkerProcess], told: Iterable[WorkerProcess], number: int
) -> None:
    """Wait until every worker ``told`` of renewal ``number`` that serves (ready, not
    retiring) said ``renewed`` for it, or exited, at most `ACK_WAIT`. (One still starting
    reads its orders before it accepts a connection.)"""
    told = list(told)
    deadline = time.monotonic() + ACK_WAIT
    while time.monotonic() < deadline:
        if not any(
            worker.pid in workers
            and worker.ready
            and not worker.retiring
            and worker.renewed < number
            for worker in told
        ):
            return
        await asyncio.sleep(0.01)

"""Reload and apply: a whole new generation beside the running one, or none.

A reload (HUP, a touched file, ``--reload``) and an apply (the control API's document, an
emperor's vassal file) take one path: build the next `Generation` from the document (bind
the new listeners, the hand-off sockets, preload), spawn the workers of the pools it does
not carry over, and commit it once every one of them is ready: the master retires the old
workers then. If one exits before, the new generation is rolled back and the running one
serves on; nothing retries a failed reload by itself. One change is under way at a time: a
reload asked for meanwhile runs after it (the latest one counts), an apply waits for it
(`Reloads.apply` holds one lock). The supervisor (supervisor.py) spawns and retires; this
module decides what, and changes the generations and the sockets they share (`Generations`);
what a commit means to the rest of the master is its ``committed`` callback.
A change that finds new TLS certificates and nothing else is a renewal instead: the pools
are carried and their running workers serve the new certificates (master/renewal.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import traceback
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Literal

from corral.apps.loader import (
    application_traceback,
    describe_load_failure,
    load_entry_points,
    load_failure,
)
from corral.config import Document
from corral.config.app_types import runs_in_workers
from corral.config.listener_tls import settings_files
from corral.config.unserved import unserved
from corral.hooks import Hooks
from corral.master import renewal, systemd
from corral.master.events import Events
from corral.master.generation import (
    ApplyFailed,
    Generation,
    Generations,
    Origin,
    Pool,
    scheme_of,
    uses_routes,
)
from corral.master.listeners import (
    ListenError,
    bind_all,
    bind_handoff,
    close_all,
    describe,
    handoff_address,
)
from corral.master.supervisor import Supervisor
from corral.master.watch import ConfigContent

Renew = Literal["never", "allowed", "only"]  # see Reloads.reload

if TYPE_CHECKING:
    from corral.config.document import EntryPoint

# How long a control API answer waits for the retired workers to stop accepting (a worker
# whose loop the application blocks acts on TERM only when the call returns).
STOP_ACCEPTING_WAIT = 2.0


class PreloadFailed(Exception):
    """A preloaded application raised while the master imported it (its ``__cause__``): told
    apart from a configuration's ValueError, which the application may raise too."""

    def __init__(self, name: str, entry_points: tuple[EntryPoint, ...]) -> None:
        super().__init__(name)
        self.name = name  # the pool's
        self.entry_points = entry_points


class Reloads:
    """The changes of one master's generations (`Generations`: the current one, the pending
    one while a change is under way, and the listener and hand-off sockets they share)."""

    def __init__(
        self,
        generations: Generations,
        supervisor: Supervisor,
        hooks: Hooks,
        events: Events,
        log: logging.Logger,
        *,
        origin: Origin | None,
        certificates: Any,
        committed: Callable[[Generation, Generation], None],
        notify: Callable[..., None],
    ) -> None:
        self.generations = generations
        self._supervisor = supervisor
        self._hooks = hooks
        self._events = events
        self.log = log
        self._origin = origin  # where a reload reads the configuration again
        # the control API's certificate store (`corral.tls.store`), None without the API
        self._certificates = certificates
        self._committed = committed  # what a commit means to the rest of the master
        self._notify = notify  # systemd's, when this master speaks for the service
        self.persist: Callable[[Document], None] | None = None  # saves an applied document
        # the last number given: a generation that was rolled back keeps its number, so that
        # the log never names two generations alike
        self.number = generations.current.number
        # a reload asked for while a change is under way (its why and renew)
        self.queued: tuple[str, Renew] | None = None
        # a renewal checked for the pending generation, served at its commit (renewal.py),
        # and the last renewal's number and the workers it was sent to
        self.renewing: list[renewal.Prepared] = []
        self.renewals = 0
        self.told: list[Any] = []
        self._lock = asyncio.Lock()
        config_file = origin.config_file if origin is not None else None
        # the config file's bytes as last read, for `watch_config`
        self.config_content = (
            ConfigContent(os.path.join(origin.cwd, config_file))
            if origin is not None and config_file is not None
            else None
        )

    def reload(self, why: str, renew: Renew = "never") -> None:
        """Start a new generation from the configuration as it is now; see the module doc.
        ``renew``: whether new certificates and nothing else are served by the running
        workers instead (master/renewal.py): ``never`` (a touched ``touch_reload`` file,
        ``--reload``: new workers, for new code), ``allowed`` (HUP), ``only`` (a touched
        certificate file: nothing at all changed is nothing to do)."""
        if self._supervisor.stopping:
            return
        if self.generations.pending is not None:
            self.queued = (why, renew)  # after the one under way, so the latest change counts
            return
        with contextlib.suppress(ApplyFailed):  # logged
            self._start(self._reread, "reloading", why, restart=None, renew=renew)

    def look_at_config(self) -> None:
        """``watch_config``: a config file whose bytes changed reloads, as a HUP does."""
        content = self.config_content
        if (
            content is not None
            and self.generations.current.settings.watch_config
            and content.changed()
        ):
            self.reload(f"{content.path} changed", "allowed")

    def touched(self, path: str) -> None:
        """A watched file changed: a certificate's renews, a ``touch_reload`` one reloads."""
        tls = path in settings_files(self.generations.current.settings)
        self.reload(f"{path} was touched", "only" if tls else "never")

    def _reread(self) -> Document:
        """The document a reload starts from: the command line and file read again, or the
        running document when it is its own source."""
        origin = self._origin
        if origin is None or origin.reread is None:
            return self.generations.current.doc
        if self.config_content is not None:
            self.config_content.read()
        here = os.getcwd()
        os.chdir(origin.cwd)  # the command line's relative paths (-c FILE) start here
        try:
            return origin.reread()
        finally:
            os.chdir(here)

    async def apply(
        self,
        change: Document | Callable[[Document], Document],
        why: str,
        *,
        restart: Collection[str] = (),
    ) -> None:
        """Run the document ``change`` gives (a document, or a function of the running one);
        return once it serves, or raise `ApplyFailed` once it was rolled back.

        Changes are serialised: ``change`` is called with the running document only when no
        other change is under way, and what it raises goes to the caller unchanged. Only the
        applications the change touches get new workers, and those named in ``restart``; a
        document equal to the running one with nothing to restart is done at once. When it
        serves, ``persist`` (if set) saves it, still in turn.
        """
        async with self._lock:
            while self.generations.pending is not None:
                assert self.generations.pending.settled is not None
                await asyncio.shield(self.generations.pending.settled)
            if self._supervisor.stopping:
                raise ApplyFailed("the server is stopping", 503)
            doc = change(self.generations.current.doc) if callable(change) else change
            if doc == self.generations.current.doc and not restart:
                return
            said = unserved(self.generations.current.doc)  # at start, or by an earlier change
            for line in unserved(doc):
                if line not in said:
                    self.log.warning("%s", line)
            gen = self._start(lambda: doc, "reconfiguring", why, restart=restart)
            assert gen.settled is not None
            failure = await asyncio.shield(gen.settled)
            if failure is not None:
                raise ApplyFailed(failure)
            await self._retired_stop_accepting()
            await renewal.acted_on(self._supervisor.workers, self.told, self.renewals)
            if self.persist is not None:
                try:
                    self.persist(doc)
                except OSError as exc:
                    self.log.error("the new configuration could not be saved: %s", exc)
                    raise ApplyFailed(
                        f"the new configuration serves, but could not be saved: {exc}"
                    ) from None

    async def _retired_stop_accepting(self) -> None:
        """Wait until every retiring worker said it stopped accepting (``closed``) or exited,
        at most `STOP_ACCEPTING_WAIT`: between its TERM and its drain an old worker still
        accepts, and a connection opened after the API's answer would meet the old
        configuration (an old route, an old application's code)."""
        deadline = time.monotonic() + STOP_ACCEPTING_WAIT
        while any(
            w.retiring and w.ready and not w.stopped_accepting
            for w in self._supervisor.workers.values()
        ):
            self._supervisor.accepting_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._supervisor.accepting_changed.wait(),
                    max(0.0, deadline - time.monotonic()),
                )
            if time.monotonic() >= deadline:
                return

    def _start(
        self,
        make_doc: Callable[[], Document],
        doing: str,
        why: str,
        restart: Collection[str] | None,
        renew: Renew = "never",
    ) -> Generation:
        """Bind, resolve and spawn the generation ``make_doc()`` describes; it becomes
        ``pending`` (or current at once, when it has no new worker to wait for). A pool that
        would start as it runs now is carried over, unless ``restart`` names it (None: every
        pool restarts, as a reload does). When that fails before anything is spawned (a bad
        file, an address in use, a preload that raises), the failure is logged and raised as
        `ApplyFailed`; the running workers go on."""
        self._notify("RELOADING=1", systemd.monotonic_usec(), f"STATUS=reloading ({why})")
        self.log.info("%s (%s)", doing, why)
        failed = "reload failed" if doing == "reloading" else "reconfiguration failed"
        try:
            gen = self._next(make_doc(), restart, renew)
        except PreloadFailed as exc:  # before ValueError: the application may raise one
            loading = exc.__cause__
            assert loading is not None
            shown = application_traceback(loading)
            if shown is not None:
                self.log.error("%s\n%s", load_failure(exc.name, exc.entry_points), shown)
            why = load_failure(exc.name, exc.entry_points, describe_load_failure(loading))
            self.log.error("%s: %s; the running workers keep serving", failed, why)
            self._notify_ready()
            raise ApplyFailed(why) from None
        except (ValueError, ListenError) as exc:  # ConfigError is a ValueError
            self.log.error("%s: %s; the running workers keep serving", failed, exc)
            self._notify_ready()
            raise ApplyFailed(str(exc)) from None
        except Exception as exc:  # corral's own mistake: all of its traceback
            self.log.error(
                "%s: %s; the running workers keep serving\n%s",
                failed,
                exc,
                traceback.format_exc().rstrip(),
            )
            self._notify_ready()
            raise ApplyFailed(f"{type(exc).__name__}: {exc}") from None
        if gen is None:  # a certificate file touched, its bytes the same
            self.log.info("the same certificates: nothing to do")
            self._notify_ready()
            return self.generations.current
        gen.settled = asyncio.get_running_loop().create_future()
        self.generations.pending = gen
        self._hooks.call("on_reload")
        fresh = [gen.pools[name] for name in gen.fresh]
        for pool in fresh:
            for slot in range(pool.workers):
                self._supervisor.spawn(gen, pool, slot)
        if not any(pool.workers for pool in fresh):  # nothing to wait for
            self.commit()
        return gen

    def _next(
        self, doc: Document, restart: Collection[str] | None, renew: Renew
    ) -> Generation | None:
        current = self.generations.current
        sockets: dict[str, socket.socket] = {}
        new = [address for address in doc.listeners if address not in self.generations.sockets]
        bound = bind_all(
            new,
            backlog=doc.settings.backlog,
            unix_mode=doc.settings.unix_socket_mode,
            reuse_port=doc.settings.reuse_port,
        )
        for address in doc.listeners:
            sockets[address] = bound.get(address) or self.generations.sockets[address]
        self.generations.sockets.update(bound)
        for address, sock in bound.items():
            self.log.info("listening on %s (%s)", describe(sock, scheme_of(doc, address)), address)
        try:
            handoffs = self.bind_handoffs(doc)
            gen = Generation(self.number + 1, doc, sockets, handoffs, self.certificates())
            gen.restart = restart
            carried, unchanged = renewal.carried(current, gen, restart, renew != "never")
            if unchanged and renew == "only":
                self.close_unused(set(current.sockets))
                return None
            prepared = renewal.prepare(current, carried)  # TlsError: nothing changed yet
            for name, pool in gen.pools.items():
                old = current.pools.get(name)
                if name in carried:  # its workers serve on, with new certificates if any
                    gen.pools[name] = current.pools[name]
                    gen.fresh.discard(name)
                    continue
                if pool.application.preload:
                    pool.loaded_app = self._preload(pool, old)
                kept = restart is not None and name not in restart
                if kept and old is not None and old.same_workers(pool):
                    gen.pools[name] = old  # its workers serve on
                    gen.fresh.discard(name)
        except BaseException:  # ValueError (a user), or what a preloaded application raised
            self.close_unused(set(current.sockets))
            raise
        self.number = gen.number
        self.renewing = prepared
        return gen

    def certificates(self) -> Any:
        """The control API's certificate store (`corral.tls.store`), None without the API."""
        return self._certificates

    def bind_handoffs(self, doc: Document) -> dict[str, tuple[str, socket.socket]]:
        """With routes, a hand-off socket per application of ``doc``; those of applications
        already running are kept (their workers accept on them)."""
        if not uses_routes(doc):
            return {}
        # (none for an external application: its requests are proxied, generation.py; nor for
        # a "php" one: php-fpm's, over FastCGI)
        names = [name for name, app in doc.applications.items() if runs_in_workers(app)]
        for name in names:
            if name not in self.generations.handoffs:
                address = handoff_address(os.getpid(), name)
                self.generations.handoffs[name] = (
                    address,
                    bind_handoff(address, doc.settings.backlog),
                )
        return {name: self.generations.handoffs[name] for name in names}

    def _preload(self, pool: Pool, old: Pool | None) -> Any:
        """The application object for a preloaded pool: its predecessor's if it imports the
        same name (the master cannot forget a module: restart it for new code)."""
        app = pool.application
        names = (app.entry_points, app.factory)
        old_names = (old.application.entry_points, old.application.factory) if old else None
        if old is not None and old.loaded_app is not None and names == old_names:
            self.log.info("the preloaded application is kept: restart to load new code")
            return old.loaded_app
        try:
            return load_entry_points(app.entry_points, app.factory)
        except Exception as exc:
            raise PreloadFailed(pool.name, app.entry_points) from exc

    def commit(self) -> None:
        gen = self.generations.pending
        assert gen is not None
        old = self.generations.current
        self.generations.pending = None
        self.generations.current = gen
        self._committed(old, gen)
        if self.renewing:
            self.renewals += 1
            self.told = renewal.deliver(
                self.renewing, self.renewals, self._supervisor.workers.values(), self.log
            )
            self.renewing = []
        self.close_unused(set(gen.sockets))
        carried = sorted(set(gen.pools) - gen.fresh)
        self.log.info(
            "reload complete: generation %d serving with %d worker(s)%s",
            gen.number,
            self._supervisor.num_workers,
            f" ({', '.join(carried)} carried over)" if carried else "",
        )
        self._events.record("reload", f"generation {gen.number} serving")
        if gen.settled is not None and not gen.settled.done():
            gen.settled.set_result(None)
        self._after()

    def rollback(self, why: str, cause: str | None = None) -> None:
        gen = self.generations.pending
        assert gen is not None
        self.generations.pending = None
        self.renewing = []
        for worker in list(self._supervisor.workers.values()):
            if worker.generation is gen:
                self._supervisor.retire(worker)
        self.close_unused(set(self.generations.current.sockets))
        told = f"{why}: {cause}" if cause else why  # the worker sent the cause, and logged no more
        self.log.error(
            "reload failed: %s; generation %d keeps serving", told, self.generations.current.number
        )
        self._events.record(
            "rollback", f"{why}; generation {self.generations.current.number} serves"
        )
        if gen.settled is not None and not gen.settled.done():
            gen.settled.set_result(told)
        self._after()

    def _notify_ready(self) -> None:
        self._notify("READY=1", self._supervisor.status())

    def _after(self) -> None:
        queued, self.queued = self.queued, None
        if queued is not None:
            self.reload(*queued)
        else:
            self._notify_ready()

    def close_unused(self, keep: set[str]) -> None:
        """Close the master's listeners outside ``keep`` (and the pending generation's), and
        the hand-off sockets no pool of the current or pending generation holds."""
        if self.generations.pending is not None:
            keep |= set(self.generations.pending.sockets)
        unused = {a: s for a, s in self.generations.sockets.items() if a not in keep}
        for address in unused:
            del self.generations.sockets[address]
        close_all(unused)
        generations = (
            [self.generations.current]
            if self.generations.pending is None
            else [self.generations.current, self.generations.pending]
        )
        held = {id(p.handoff) for gen in generations for p in gen.pools.values()}
        for name, (_, sock) in list(self.generations.handoffs.items()):
            if id(sock) not in held:
                del self.generations.handoffs[name]
                sock.close()

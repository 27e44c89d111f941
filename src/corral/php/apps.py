"""What a worker knows of each ``"php"`` application of its document: the scripts of each
target (`corral.php.site.Site`) and its connections to each address its php-fpm has listened
on (`corral.fastcgi.client.FastCgiPool`, made at the first request there, on the worker's
loop). The address is the one the master's board says is ready (`corral.external.board`): it
changes when a change to the application starts another php-fpm, and the connections to the
one it replaced are then let go as a draining worker's are.

A worker opens at most ``fastcgi_connections`` connections to one php-fpm, and no more than
its share of php-fpm's children: a connection kept open holds a child, and the workers of
every pool may reach the same php-fpm (children // workers, at least 1). With fewer children
than workers, connections are not kept (``FCGI_KEEP_CONN`` not asked): each request's
connection closes after it, freeing its child for another worker's.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from corral.config.app_types import pool_size, runs_in_workers
from corral.config.php_keys import is_php
from corral.external.board import board
from corral.fastcgi.client import FastCgiPool
from corral.php.site import Site

__all__ = ["PhpApplication", "php_applications"]


class PhpApplication:
    """One php application as a worker reaches it; `at` gives it at one address of its
    php-fpm (what a request's `corral.actions.fastcgi.FastCgiReply` uses)."""

    def __init__(
        self,
        name: str,
        sites: tuple[Site, ...],
        address: str | None = None,
        *,
        limit: int,
        keep: bool = True,
        recycled: bool = False,
        connect_timeout: float,
        read_timeout: float,
        head_limit: int,
    ) -> None:
        self.name = name
        self.sites = sites  # by target position (one without targets)
        self.address = address
        self.limit = limit  # connections a worker opens to its php-fpm
        self.keep = keep  # ... and keeps open between requests (FCGI_KEEP_CONN)
        self.recycled = recycled  # its children end after a number of requests (limits)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.head_limit = head_limit  # bytes of the CGI head php may send (answer.HeadReader)
        self.pool: FastCgiPool | None = None
        self._at: dict[str, PhpApplication] = {}  # by address (this one's: address None)

    def at(self, address: str) -> PhpApplication:
        """This application with its connections to php-fpm at ``address``."""
        found = self._at.get(address)
        if found is None:
            ready = board().ready(self.name)
            for old in [old for old in self._at if old not in ready]:
                self._at.pop(old).drain()  # a replaced php-fpm's: none kept from now on
            found = self._at[address] = PhpApplication(
                self.name,
                self.sites,
                address,
                limit=self.limit,
                keep=self.keep,
                recycled=self.recycled,
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
                head_limit=self.head_limit,
            )
        return found

    def connections(self, loop: Any) -> FastCgiPool:
        pool = self.pool
        if pool is None:
            assert self.address is not None  # (one of `at`'s)
            pool = self.pool = FastCgiPool(
                loop,
                self.address,
                limit=self.limit,
                connect_timeout=self.connect_timeout,
                keep=self.keep,
                recycled=self.recycled,
                # a read timeout's 504 comes within a quarter of it after, a second at most
                sweep=min(1.0, self.read_timeout / 4),
            )
        return pool

    def drain(self) -> None:
        """The worker drains: no connection kept from now on, the idle ones closed."""
        self.keep = False
        if self.pool is not None:
            self.pool.drain()
        for one in self._at.values():
            one.drain()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        for one in self._at.values():
            one.close()


def php_applications(doc: Any) -> dict[str, PhpApplication]:
    """Each php application of ``doc`` by name, as its workers reach it."""
    found: dict[str, PhpApplication] = {}
    settings = doc.settings
    static = settings.static  # the shares' cache_valid: what a path resolved to is trusted
    valid = 1.0 if static is None else static.cache_valid
    front = sum(pool_size(app) for app in doc.applications.values() if runs_in_workers(app)) or 1
    for name, app in doc.applications.items():
        if not is_php(app):
            continue
        if app.targets is UNSET:
            sites: tuple[Site, ...] = (
                Site(app.root, _given(app.script), _given(app.index), valid),
            )
        else:
            sites = tuple(
                Site(t.root, _given(t.script), _given(t.index), valid) for t in app.targets.values()
            )
        found[name] = PhpApplication(
            name,
            sites,
            limit=min(settings.fastcgi_connections, max(1, pool_size(app) // front)),
            # a kept connection holds a child: with fewer children than the workers that
            # reach them, a worker's kept one could wait for ever behind the others'
            keep=pool_size(app) >= front,
            recycled=bool(app.max_requests),
            connect_timeout=settings.fastcgi_connect_timeout,
            read_timeout=settings.fastcgi_read_timeout,
            head_limit=settings.fastcgi_head_size,
        )
    return found


def _given(value: Any) -> Any:
    return None if value is UNSET else value

"""The worker's side of a spawn: in the application's own interpreter, the pool rebuilt from the
`Brief` the master wrote, then the worker run as a forked one is (`corral.master.child`).

What the fork would have shared is made again here from the document, as the master made it:
the generation's layout (`Generation`: routes compiled, TLS contexts, which listener is whose),
with the master's sockets (taken by descriptor number) in place of new ones. The worker then
sets up exactly as a forked worker does after its fork (`worker_main`: title, access log,
standard streams, user, `WorkerSpec`). Errors on the way are one line and `EXIT_APP_LOAD`, as
in `child.run`.

Not carried (said in docs/polyglot.md): the server hooks of a Gunicorn-style config file, which
live in the master's interpreter, do not run in a spawned worker.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import traceback

from corral.config import Document
from corral.config.document import validate_document
from corral.external.board import board
from corral.hooks import Hooks
from corral.interpreter import brief as briefs
from corral.master.child import apply_environment, worker_main
from corral.master.fork import Fork
from corral.master.generation import Generation, Pool
from corral.observe.errorlog import setup_logging
from corral.observe.refusals import Tally
from corral.server.acceptor import LoadBoard
from corral.server.worker import EXIT_APP_LOAD
from corral.wire import Failed, encode

__all__ = ["main"]


def main(brief_fd: int, beat_fd: int) -> int:
    """The spawned worker's whole life, from the brief in ``brief_fd``: its exit code. What
    stops it before its loop is told to the master on the heartbeat pipe ``beat_fd``, as an
    application that cannot load (`Failed`): the master's one line says it."""
    try:
        brief = briefs.read(brief_fd)
        doc = validate_document(brief.document)
        log = setup_logging(doc.settings)
        pool = rebuilt_pool(brief, doc)
        os.chdir(brief.start_cwd)  # (the fork's child entered it: this interpreter's sys.path)
        apply_environment(pool.application)
        stacks = socket.socket(fileno=brief.stacks_fd)
        orders = socket.socket(fileno=brief.orders_fd)
        orders.setblocking(False)
        fork = Fork(
            pool=pool,
            slot=brief.slot,
            seat=brief.seat,
            beat_fd=brief.beat_fd,
            stacks=stacks,
            orders=orders,
            max_requests=brief.max_requests,
            hooks=Hooks(),
            latency_histogram=brief.latency_histogram,
            log=log,
        )
        return worker_main(fork)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except ImportError as exc:  # corral's or the loop's own (the application's says itself)
        return _failed(beat_fd, f"a worker could not import {exc.name or 'a module'}: {exc}")
    except ValueError as exc:  # the document or its TLS files, as this interpreter reads them
        return _failed(beat_fd, f"a worker could not rebuild its pool: {exc}")
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()


def _failed(beat_fd: int, cause: str) -> int:
    with contextlib.suppress(OSError):
        os.write(beat_fd, encode(Failed(cause)))
    return EXIT_APP_LOAD


def rebuilt_pool(brief: briefs.Brief, doc: Document) -> Pool:
    """The pool the master forked from, laid out again on the sockets it kept open, its
    shared tables the master's."""
    if brief.external_board is not None:
        board(brief.external_board)  # before anything asks for it
    sockets = {address: socket.socket(fileno=fd) for address, fd in brief.listeners.items()}
    pool = Generation(0, doc, sockets).pools[brief.application]
    pool.sockets = sockets  # (the generation gave it these, by the same routes)
    if brief.handoff_fd is not None:
        pool.handoff = socket.socket(fileno=brief.handoff_fd)
    pool.handoff_addresses = dict(brief.handoff_addresses)
    shared_tables(pool, brief)
    return pool


def shared_tables(pool: Pool, brief: briefs.Brief) -> None:
    """Each table the generation just made here (the same shape as the master's, from the same
    document) replaced by the master's, mapped from its inherited memfd; the new one closed."""
    for address, fd in brief.tallies.items():
        os.close(pool.tallies[address].fd)
        pool.tallies = {**pool.tallies, address: Tally(fd)}
    if brief.load_board is not None and pool.board is not None:
        os.close(pool.board.fd)
        pool.board = LoadBoard(pool.board.slots, brief.load_board)

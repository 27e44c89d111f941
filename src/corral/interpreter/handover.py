"""The master's side of a spawned worker: in the child it forked, the exec of the application's
interpreter (`corral.interpreter.choice.foreign_python`) on corral's worker entry point.

Called where a forked worker would run (`corral.master.child.run`, once the child closed what
is the master's and entered the application's environment, whose variables and directory the
exec keeps). Every descriptor Python opened is closed by the exec (PEP 446) but those the
`Brief` names, made inheritable here. The entry point is a few lines given with ``-c`` rather
than ``-m``: when the virtualenv has no corral (or another version), it says so in one line and
exits with `EXIT_APP_LOAD` (the master stops at start-up, as for an application that cannot be
imported: a respawn would fail the same way), instead of a traceback from ``runpy``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from corral import __version__
from corral.config.document import document_builtins
from corral.external.board import board
from corral.interpreter import brief as briefs
from corral.wire import Failed, encode

if TYPE_CHECKING:
    from corral.master.fork import Fork

__all__ = ["BOOT", "exec_worker"]

EXIT_APP_LOAD = 3  # corral.server.worker's (not imported: the child needs none of it)

# sys.argv: "-c", the brief's descriptor, the heartbeat pipe's, the master's corral version.
# A failure is said to the master as a worker's failed import is (`corral.wire.Failed`'s line,
# written here by hand: corral is what could not be imported), which logs it as the one line
# of an application that cannot load.
BOOT = """\
import os, sys
brief, beat, version = sys.argv[1:4]
def failed(cause):
    line = "failed " + " ".join(cause.split())[:1000] + "\\n"
    os.write(int(beat), line.encode("utf-8", "replace"))
    sys.exit(3)
try:
    import corral
    from corral.interpreter.spawned import main
except Exception as exc:
    failed(
        f"{sys.executable} (its home's Python) cannot import corral ({exc}): install "
        f"corral {version} in {sys.prefix}"
    )
if corral.__version__ != version:
    failed(
        f"{sys.executable} (its home's Python) has corral {corral.__version__}, the master "
        f"{version}: install corral {version} in {sys.prefix}"
    )
sys.exit(main(int(brief), int(beat)))
"""


def exec_worker(fork: Fork, python: str, start_cwd: str) -> int:
    """Become the worker ``fork`` describes, run by ``python``. Returns only when the exec
    fails: `EXIT_APP_LOAD`, the master told why."""
    pool = fork.pool
    brief = briefs.Brief(
        document=document_builtins(pool.doc),
        application=pool.name,
        slot=fork.slot,
        seat=fork.seat,
        max_requests=fork.max_requests,
        latency_histogram=fork.latency_histogram,
        start_cwd=start_cwd,
        beat_fd=fork.beat_fd,
        stacks_fd=fork.stacks.fileno(),
        orders_fd=fork.orders.fileno(),
        listeners={address: sock.fileno() for address, sock in pool.sockets.items()},
        handoff_fd=None if pool.handoff is None else pool.handoff.fileno(),
        handoff_addresses=pool.handoff_addresses,
        tallies={a: tally.fd for a, tally in pool.tallies.items() if a in pool.sockets},
        load_board=None if pool.board is None else pool.board.fd,
        external_board=board().fd,
    )
    for fd in brief.descriptors():
        os.set_inheritable(fd, True)
    fd = briefs.write(brief)
    # -P: not the working directory first on sys.path (a "corral" there would be imported
    # instead); the worker puts it where a forked worker has it (child.apply_environment)
    argv = [python, "-P", "-c", BOOT, str(fd), str(fork.beat_fd), __version__]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(python, argv)
    except OSError as exc:  # said as a failed import is: the master's one line
        cause = f"cannot run {python} (its home's Python): {exc.strerror or exc}"
        os.write(fork.beat_fd, encode(Failed(cause)))
    return EXIT_APP_LOAD

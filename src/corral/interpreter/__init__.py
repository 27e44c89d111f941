"""Applications whose `home` virtualenv was made by another Python than the master's.

Such an application cannot run in a forked worker (the fork runs the master's interpreter,
and the virtualenv's compiled packages are built for its own), so its workers are *spawned*:
the master forks as for any worker, closes what is its own there, then executes the
virtualenv's ``bin/python`` on a corral worker entry point (`corral.interpreter.spawned`),
keeping open the descriptors the worker needs and passing their numbers in a `Brief`. The
worker rebuilds what the forked one would have found in memory (the pool's routes, TLS
contexts, the shared tables) from the document and those descriptors; from then on it is a
worker like any other (heartbeat, stacks, renewals, restart, stop, timeouts).

- ``choice.py``: which interpreter an application needs (`foreign_python`);
- ``brief.py``: what the master passes (`Brief`, made from a `Fork`, written to a memfd);
- ``handover.py``: the master's side, in the forked child: the exec;
- ``spawned.py``: the worker's side, in the new interpreter: the pool rebuilt, the worker run.

corral must be installed in the virtualenv (the same version as the master's): msgspec,
httptools and uvloop are compiled for each interpreter, so the master's cannot serve there.
When it is not, the worker says so in one line and exits as an application that cannot be
imported does.
"""

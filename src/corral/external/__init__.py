"""Pools of processes that are not corral workers: any command, supervised by the master.

NGINX Unit's ``"type": "external"`` applications (and, through the same seam, the other
languages' standard servers) run as a pool the master starts, hands a socket, watches and
stops, as it does its workers, but without a heartbeat: a process is ready once it answers
(``probe.py``), and what it serves is reached through the proxy.

The seam (``kinds.py``): a `Kind` says, for one application of its ``type``, how its
processes listen (``fd``: the socket corral binds, handed over as systemd does; ``port`` or
``unix``: an address corral picks and the program binds), the `Command` one process runs at a
given `Place` (its argv, environment, directory, user, group, output files), and how its
readiness is asked (an HTTP ``GET`` or a connection). Everything else (the fork and exec with
``LISTEN_FDS``, restarts with the crash backoff, the startup timeout, the graceful stop, the
status, events and metrics) is ``supervisor.py``'s and ``spawn.py``'s, written once.
"""

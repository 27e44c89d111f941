"""`Fork`: what a new worker is started with, in the child after the fork (master/child.py)
or, spawned in another interpreter, through its brief (corral/interpreter/). Its own module so
that both read it without importing each other."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.master.generation import Pool


@dataclass(frozen=True)
class Fork:
    """What a new worker is started with."""

    pool: Pool
    slot: int
    seat: int  # its place in the connection counts (master/connlimits.py)
    beat_fd: int  # the write end of its heartbeat pipe
    stacks: socket.socket  # its end of the socket the master asks for its stacks on
    orders: socket.socket  # its end of the socket the master sends renewals on (renewal.py)
    max_requests: int
    hooks: Any  # the master's `corral.hooks.Hooks`
    latency_histogram: bool
    log: logging.Logger

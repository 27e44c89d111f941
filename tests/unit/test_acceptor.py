"""The accept rule of a pool of threaded workers (acceptor.py), on a real shared board."""

from __future__ import annotations

import os

from corral.server.acceptor import BATCH, AcceptGate, LoadBoard, WatchedConnections

SHARE = 4


def gate_with(board: LoadBoard, slot: int, held: int) -> AcceptGate:
    connections = WatchedConnections()
    gate = AcceptGate(board, slot, SHARE, connections)
    for _ in range(held):
        connections.add(object())
    return gate


def test_below_its_share_a_worker_takes_what_fills_it_without_looking():
    board = LoadBoard(2)
    board.publish(1, 100)
    assert gate_with(board, 0, 1).room(stalled=False) == SHARE - 1


def test_beyond_its_share_it_leaves_connections_to_a_sibling_with_idle_threads():
    board = LoadBoard(2)
    gate = gate_with(board, 0, SHARE)
    board.publish(1, SHARE - 1)
    assert gate.room(stalled=False) == 0
    # ... unless that sibling left them waiting too long (stopped, or its loop blocked)
    assert gate.room(stalled=True) == BATCH


def test_once_every_worker_is_full_they_queue_evenly():
    board = LoadBoard(3)
    gate = gate_with(board, 0, 6)
    board.publish(1, 5)
    board.publish(2, 9)
    assert gate.room(stalled=False) == 5 + SHARE - 6  # up to the least loaded plus a share
    board.publish(1, 12)
    assert gate.room(stalled=False) == 9 + SHARE - 6


def test_absent_siblings_are_not_waited_for_and_a_lone_worker_takes_all():
    board = LoadBoard(2)
    gate = gate_with(board, 0, SHARE)
    assert board.least_besides(0) is None
    assert gate.room(stalled=False) == BATCH
    board.publish(1, 0)
    board.leave(1)  # the master, when that worker exited
    assert gate.room(stalled=False) == BATCH


def test_the_gate_publishes_its_count_and_leaves_the_board_when_it_closes():
    board = LoadBoard(2)
    gate = gate_with(board, 1, 3)
    assert board.least_besides(0) == 3
    gate.connections.discard(next(iter(gate.connections)))
    assert board.least_besides(0) == 2
    gate.close()
    assert board.least_besides(0) is None
    gate.connections.add(object())  # a drain still closes and accepts nothing: no count
    assert board.least_besides(0) is None


def test_a_connection_being_set_up_counts_once_until_it_is_made_or_fails():
    # accepted, then made (its connection_made adds it to the set): counted twice in
    # between, a worker looked busier to its siblings than it was, and each took more than
    # its turn of a burst
    board = LoadBoard(2)
    gate = gate_with(board, 1, 0)
    gate.pending += 2  # as BalancedAcceptor does for each socket it accepts
    gate.publish()
    assert board.least_besides(0) == 2
    gate.connections.add(object())
    assert (gate.held(), board.least_besides(0)) == (2, 2)
    gate._set_up()  # the other one's client went away before its transport was set up
    assert (gate.held(), board.least_besides(0)) == (1, 1)


def test_the_board_is_shared_with_a_forked_worker():
    board = LoadBoard(2)
    pid = os.fork()
    if pid == 0:  # the child writes its slot, as a worker does
        board.publish(1, 7)
        os._exit(0)
    os.waitpid(pid, 0)
    assert board.least_besides(0) == 7

"""control/fleet.py's fan-out with a plain function as the request to one instance, and
``corral ctl``'s refusals of what several sockets cannot do (before any socket is opened).
The same against real servers: tests/integration/test_ctl_fleet.py."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from corral.control import ctl, fleet

ADDRESSES = ["unix:/a.sock", "b:1", "c:2"]


def test_at_once_the_outcomes_keep_the_order_of_the_addresses():
    """The first address answers last; every request is under way before any answers."""
    all_asked = threading.Barrier(len(ADDRESSES), timeout=5)

    def ask(address: str) -> fleet.Outcome:
        all_asked.wait()  # breaks (and the test fails) unless the three run at once
        time.sleep(0.05 * (len(ADDRESSES) - ADDRESSES.index(address)))
        return fleet.Outcome(200, answer=address)

    outcomes = fleet.ask_all(ADDRESSES, ask)
    assert [outcome.answer for outcome in outcomes] == ADDRESSES


def test_one_at_a_time_stops_at_the_first_failure():
    asked: list[str] = []

    def ask(address: str) -> fleet.Outcome:
        assert threading.current_thread() is threading.main_thread()
        asked.append(address)
        if address == "b:1":
            return fleet.Outcome(None, error="cannot reach the control API at b:1")
        return fleet.Outcome(200, answer={"success": "Ok"})

    outcomes = fleet.ask_all([*ADDRESSES, "d:3"], ask, one_at_a_time=True)
    assert asked == ["unix:/a.sock", "b:1"]
    assert json.loads(fleet.report([*ADDRESSES, "d:3"], outcomes)) == {
        "unix:/a.sock": {"status": 200, "answer": {"success": "Ok"}},
        "b:1": {"status": None, "error": "cannot reach the control API at b:1"},
        "c:2": {"skipped": "not tried: b:1 failed before it"},
        "d:3": {"skipped": "not tried: b:1 failed before it"},
    }
    assert [outcome.succeeded for outcome in outcomes] == [True, False, False, False]


def test_one_at_a_time_asks_every_instance_when_none_fails():
    asked: list[str] = []

    def ask(address: str) -> fleet.Outcome:
        asked.append(address)
        return fleet.Outcome(200, answer=None)

    outcomes = fleet.ask_all(ADDRESSES, ask, one_at_a_time=True)
    assert asked == ADDRESSES
    assert all(outcome.succeeded for outcome in outcomes)


def test_an_error_answer_is_reported_with_its_status():
    failed = fleet.Outcome(404, error="Value doesn't exist.")
    assert not failed.succeeded
    assert failed.as_json() == {"status": 404, "error": "Value doesn't exist."}


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["top"], "top reads one instance: give one --socket, not 2"),
        (["stacks", "app"], "stacks reads one instance: give one --socket, not 2"),
    ],
)
def test_top_and_stacks_take_one_socket(capsys, argv, line):
    assert ctl.main(["--socket", "a:1", "--socket", "b:2", *argv]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"corral ctl: error: {line}\n")


def test_an_address_given_twice_is_refused(capsys):
    assert ctl.main(["--socket", "a:1", "--socket", "b:2", "--socket", "a:1", "get", "/"]) == 2
    assert capsys.readouterr().err == "corral ctl: error: --socket a:1: given twice\n"


@pytest.mark.parametrize(
    ("address", "here"),
    [
        ("unix:/run/corral/control.sock", True),
        ("/run/corral/control.sock", True),
        ("127.0.0.1:8443", True),
        ("127.0.0.2:8443", True),
        ("localhost:8443", True),
        ("[::1]:8443", True),
        (":8443", True),
        ("10.0.0.7:8443", False),
        ("web-3.internal:8443", False),
        ("[2001:db8::7]:8443", False),
    ],
)
def test_whether_an_address_is_this_machines(address, here):
    assert ctl._on_this_machine(address) is here


def test_an_instance_of_another_machine_out_of_reach_is_not_told_of_this_ones_servers():
    """The fleet's line for a HOST:PORT that is not loopback says how that machine's server
    turns the API on, not which corral servers run here (a real refused connection: a port
    of this machine's own address, reached as another machine's would be)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: the route says which address
        own = probe.getsockname()[0]
    except OSError:
        pytest.skip("this machine has no route off loopback, so no address of its own to use")
    finally:
        probe.close()
    if own.startswith("127."):
        pytest.skip("this machine's only address is loopback")
    closed = socket.socket()
    closed.bind((own, 0))
    port = closed.getsockname()[1]
    closed.close()  # bound once and closed: nothing listens there
    client = ctl.Client(f"{own}:{port}", None, 5.0)
    with pytest.raises(ctl.ApiError) as failed:
        client.call("GET", "/status")
    assert "no control API answers on that machine" in failed.value.line
    assert "runs here" not in failed.value.line

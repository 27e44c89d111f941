"""The two builds of the request parser agree with each other, and with llhttp.

Inputs come from tests/differential.py's grammar and mutations, drawn by hypothesis (so a
failure shrinks to a short input); each is fed whole, cut at two places, and byte by byte.
- Parity: the compiled parser and the Python one report the same requests, refuse with the
  same status and stop at the same point, for every input and every way of feeding it.
- Differential: llhttp (the oracle, tests/llhttp_oracle.py) refuses what they refuse and
  parses the same requests from the rest, but in the classes `differential.disagreement`
  names, each decided by an RFC clause. The by-hand run (``python -m tests.differential``)
  does the same on a million inputs.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cores import request_parser
from tests.differential import (
    Chooser,
    RandomChooser,
    check,
    disagreement,
    generate,
    mutate,
    outcome,
)


class DrawChooser(Chooser):
    """Choices drawn by hypothesis, so that it can shrink them."""

    def __init__(self, draw) -> None:
        self.draw = draw

    def choice(self, options):
        return self.draw(st.sampled_from(options))

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def chance(self, p: float) -> bool:
        return self.draw(st.floats(0, 1)) < p


@st.composite
def requests(draw) -> tuple[bytes, DrawChooser]:
    choose = DrawChooser(draw)
    data = generate(choose)
    if choose.chance(0.5):
        data = mutate(choose, data)
    return data, choose


def cores() -> list[type]:
    return [request_parser("compiled"), request_parser("python")]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_both_builds_agree_and_llhttp_differs_only_where_an_rfc_decides(case):
    data, choose = case
    found = check(data, choose, cores())
    assert found is None or not found.startswith("unexplained"), f"{found}: {data!r}"


def test_a_seeded_run_of_ten_thousand_inputs_finds_no_unexplained_difference():
    choose = RandomChooser(random.Random(20261201))
    classes = set()
    for _ in range(10_000):
        data = generate(choose)
        if choose.chance(0.5):
            data = mutate(choose, data)
        found = check(data, choose, cores())
        assert found is None or not found.startswith("unexplained"), f"{found}: {data!r}"
        classes.add(found)
    # the generator reaches the differences it is meant to: one of each kind at least
    assert {c for c in classes if c} >= {
        "RFC 9112 3: request-line elements are separated by one SP",
        "RFC 9110 9.1: a method is any token; the application answers an unknown one",
        "RFC 9112 2.3: HTTP-name is HTTP",
    }


def test_the_comparison_can_fail():
    """A parser that drops a header breaks parity; one that takes a bare LF breaks agreement."""
    compiled, python = cores()
    data = b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\r\n"

    class Dropping(python):  # type: ignore[misc, valid-type]
        def feed(self, chunk: bytes) -> None:
            super().feed(chunk.replace(b"X: 1\r\n", b""))

    assert outcome(Dropping, [data]) != outcome(compiled, [data])
    ours = outcome(python, [b"GET / HTTP/1.1\nHost: a\n\n"])
    accepting = (
        (("GET", b"/", "1.1", ((b"Host", b"a"),), True, None, False, False, b"", True),),
        None,
        False,
    )
    assert ours[1] == 400
    assert disagreement(b"GET / HTTP/1.1\nHost: a\n\n", ours, accepting, python).startswith(
        "unexplained"
    )

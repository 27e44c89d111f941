"""Request durations per worker, in power-of-two buckets, for the control API's /metrics.

A :class:`LatencyHistogram` is called as each response finishes (like the access log,
with the precise start the connection took for it) and costs one clock read, one
``bit_length`` and two additions. Bucket ``i`` counts durations below ``2**(i + 7)`` µs
(128 µs, 256 µs, ... 16.8 s); the last one counts the rest. The worker sends the counts
and the sum with its heartbeat (``corral.wire.Latency``: ``lat SUM_US C0,C1,...``); the
master adds them up per application and writes Prometheus' cumulative ``le`` buckets.
"""

from __future__ import annotations

from time import monotonic
from typing import Any

FIRST_BIT = 7  # the first bucket's bound: 2**7 µs
BOUNDS = 18  # finite bounds, 2**7 .. 2**24 µs; one more bucket for the rest
UPPER_BOUNDS_SECONDS = tuple((1 << (FIRST_BIT + i)) / 1e6 for i in range(BOUNDS))


class LatencyHistogram:
    __slots__ = ("counts", "sum_us")

    def __init__(self) -> None:
        self.counts = [0] * (BOUNDS + 1)
        self.sum_us = 0

    def __call__(self, conn: Any, exchange: Any) -> None:
        micros = int((monotonic() - exchange.request_start) * 1e6)
        self.sum_us += micros
        index = micros.bit_length() - FIRST_BIT
        self.counts[min(max(index, 0), BOUNDS)] += 1


def add(total: tuple[int, list[int]] | None, more: tuple[int, list[int]]) -> tuple[int, list[int]]:
    """Two histograms' sums and counts added."""
    if total is None:
        return more[0], list(more[1])
    return total[0] + more[0], [a + b for a, b in zip(total[1], more[1], strict=True)]


def percentiles(counts: list[int], wanted: tuple[float, ...] = (50, 90, 99)) -> list[float] | None:
    """Each wanted percentile as the upper bound, in ms, of the bucket it falls in (so a
    figure is at most twice the true one); None with no duration counted. The last bucket
    (beyond 16.8 s) is given its lower bound."""
    total = sum(counts)
    if not total:
        return None
    figures = []
    for percent in wanted:
        rank = total * percent / 100
        running = 0
        index = len(counts) - 1
        for index, count in enumerate(counts):  # noqa: B007 - the bucket the rank falls in
            running += count
            if running >= rank:
                break
        bound = UPPER_BOUNDS_SECONDS[min(index, BOUNDS - 1)]
        figures.append(round(bound * 1000, 3))
    return figures

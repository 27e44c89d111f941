"""Two configurations of one server measured in alternation: what a feature costs.

bench/run.py starts each configuration once per round and measures its loads in turn; a
difference of a few percent between two configurations of corral then drowns in what this
shared machine does between the two measurements, and in the mode a server process happens
to start in (the same server, restarted, settles at figures up to 15 % apart and keeps them).
Here both servers run at once, pinned to the same core (one is idle while the other is
measured), and are measured in alternation, A B B A, so each pair of figures is taken
seconds apart; both are restarted several times, so a start's mode weighs on both sides
alike. The figure is the median of the pairs' ratios (B / A), with its spread.

    bench/.venv/bin/python bench/paired.py --scenario L --starts 5 --pairs 6

``--scenario L`` compares scenario L's two servers (hello without and with the limits of
issue 34) at keep-alive c=100, where a server is bound by its own CPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # (bench/run.py: the servers, the loads, wrk)

OUT = Path(__file__).resolve().parent / "out"


def start(config: run.Config, ports: run.Ports, name: str) -> tuple[run.ServerProcess, int]:
    """``config``'s server, ready (its first answer checked)."""
    port = ports.take()
    server = run.ServerProcess(
        config.argv(port), config.app.directory, OUT / f"paired-{name}.log", pin=True
    )
    problem = run.wait_ready(server, port, config.app, 30.0)
    if problem is not None:
        server.stop()
        raise SystemExit(f"{name} did not start: {problem}\n{server.log_tail()}")
    return server, port


def measure(load: run.Load, port: int, path: str, duration: float) -> float:
    result = run.run_wrk(load, port, path, duration)
    if result.get("rps") is None or run.error_count(result):
        raise SystemExit(f"a measurement failed: {result}")
    return float(result["rps"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="L", help="a scenario of two configurations (L)")
    parser.add_argument("--connections", type=int, default=100, help="wrk's connections (100)")
    parser.add_argument("--starts", type=int, default=5, help="restarts of both servers (5)")
    parser.add_argument("--pairs", type=int, default=6, help="pairs per start (6)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per figure (3)")
    args = parser.parse_args()
    scenario = next(s for s in run.scenarios() if s.key == args.scenario)
    first, second = scenario.configs
    load = run.Load(args.connections)
    ratios: list[float] = []
    figures: tuple[list[float], list[float]] = ([], [])
    ports = run.Ports()
    for number in range(1, args.starts + 1):
        a, a_port = start(first, ports, "a")
        b, b_port = start(second, ports, "b")
        try:
            for port in (a_port, b_port):  # warm-up
                measure(load, port, first.app.path, 1.0)
            for pair in range(args.pairs):
                order = ((0, a_port), (1, b_port))
                if pair % 2:
                    order = order[::-1]  # A B, then B A: neither side always goes first
                got = [0.0, 0.0]
                for side, port in order:
                    got[side] = measure(load, port, first.app.path, args.duration)
                    figures[side].append(got[side])
                ratios.append(got[1] / got[0])
            print(
                f"start {number}: {first.label} {statistics.median(figures[0][-args.pairs :]):,.0f}"
                f", {second.label} {statistics.median(figures[1][-args.pairs :]):,.0f} req/s",
                flush=True,
            )
        finally:
            a.stop()
            b.stop()
        time.sleep(1)
    quartiles = statistics.quantiles(ratios, n=4)
    print(
        f"{second.label} / {first.label}, keep-alive c={args.connections}, "
        f"{len(ratios)} pairs: median {statistics.median(ratios):.3f} "
        f"(quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}); medians "
        f"{statistics.median(figures[0]):,.0f} and {statistics.median(figures[1]):,.0f} req/s"
    )


if __name__ == "__main__":
    main()

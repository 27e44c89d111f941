"""corral at two git revisions side by side, with Granian as the yardstick: scenario A's
hello app, 1 worker x 1 thread pinned to CPU 0, ``wrk -c100`` keep-alive on CPU 1.

For a "this change did not slow the request path" claim: every configuration runs once per
round, rounds interleave them, the table gives medians and each one's ratio to Granian of
the same round. Configurations:

- ``corral@BASE``: a worktree of BASE (``bench/out/rev-BASE``) with its compiled core built
  in place (Cython, from setup.sh), its ``src`` first on PYTHONPATH, same interpreter and venv
  as the rest;
- ``corral@HEAD``: this checkout, a listener passing straight to the application;
- ``corral@HEAD routed``: this checkout, the listener passing to ``routes`` (one step, to the
  same application): what routing costs a request;
- ``granian``.

    bench/.venv/bin/python bench/revisions.py --base 8c41ee1 --rounds 5 --duration 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import (  # bench/run.py, beside this file
    APPS,
    HELLO,
    HOST,
    LOGS,
    OUT,
    PY,
    App,
    Load,
    Ports,
    ServerProcess,
    check_hello,
    granian,
    run_wrk,
    wait_ready,
)

REPO = Path(__file__).resolve().parents[1]
HELLO_APP = App("hello", "hello:application", APPS, "/", check_hello)


def worktree(base: str) -> Path:
    path = OUT / f"rev-{base}"
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), base],
            check=True,
            capture_output=True,
        )
    # the base's compiled core, built beside its sources: without it, corral@BASE would run
    # the Python core (its log's first line says which core runs)
    subprocess.run(
        [PY, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=path,
        check=True,
        capture_output=True,
    )
    return path


def corral_argv(src: Path, port: int, routed: bool) -> list[str]:
    env = ["env", f"PYTHONPATH={src}:{APPS}"]
    if not routed:
        return [*env, PY, "-m", "corral", "hello:application", "-b", f"{HOST}:{port}"]
    config = OUT / f"routed-{port}.json"
    config.write_text(
        json.dumps(
            {
                "listeners": {f"{HOST}:{port}": {"pass": "routes"}},
                "routes": [{"action": {"pass": "applications/hello"}}],
                "applications": {"hello": {"module": "hello", "callable": "application"}},
            }
        )
    )
    return [*env, PY, "-m", "corral", "-c", str(config)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    base = worktree(args.base)
    configs = {
        f"corral@{args.base}": lambda port: corral_argv(base / "src", port, False),
        "corral@HEAD": lambda port: corral_argv(REPO / "src", port, False),
        "corral@HEAD routed": lambda port: corral_argv(REPO / "src", port, True),
        "granian": lambda port: granian(HELLO_APP, 1, 1, port),
    }
    load = Load(100)
    ports = Ports()
    rps: dict[str, list[float]] = {name: [] for name in configs}
    ratios: dict[str, list[float]] = {name: [] for name in configs}
    for round_ in range(args.rounds):
        this_round: dict[str, float] = {}
        for name, build in configs.items():
            port = ports.take()
            server = ServerProcess(build(port), APPS, LOGS / f"rev-{name}.log", pin=True)
            try:
                problem = wait_ready(server, port, HELLO_APP, 30.0)
                if problem is not None:
                    sys.exit(f"{name}: {problem}\n{server.log_tail()}")
                run_wrk(load, port, "/", 1.0)  # warm-up
                result = run_wrk(load, port, "/", args.duration)
            finally:
                server.stop()
            if result["rps"] is None:
                sys.exit(f"{name}: {result.get('error')}")
            this_round[name] = result["rps"]
            print(f"round {round_ + 1} {name}: {result['rps']:,.0f} req/s", flush=True)
        for name, value in this_round.items():
            rps[name].append(value)
            ratios[name].append(value / this_round["granian"])
    print(
        f"\n{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {args.rounds} rounds of "
        f"{args.duration:g} s, keep-alive c=100, body {HELLO!r}\n"
    )
    print("| configuration | req/s (median) | min - max | vs Granian (median of rounds) |")
    print("| --- | --- | --- | --- |")
    for name in configs:
        values = rps[name]
        print(
            f"| {name} | {statistics.median(values):,.0f} | {min(values):,.0f} - "
            f"{max(values):,.0f} | {statistics.median(ratios[name]):.2f} |"
        )


if __name__ == "__main__":
    main()

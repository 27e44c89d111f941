"""Charts of a load run: req/s against connections, one line per server, as PNG.

    bench/.venv/bin/python bench/charts.py bench/results/2026-11-30.json [--out bench/charts]

One chart per scenario and connection kind (keep-alive, `Connection: close`) that has more
than one connection count: the median req/s of the rounds at each count, from the raw JSON
that bench/run.py writes. Needs matplotlib (bench/setup.sh installs it in bench/.venv).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent


def medians(scenario: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(config id, load key) -> the median req/s of its successful rounds."""
    found: dict[tuple[str, str], list[float]] = {}
    for run in scenario["runs"]:
        if run.get("status") != "ok":
            continue
        for key, load in run["loads"].items():
            if load.get("rps") and not load.get("kept_alive"):  # see run.ignores_close
                found.setdefault((run["config"], key), []).append(load["rps"])
    return {where: statistics.median(values) for where, values in found.items()}


def draw(results: Path, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    data = json.loads(results.read_text())
    written = []
    for key, scenario in data["scenarios"].items():
        rps = medians(scenario)
        for keepalive, kind in ((True, "keep-alive"), (False, "close")):
            # a named load (a file, an encoding: run.py's scenarios S, Z, J) is no point of a
            # curve over connection counts
            loads = [
                load
                for load in scenario["loads"]
                if load["keepalive"] == keepalive and not load.get("name")
            ]
            if len(loads) < 2:
                continue
            figure, axes = pyplot.subplots(figsize=(7, 4.2), dpi=100)
            for config in scenario["configs"]:
                points = [
                    (load["connections"], rps[(config["id"], load["key"])])
                    for load in loads
                    if (config["id"], load["key"]) in rps
                ]
                if not points:
                    continue
                style = "--" if config.get("reference") else "-"
                width = 2.5 if config["family"] == "corral" else 1.2
                axes.plot(
                    *zip(*points, strict=True),
                    style,
                    marker="o",
                    linewidth=width,
                    label=config["label"],
                )
            axes.set_xscale("log")
            axes.set_xticks([load["connections"] for load in loads])
            axes.set_xticklabels([str(load["connections"]) for load in loads])
            axes.set_xlabel("connections")
            axes.set_ylabel("requests per second (median of rounds)")
            axes.set_title(f"Scenario {key}: {scenario['title']}, {kind}")
            axes.grid(True, alpha=0.3)
            axes.legend(fontsize=8)
            figure.tight_layout()
            path = out / f"{results.stem}-{key}-{kind}.png"
            figure.savefig(path)
            pyplot.close(figure)
            written.append(path)
    return written


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("results", type=Path, help="a results JSON of bench/run.py")
    options.add_argument("--out", type=Path, default=BENCH / "charts")
    args = options.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in draw(args.results, args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

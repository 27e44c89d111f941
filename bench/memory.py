"""Memory of a server's processes, the seed articles' table (issue 36, point 5).

    bench/.venv/bin/python bench/memory.py [--rounds 3] [--workers 5] [--requests 2000]
        [--cases corral,corral-preload,gunicorn,...] [--json FILE]

The Django project is bench/apps/make_drf.py's (Django REST framework, sqlite, ``/users/``),
served by each server with ``--workers`` worker processes (Gunicorn's sync workers, uWSGI's
processes with ``--http-socket``, corral's), without preloading and with it (corral's and
Gunicorn's ``--preload``; uWSGI loads the application in its master unless ``--lazy-apps``,
so its plain case is the preloaded one). After ``ab -n REQUESTS -c 10`` on ``/users/``, for the
server's whole process tree (master and workers): the sum of RSS (what the articles sum from
``ps -eo fname,rss``), of PSS (``/proc/PID/smaps_rollup``: a shared page counted once across
the processes that map it) and of USS (private pages: what a process alone would free). The
``hello`` cases run bench/apps/hello.py with one worker and give that worker's RSS and USS.
A second table splits one worker's RSS of each case by where its pages come from
(`mappings_of`): anonymous pages (the Python objects it inherited from its master or made),
and the code and data pages of the interpreter, uvloop, corral's compiled modules, msgspec and
OpenSSL it touched.

Before the first case, corral's modules and the applications' are compiled to byte code, as
an installed package's are (`compile_byte_code`).

Start-up: from the command's start to the first 200 answer. Reload: from ``SIGHUP`` to the
moment every worker is a new process, their count is back and a request is answered.

Every server runs under ``taskset -c 0`` and ab under ``taskset -c 1`` (bench/run.py's
pinning); the table gives medians over the rounds, the cases started in an order rotated by
round.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import run  # noqa: E402 (bench/run.py: server processes, their tree, machine facts, pinning)

DRF = BENCH / "out" / "drf"
DRF_APP = "drfproj.wsgi:application"
HELLO_APP = "hello:application"


def argv_of(case: str, port: int, workers: int) -> tuple[list[str], Path]:
    """The command line of ``case`` and the directory it runs in."""
    server, _, variant = case.partition("-")
    hello = server == "hello"
    if hello:
        server, _, variant = variant.partition("-")
        workers = 1
    app, cwd = (HELLO_APP, BENCH / "apps") if hello else (DRF_APP, DRF)
    bind = f"{run.HOST}:{port}"
    bin_ = run.VENV_BIN
    if server == "corral":
        argv = [str(bin_ / "corral"), app, "-w", str(workers), "-b", bind, "--log-level", "warning"]
        argv += ["--preload"] if variant == "preload" else []
    elif server == "gunicorn":
        argv = [str(bin_ / "gunicorn"), app, "-w", str(workers), "-b", bind]
        argv += ["--preload"] if variant == "preload" else []
    elif server == "uwsgi":
        argv = [str(bin_ / "uwsgi"), "--http-socket", bind, "--master", "--processes"]
        argv += [str(workers), "--module", app, "--disable-logging", "--need-app"]
        argv += ["--die-on-term", "--pythonpath", str(cwd)]
        argv += ["--lazy-apps"] if variant == "lazy" else []
    else:
        raise SystemExit(f"memory.py: unknown case {case}")
    return argv, cwd


def memory_of(pid: int) -> dict[str, int]:
    """RSS, PSS and USS of one process, in KiB."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            name, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                fields[name] = int(rest.split()[0])
    uss = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return {"rss": fields.get("Rss", 0), "pss": fields.get("Pss", 0), "uss": uss}


# a worker's RSS by where its pages come from: anonymous pages (the Python objects it inherited
# or made, whatever mapping holds them) and, per library, the code and data pages it touched
CODE_GROUPS = (
    ("libpython", "libpython"),
    ("uvloop", "/uvloop/"),
    ("corral (compiled)", "/corral/"),
    ("msgspec", "/msgspec/"),
    ("OpenSSL", "/libcrypto.so"),
    ("OpenSSL", "/libssl.so"),
)


def mappings_of(pid: int) -> dict[str, int]:
    """A process's RSS in KiB: ``anonymous``, then the file pages of each of `CODE_GROUPS`, the
    rest as ``other files``."""
    groups: dict[str, int] = {}
    group = "other files"
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            head, _, rest = line.partition(" ")
            if not head.endswith(":"):  # a mapping's first line: its range, ..., its path
                path = line.split()[5] if len(line.split()) > 5 else ""
                group = next((g for g, part in CODE_GROUPS if part in path), "other files")
                continue
            if head == "Rss:":
                groups[group] = groups.get(group, 0) + int(rest.split()[0])
            elif head == "Anonymous:":
                kib = int(rest.split()[0])
                groups[group] = groups.get(group, 0) - kib
                groups["anonymous"] = groups.get("anonymous", 0) + kib
    return groups


def workers_of(root: int) -> list[int]:
    return [p["pid"] for p in run.proc_tree(root) if p["pid"] != root]


def answered(port: int, path: str) -> bool:
    try:
        return run.http_get(port, path, timeout=1.0)[0] == 200
    except OSError:
        return False


def wait(predicate: Any, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"{what}: not within {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - start


def measure(case: str, port: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    argv, cwd = argv_of(case, port, args.workers)
    hello = case.startswith("hello")
    path = "/" if hello else "/users/"
    count = 1 if hello else args.workers
    started = time.monotonic()
    server = run.ServerProcess(argv, cwd, out / f"{case}.log", pin=True)
    try:
        wait(lambda: answered(port, path), 60, f"{case} start")
        startup = time.monotonic() - started
        wait(lambda: len(workers_of(server.proc.pid)) >= count, 30, f"{case} workers")
        ab = ["taskset", "-c", run.CLIENT_CPU, "ab", "-q", "-n", str(args.requests), "-c", "10"]
        subprocess.run([*ab, f"http://{run.HOST}:{port}{path}"], capture_output=True, check=True)
        time.sleep(0.5)
        tree = run.proc_tree(server.proc.pid)
        each = {p["pid"]: memory_of(p["pid"]) for p in tree}
        workers = [pid for pid in each if pid != server.proc.pid]
        result: dict[str, Any] = {
            "case": case,
            "processes": len(each),
            "startup_s": round(startup, 3),
            **{f"{k}_sum_kib": sum(m[k] for m in each.values()) for k in ("rss", "pss", "uss")},
            "master_rss_kib": each[server.proc.pid]["rss"],
            "worker_rss_kib": statistics.median(each[pid]["rss"] for pid in workers),
            "worker_uss_kib": statistics.median(each[pid]["uss"] for pid in workers),
            "worker_mappings_kib": mappings_of(workers[0]),
        }
        before = set(workers)
        hup = time.monotonic()
        server.proc.send_signal(signal.SIGHUP)

        def renewed() -> bool:
            now = set(workers_of(server.proc.pid))
            return len(now) == len(before) and not now & before and answered(port, path)

        wait(renewed, 60, f"{case} reload")
        result["reload_s"] = round(time.monotonic() - hup, 3)
        return result
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument(
        "--cases",
        default="corral,corral-preload,gunicorn,gunicorn-preload,uwsgi,uwsgi-lazy,"
        "hello-corral,hello-gunicorn,hello-uwsgi",
    )
    parser.add_argument("--first-port", type=int, default=31000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not (DRF / "drfproj").is_dir():
        subprocess.run([sys.executable, str(BENCH / "apps" / "make_drf.py")], check=True)
    compile_byte_code()
    cases = args.cases.split(",")
    out = BENCH / "out" / "memory"
    rows: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
    port = args.first_port
    for round_ in range(args.rounds):
        order = cases[round_ % len(cases) :] + cases[: round_ % len(cases)]
        for case in order:
            port += 1
            rows[case].append(measure(case, port, args, out))
            print(json.dumps(rows[case][-1]), flush=True)
    medians = {
        case: {
            key: statistics.median(r[key] for r in results)
            for key in results[0]
            if key not in ("case", "worker_mappings_kib")
        }
        for case, results in rows.items()
    }
    print(table(medians))
    print(mapping_table(rows))
    if args.json:
        facts = {"machine": run.machine_info(), "date": time.strftime("%Y-%m-%d %H:%M UTC")}
        args.json.write_text(json.dumps({**facts, "rounds": rows, "medians": medians}, indent=2))


def compile_byte_code() -> None:
    """Every module's byte code written beforehand, as an installed package has it: an editable
    corral's sources (and the applications') would otherwise be compiled by each server at its
    start wherever ``PYTHONDONTWRITEBYTECODE`` is set, and the compiler's garbage would count."""
    import corral  # (bench/.venv's corral, the checkout's sources when installed editable)

    places = [Path(corral.__file__).parent, BENCH / "apps", DRF]
    command = [sys.executable, "-m", "compileall", "-q", "-j", "0", *map(str, places)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def table(medians: dict[str, dict[str, float]]) -> str:
    mib = 1024
    lines = [
        "| case | processes | RSS sum MiB | PSS sum MiB | USS sum MiB | master RSS | worker RSS "
        "| worker USS | start-up s | reload s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case, m in medians.items():
        lines.append(
            f"| {case} | {m['processes']:.0f} | {m['rss_sum_kib'] / mib:.1f} "
            f"| {m['pss_sum_kib'] / mib:.1f} | {m['uss_sum_kib'] / mib:.1f} "
            f"| {m['master_rss_kib'] / mib:.1f} | {m['worker_rss_kib'] / mib:.1f} "
            f"| {m['worker_uss_kib'] / mib:.1f} | {m['startup_s']:.2f} | {m['reload_s']:.2f} |"
        )
    return "\n".join(lines)


def mapping_table(rows: dict[str, list[dict[str, Any]]]) -> str:
    """One worker's RSS of each case by `mappings_of`'s groups, medians over the rounds."""
    groups = ["anonymous", *dict.fromkeys(g for g, _ in CODE_GROUPS), "other files"]
    lines = [
        "| case (one worker), MiB | " + " | ".join(groups) + " | RSS |",
        "| --- |" + " --- |" * (len(groups) + 1),
    ]
    for case, results in rows.items():
        each = [
            statistics.median(r["worker_mappings_kib"].get(g, 0) for r in results) for g in groups
        ]
        cells = " | ".join(f"{kib / 1024:.1f}" for kib in each)
        lines.append(f"| {case} | {cells} | {sum(each) / 1024:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""``corral ctl top``: a live view of one server's applications and workers, from its API.

It reads ``GET /status`` (applications, their workers and latency) and ``GET /status/events``
once per interval, and acts through ``/control/applications/NAME/workers/more``, ``/fewer``
and ``/restart`` (what TTIN, TTOU and HUP do). Rates (requests per second, CPU %) are the
differences between two snapshots over the time between them. What is drawn is `screen`'s
lines, pure and tested without a terminal; `run` is the curses loop around it, and `once`
the plain text for scripts. Stdlib only, as ``ctl.py``; curses is imported when the view
starts. The API client is passed in (``call(method, path)``): this module imports no other
of ``corral.control``, so ``ctl.py`` can import it lazily without a cycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

__all__ = ["SORTS", "Snapshot", "View", "once", "run", "screen"]

Call = Callable[[str, str], Any]  # (method, path) -> the JSON answer; raises on an error

SORTS = ("slot", "served", "cpu", "rss", "oldest")
HELP = "s sort  a application  + more  - fewer  r restart  q quit"


@dataclass
class Snapshot:
    """What the API said at one moment."""

    taken: float  # time.monotonic()
    status: dict[str, Any]
    events: list[dict[str, Any]]


def fetch(call: Call) -> Snapshot:
    return Snapshot(time.monotonic(), call("GET", "/status"), call("GET", "/status/events"))


@dataclass
class View:
    """What the operator chose: the sort, the application shown (None: all), a message."""

    sort: str = "slot"
    application: str | None = None
    message: str = ""
    applications: list[str] = field(default_factory=list)

    def next_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]

    def next_application(self) -> None:
        choices: list[str | None] = [None, *self.applications]
        index = choices.index(self.application) if self.application in choices else 0
        self.application = choices[(index + 1) % len(choices)]

    def target(self) -> str | None:
        """The application the keys act on: the one shown, else the first."""
        if self.application is not None:
            return self.application
        return self.applications[0] if self.applications else None


def _rate(now: float, before: float, seconds: float) -> float | None:
    return (now - before) / seconds if seconds > 0 else None


def _figure(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "~"


def _refused(counts: dict[str, int]) -> str:
    """The server's own refusals by reason (``refused: rate_limit 4, timeout 1``)."""
    shown = [f"{reason} {count}" for reason, count in counts.items() if count]
    return "refused: " + (", ".join(shown) if shown else "none")


def _worker_key(sort: str) -> Callable[[dict[str, Any]], Any]:
    if sort == "served":
        return lambda row: -row["served"]
    if sort == "cpu":
        return lambda row: -(row["cpu"] or 0.0)
    if sort == "rss":
        return lambda row: -row["rss_mib"]
    if sort == "oldest":
        return lambda row: -(row["oldest"]["age"] if row["oldest"] else -1.0)
    return lambda row: (row["application"], row["slot"], row["pid"])


def screen(
    now: Snapshot,
    before: Snapshot | None,
    view: View,
    width: int = 132,
    height: int = 40,
    where: str = "",
) -> list[str]:
    """The lines of one frame, each at most ``width`` characters, at most ``height`` lines."""
    seconds = now.taken - before.taken if before is not None else 0.0
    applications: dict[str, Any] = now.status.get("applications", {})
    view.applications = list(applications)
    if view.application not in applications:
        view.application = None
    shown = [name for name in applications if view.application in (None, name)]
    old_apps = before.status.get("applications", {}) if before is not None else {}
    old_cpu = {
        worker["pid"]: worker["cpu_seconds"]
        for app in old_apps.values()
        for worker in app.get("workers", [])
    }
    connections = now.status.get("connections", {})
    total = now.status.get("requests", {}).get("total", 0)
    old_total = before.status.get("requests", {}).get("total", 0) if before is not None else 0
    server_rate = _rate(total, old_total, seconds) if before is not None else None
    lines = [
        f"corral top  {where}  {time.strftime('%H:%M:%S')}  sort: {view.sort}  "
        f"application: {view.application or 'all'}",
        HELP,
        f"server: {_figure(server_rate)} req/s, {total} requests; connections "
        f"{connections.get('active', 0)} active, {connections.get('idle', 0)} idle, "
        f"{connections.get('accepted', 0)} accepted",
        _refused(now.status.get("refused", {})),
        "",
        f"{'APPLICATION':<24} {'WORKERS':>7} {'REQ/S':>9} {'TOTAL':>10} {'ACTIVE':>6} "
        f"{'P50 ms':>8} {'P90 ms':>8} {'P99 ms':>8}",
    ]
    rows = []
    for name in shown:
        app = applications[name]
        total = app["requests"]["total"]
        old = old_apps.get(name)
        rate = _rate(total, old["requests"]["total"], seconds) if old else None
        latency = app.get("latency") or {}
        lines.append(
            f"{_clip(name, 24):<24} {app['processes']['running']:>7} {_figure(rate):>9} "
            f"{total:>10} {app['requests']['active']:>6} {_figure(latency.get('p50'), 3):>8} "
            f"{_figure(latency.get('p90'), 3):>8} {_figure(latency.get('p99'), 3):>8}"
        )
        for worker in app.get("workers", []):
            cpu = None
            if worker["pid"] in old_cpu:
                cpu = _rate(worker["cpu_seconds"], old_cpu[worker["pid"]], seconds)
            rows.append({**worker, "application": name, "cpu": None if cpu is None else cpu * 100})
    lines += [
        "",
        f"{'PID':>7} {'APPLICATION':<16} {'SLOT':>4} {'GEN':>4} {'STATE':<9} {'SERVED':>8} "
        f"{'INFL':>4} {'RSS MiB':>8} {'CPU %':>6}  {'OLDEST REQUEST':<34} LAST RESTART",
    ]
    for row in sorted(rows, key=_worker_key(view.sort)):
        oldest = row["oldest"]
        request = ""
        if oldest:
            request = f"{oldest['method']} {oldest['target']} {oldest['age']:.1f}s"
        lines.append(
            f"{row['pid']:>7} {_clip(row['application'], 16):<16} {row['slot']:>4} "
            f"{row['generation']:>4} {row['state']:<9} {row['served']:>8} {row['in_flight']:>4} "
            f"{row['rss_mib']:>8.1f} {_figure(row['cpu']):>6}  {_clip(request, 34):<34} "
            f"{row['last_restart'] or ''}"
        )
    events = [e for e in now.events if view.application in (None, e["application"])]
    room = height - len(lines) - 4
    if room > 0:
        lines += ["", "RECENT EVENTS"]
        for event in events[-room:]:
            stamp = time.strftime("%H:%M:%S", time.localtime(event["time"]))
            who = event["application"] or ""
            pid = f" pid {event['pid']}" if event["pid"] else ""
            lines.append(f"{stamp} {event['kind']:<8} {who}{pid}: {event['detail']}")
    if view.message:
        lines.append("")
        lines.append(view.message)
    return [_clip(line.rstrip(), width) for line in lines[:height]]


def act(call: Call, view: View, key: str) -> None:
    """Carry out ``key``'s action on the target application; its outcome as the message."""
    name = view.target()
    if name is None:
        view.message = "no application"
        return
    action = {"+": "workers/more", "-": "workers/fewer", "r": "restart"}[key]
    path = f"/control/applications/{quote(name, safe='')}/{action}"
    try:
        answer = call("GET", path)
    except Exception as exc:  # the API's error line, shown: the view goes on
        view.message = f"{action} for {name}: {exc}"
        return
    result = answer.get("success", "") if isinstance(answer, dict) else ""
    view.message = f"{action} for {name}: {result}"


def once(call: Call, where: str, width: int = 132) -> str:
    """One snapshot as plain text (no rates: they need two)."""
    return "\n".join(screen(fetch(call), None, View(), width, 1000, where)) + "\n"


def run(call: Call, where: str, interval: float = 1.0) -> None:
    """The full-screen view until ``q``; the first snapshot is taken before the screen
    changes, so an unreachable API or a wrong token is the command's one error line."""
    first = fetch(call)
    import curses

    def loop(window: Any) -> None:
        curses.curs_set(0)
        window.timeout(100)
        view = View()
        before: Snapshot | None = None
        now = first
        due = time.monotonic() + interval
        while True:
            height, width = window.getmaxyx()
            window.erase()
            for row, line in enumerate(screen(now, before, view, width - 1, height, where)):
                window.addstr(row, 0, line)
            window.refresh()
            key = window.getch()
            if key in (ord("q"), ord("Q")):
                return
            if key == ord("s"):
                view.next_sort()
            elif key == ord("a"):
                view.next_application()
            elif key in (ord("+"), ord("-"), ord("r")):
                act(call, view, chr(key))
            if time.monotonic() >= due:
                due = time.monotonic() + interval
                try:
                    before, now = now, fetch(call)
                    if view.message.startswith("cannot read the API"):
                        view.message = ""
                except Exception as exc:  # the server restarting: said, and retried
                    view.message = f"cannot read the API: {exc}; retrying"

    curses.wrapper(loop)

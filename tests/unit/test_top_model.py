"""``corral ctl top``'s frame from API snapshots (control/top.py's pure part), and the latency
percentiles it shows (observe/latency.py)."""

from __future__ import annotations

from corral.control.top import Snapshot, View, screen
from corral.observe.latency import BOUNDS, percentiles


def worker(pid: int, slot: int, served: int, cpu: float, rss: float, oldest=None) -> dict:
    return {
        "pid": pid,
        "slot": slot,
        "generation": 1,
        "state": "ready",
        "served": served,
        "in_flight": 1 if oldest else 0,
        "oldest": oldest,
        "rss_mib": rss,
        "cpu_seconds": cpu,
        "uptime": 10.0,
        "last_restart": None,
    }


def status(total: int, workers: list[dict], name: str = "blog") -> dict:
    return {
        "connections": {"accepted": 9, "active": 3, "idle": 1, "closed": 5},
        "requests": {"total": total},
        "applications": {
            name: {
                "processes": {"running": len(workers), "starting": 0, "idle": 0},
                "requests": {"active": 0, "total": total},
                "latency": {"p50": 0.256, "p90": 1.024, "p99": 8.192},
                "workers": workers,
            }
        },
    }


def test_rates_come_from_two_snapshots_over_the_time_between_them():
    before = Snapshot(100.0, status(1000, [worker(11, 0, 500, 1.0, 30.0)]), [])
    now = Snapshot(102.0, status(1400, [worker(11, 0, 900, 1.5, 31.0)]), [])
    lines = screen(now, before, View())
    (app,) = [line for line in lines if line.startswith("blog ")]
    assert app.split() == ["blog", "1", "200.0", "1400", "0", "0.256", "1.024", "8.192"]
    assert lines[2].startswith("server: 200.0 req/s, 1400 requests; connections 3 active")
    (row,) = [line for line in lines if line.lstrip().startswith("11 ")]
    assert row.split()[:9] == ["11", "blog", "0", "1", "ready", "900", "0", "31.0", "25.0"]


def test_without_a_snapshot_before_the_rates_are_dashes():
    now = Snapshot(1.0, status(10, [worker(11, 0, 10, 1.0, 30.0)]), [])
    lines = screen(now, None, View())
    (app,) = [line for line in lines if line.startswith("blog ")]
    assert app.split()[2] == "-"


def test_sorting_puts_the_oldest_request_first_and_the_view_cycles_its_sorts():
    rows = [
        worker(11, 0, 5, 0.0, 30.0),
        worker(12, 1, 9, 0.0, 50.0, {"method": "GET", "target": "/slow", "age": 4.5}),
        worker(13, 2, 7, 0.0, 40.0, {"method": "POST", "target": "/x", "age": 0.5}),
    ]
    now = Snapshot(1.0, status(21, rows), [])

    def pids(view: View) -> list[str]:
        return [line.split()[0] for line in screen(now, None, view) if line[:7].strip().isdigit()]

    view = View()
    assert pids(view) == ["11", "12", "13"]
    view.next_sort()
    assert view.sort == "served" and pids(view) == ["12", "13", "11"]
    view.sort = "rss"
    assert pids(view) == ["12", "13", "11"]
    view.sort = "oldest"
    assert pids(view) == ["12", "13", "11"]
    assert any("GET /slow 4.5s" in line for line in screen(now, None, view))


def test_the_application_filter_cycles_through_all_and_each_and_drops_one_that_went():
    two = {
        "applications": {
            **status(1, [worker(11, 0, 1, 0.0, 1.0)], "a")["applications"],
            **status(1, [worker(21, 0, 1, 0.0, 1.0)], "b")["applications"],
        }
    }
    events = [
        {"time": 0.0, "kind": "crash", "application": "a", "pid": 10, "detail": "died"},
        {"time": 0.0, "kind": "reload", "application": None, "pid": None, "detail": "gen 2"},
    ]
    now = Snapshot(1.0, two, events)
    view = View()
    screen(now, None, view)
    view.next_application()
    assert view.application == "a" and view.target() == "a"
    text = "\n".join(screen(now, None, view))
    assert " 11 a " in text and " 21 b " not in text and "crash" in text
    view.next_application()
    text = "\n".join(screen(now, None, view))
    assert view.application == "b" and " 11 a " not in text and "crash" not in text
    view.next_application()
    assert view.application is None and view.target() == "a"
    view.application = "gone"
    screen(now, None, view)
    assert view.application is None


def test_lines_fit_the_width_and_the_height():
    rows = [worker(pid, pid, 1, 0.0, 1.0) for pid in range(100, 160)]
    lines = screen(Snapshot(1.0, status(1, rows), []), None, View(), width=40, height=20)
    assert len(lines) == 20 and all(len(line) <= 40 for line in lines)


def test_percentiles_are_the_upper_bounds_of_their_buckets():
    counts = [0] * (BOUNDS + 1)
    counts[0], counts[3], counts[10] = 50, 40, 10  # < 0.128 ms, < 1.024 ms, < 131.072 ms
    assert percentiles(counts) == [0.128, 1.024, 131.072]
    assert percentiles([0] * (BOUNDS + 1)) is None
    beyond = [0] * BOUNDS + [1]  # past the last bound: that bound, not infinity
    assert percentiles(beyond) == [16777.216] * 3

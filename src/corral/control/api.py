"""The control API's endpoints: a request (method, path, body) in, a `Reply` out.

No socket here (`server.py` speaks HTTP); the arbiter is the only state. Endpoints:

- ``/config`` and any path inside it: GET, PUT, POST (append to an array), DELETE. A change
  is computed on the running document inside `Reloads.apply`, so concurrent changes apply
  one after the other, each on the result of the one before; the whole new document is
  validated, then applied; the answer comes once it serves or was rolled back.
- ``/status`` and its sub-paths: GET; what the master knows of its workers.
- ``/metrics``: GET; the same figures in Prometheus' text format.
- ``/control/applications/NAME/restart``: GET (as in Unit); new workers for the same document.
- ``/control/applications/NAME/workers/more`` and ``/fewer``: GET; TTIN and TTOU for NAME.
- ``/control/applications/NAME/stacks``: GET; every worker's thread stacks and, in an ASGI
  worker, its pending tasks' awaits, within a second (``control/stacks.py``).
- ``/certificates`` and ``/certificates/NAME[/PATH]``: GET, PUT (a PEM bundle), DELETE;
  NGINX Unit's certificate store (``control/certificates.py``).
- ``/``: GET; ``{"certificates": ..., "config": ..., "status": ...}``.

Answers are Unit's: ``{"success": "Reconfiguration done."}``, or
``{"error": TITLE, "detail": ..., "path": ...}`` with 400, 404, 405 (and ``Allow``) or 500.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from corral.config import ConfigError, Document, document_builtins, validate_document
from corral.config.values import masked, unmasked
from corral.control import certificates, stacks, tree
from corral.master.arbiter import Arbiter
from corral.master.generation import ROUTES_POOL, ApplyFailed
from corral.master.process import WorkerProcess
from corral.observe import latency, refusals
from corral.observe.refusals import REASONS
from corral.server.health import server_readiness
from corral.tls.context import expiries

DONE = "Reconfiguration done."
_CONFIG_METHODS = ("GET", "PUT", "POST", "DELETE")
_READ_ONLY = ("GET",)
_ACTIONS = ("restart", "stacks", "workers/more", "workers/fewer")  # /control/applications/NAME/...
_APPLY_TITLES = {
    400: "Invalid configuration.",
    500: "Failed to apply new configuration.",
    503: "The server is stopping.",
}


@dataclass
class Reply:
    """One answer: the status, the JSON value of the body, extra header fields."""

    status: int
    body: Any  # a JSON value, or the text itself when content_type is not JSON
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = "application/json"


def error(status: int, title: str, detail: str = "", path: str = "", **extra: Any) -> Reply:
    body: dict[str, Any] = {"error": title}
    if detail:
        body["detail"] = detail
    if path:
        body["path"] = path
    body.update(extra)
    return Reply(status, body)


def not_allowed(method: str, path: str, allow: tuple[str, ...]) -> Reply:
    reply = error(405, "Method isn't allowed.", f"{method} is not allowed on {path}", path)
    reply.headers.append(("Allow", ", ".join(allow)))
    return reply


async def handle(arbiter: Arbiter, method: str, target: str, body: bytes) -> Reply:
    """The answer to one request; ``target`` is the request target (path and query)."""
    path = target.partition("?")[0]
    try:
        if path == "/config" or path.startswith("/config/"):
            return await _config(arbiter, method, path, tree.split(path[7:]), body)
        if path == "/status" or path.startswith("/status/"):
            if method != "GET":
                return not_allowed(method, path, _READ_ONLY)
            segments = tree.split(path[7:])
            if segments[:1] == ["events"]:
                return Reply(200, tree.get(arbiter.events.recent(), segments[1:]))
            return Reply(200, tree.get(status(arbiter), segments))
        if path == "/metrics":
            if method != "GET":
                return not_allowed(method, path, _READ_ONLY)
            return Reply(200, metrics(arbiter), [], "text/plain; version=0.0.4; charset=utf-8")
        if path.startswith("/control/"):
            return await _control(arbiter, method, path, tree.split(path[8:]))
        if path == certificates.PREFIX or path.startswith(certificates.PREFIX + "/"):
            return _certificates(arbiter, method, path, body)
        if path == "/":
            if method != "GET":
                return not_allowed(method, path, _READ_ONLY)
            return Reply(
                200,
                {
                    "certificates": arbiter.control.certificates.all_info(),
                    "config": _tree(arbiter.current.doc),
                    "status": status(arbiter),
                },
            )
        raise tree.NotFound(f"{path} does not exist", path)
    except tree.InvalidJson as exc:
        location = {"offset": exc.offset, "line": exc.line, "column": exc.column}
        if exc.offset is None:
            return error(400, exc.title, exc.detail)
        return error(400, exc.title, exc.detail, location=location)
    except tree.NotAllowed as exc:
        return not_allowed(method, exc.path or path, exc.allow)
    except tree.TreeError as exc:
        return error(exc.status, exc.title, exc.detail, exc.path or path)
    except ConfigError as exc:
        message = str(exc)
        return error(400, "Invalid configuration.", message, tree.api_path(message))
    except ApplyFailed as exc:
        title = _APPLY_TITLES.get(exc.status, _APPLY_TITLES[500])
        return error(exc.status, title, exc.detail)


def _tree(doc: Document) -> Any:
    return document_builtins(doc)


async def _config(
    arbiter: Arbiter, method: str, path: str, segments: list[str], body: bytes
) -> Reply:
    if method == "GET":
        return Reply(200, tree.get(masked(_tree(arbiter.current.doc)), segments))
    operation: Callable[[Any], Any]
    if method == "PUT":
        operation = partial(tree.put, segments=segments, value=tree.decode(body))
    elif method == "POST":
        if not segments:
            return not_allowed(method, path, ("GET", "PUT", "DELETE"))
        operation = partial(tree.post, segments=segments, value=tree.decode(body))
    elif method == "DELETE":
        operation = partial(tree.delete, segments=segments)
    else:
        return not_allowed(method, path, _CONFIG_METHODS)

    def change(doc: Document) -> Document:
        before = _tree(doc)
        changed = validate_document(unmasked(operation(_tree(doc)), before))
        certificates.check_listeners(arbiter.control.certificates, changed)
        return changed

    await arbiter.reloads.apply(change, f"{method} {path}")
    return Reply(200, {"success": DONE})


def _certificates(arbiter: Arbiter, method: str, path: str, body: bytes) -> Reply:
    pending = arbiter.pending
    documents = [arbiter.current.doc] + ([pending.doc] if pending is not None else [])
    try:
        return Reply(
            200, certificates.handle(arbiter.control.certificates, documents, method, path, body)
        )
    except certificates.Refused as exc:
        reply = error(exc.status, exc.title, exc.detail)
        if exc.status == 405:
            reply.headers.append(("Allow", ", ".join(certificates.ALLOWED)))
        return reply


async def _control(arbiter: Arbiter, method: str, path: str, segments: list[str]) -> Reply:
    action = "/".join(segments[2:])
    if len(segments) < 3 or segments[0] != "applications" or action not in _ACTIONS:
        raise tree.NotFound(f"{path} does not exist", path)
    if method != "GET":
        return not_allowed(method, path, _READ_ONLY)
    name = segments[1]
    if action == "stacks":
        return await _stacks(arbiter, name)
    if action.startswith("workers/"):
        return _scale(arbiter, name, action == "workers/more")

    def same(doc: Document) -> Document:
        if name not in doc.applications:
            where = tree.join(["applications", name])
            raise tree.NotFound(f"{where} does not exist", where)
        return doc

    await arbiter.reloads.apply(same, f"restart of {name}", restart=(name,))
    return Reply(200, {"success": "Ok"})


def _known(arbiter: Arbiter, name: str) -> None:
    if name not in arbiter.current.doc.applications:
        where = tree.join(["applications", name])
        raise tree.NotFound(f"{where} does not exist", where)


def _scale(arbiter: Arbiter, name: str, more: bool) -> Reply:
    """TTIN and TTOU for one application: until its next change, which sets its processes."""
    _known(arbiter, name)
    if arbiter.stopping:
        return error(503, _APPLY_TITLES[503])
    if arbiter.pending is not None or arbiter.current.doc.applications[name].dynamic:
        detail = "a change is under way" if arbiter.pending else "its processes are dynamic"
        return error(409, "Cannot change the number of workers.", detail)
    if name not in arbiter.counts:  # an external application's: its processes key says
        return error(409, "Cannot change the number of workers.", "it has no workers")
    if more:
        arbiter.more_workers(name)
    elif not arbiter.fewer_workers(name):
        return error(409, "Cannot change the number of workers.", "it runs one worker")
    return Reply(200, {"success": "Ok", "workers": arbiter.counts[name]})


async def _stacks(arbiter: Arbiter, name: str) -> Reply:
    _known(arbiter, name)
    workers = await stacks.collect(_workers_of(arbiter, name))
    return Reply(200, {"application": name, "workers": workers})


def _workers_of(arbiter: Arbiter, name: str) -> list[WorkerProcess]:
    """The live workers of ``name`` in slot order, a retiring one before its successor."""
    workers = (worker for worker in arbiter.workers.values() if worker.pool.name == name)
    return sorted(workers, key=lambda worker: (worker.slot, worker.started))


def status(arbiter: Arbiter, workers: bool = True) -> dict[str, Any]:
    """Unit's status, from the workers' last heartbeats (at most a second old).

    ``connections``: accepted and closed so far (exited workers included), open ones with a
    request (active) or without (idle). Per application: its processes running (ready),
    starting and idle (ready, no request in progress), the requests in its application code
    now (active) and served so far (total, an addition to Unit's shape); corral's own: its
    latency percentiles and (with ``workers``) each of its workers. The workers of a document
    without application (its routes alone) count in ``connections`` and ``requests``.
    """
    active = idle = total = 0
    applications: dict[str, Any] = {}
    for name in arbiter.current.doc.applications:
        running = starting = idle_processes = busy = 0
        for worker in arbiter.workers.values():
            if worker.pool.name != name:
                continue
            _, _, w_active, w_idle, w_busy = worker.connections
            active += w_active
            idle += w_idle
            busy += w_busy
            if worker.retiring:
                continue
            if worker.ready:
                running += 1
                idle_processes += worker.in_progress is None
            else:
                starting += 1
        tally = arbiter.tally(name)
        total += tally.served
        figures = latency.percentiles(tally.latency[1]) if tally.latency else None
        applications[name] = {
            "processes": {"running": running, "starting": starting, "idle": idle_processes},
            "requests": {"active": busy, "total": tally.served},
            "latency": dict(zip(("p50", "p90", "p99"), figures, strict=True)) if figures else None,
        }
        if workers:  # not for /metrics, which would read /proc for figures it does not give
            applications[name]["workers"] = _workers(arbiter, name)
    applications.update(arbiter.externals.status(workers))  # programs, not workers
    for worker in arbiter.workers.values():  # a document without application: its routes'
        if worker.pool.name == ROUTES_POOL:
            _, _, w_active, w_idle, _ = worker.connections
            active += w_active
            idle += w_idle
    if ROUTES_POOL in arbiter.current.pools:
        total += arbiter.tally(ROUTES_POOL).served
    served_by = {*arbiter.gone, *arbiter.current.doc.applications, *arbiter.current.pools}
    counted = [arbiter.tally(name) for name in served_by]
    accepted = sum(tally.accepted for tally in counted)
    closed = sum(tally.closed for tally in counted)
    ready = sum(worker.ready and not worker.retiring for worker in arbiter.workers.values())
    found = {
        "connections": {"accepted": accepted, "active": active, "idle": idle, "closed": closed},
        "requests": {"total": total},
        "applications": applications,
        # corral's own: what the listeners' readiness probes say of the whole server
        "readiness": server_readiness(
            arbiter.stopping, arbiter.all_ready, ready, bool(arbiter.current.pools)
        ),
    }
    refusals = refused_by_listener(arbiter)
    if refusals:  # corral's own: requests the server refused itself since it started, by reason
        found["refused"] = {
            reason: sum(counts[reason] for counts in refusals.values()) for reason in REASONS
        }
    served = _expiries(arbiter)
    if served:  # corral's own: each served certificate's end, for the renewals' watchers
        now = datetime.datetime.now(datetime.UTC)
        found["certificates"] = {
            name: {"until": f"{until:%Y-%m-%dT%H:%M:%SZ}", "days_left": (until - now).days}
            for name, until in served.items()
        }
    return found


def _expiries(arbiter: Arbiter) -> dict[str, datetime.datetime]:
    return expiries(
        served for pool in arbiter.current.pools.values() for served in pool.served.values()
    )


def _workers(arbiter: Arbiter, name: str) -> list[dict[str, Any]]:
    """corral's own: each live worker of ``name``, as its last heartbeat and /proc say."""
    rows = []
    for worker in _workers_of(arbiter, name):
        request = worker.in_progress
        oldest = None
        if request is not None:
            age = round(request.age, 1)  # as its last heartbeat said
            oldest = {"method": request.method, "target": request.target, "age": age}
        rows.append(
            {
                "pid": worker.pid,
                "slot": worker.slot,
                "generation": worker.generation.number,
                "state": worker.state,
                "served": worker.served,
                "in_flight": worker.connections[4],
                "oldest": oldest,
                "rss_mib": round(worker.rss_mib(), 1),
                "cpu_seconds": round(worker.cpu_seconds(), 2),
                "uptime": round(worker.age, 1),
                "last_restart": arbiter.events.last_restart(name, worker.slot),
            }
        )
    return rows


def metrics(arbiter: Arbiter) -> str:
    """The status in Prometheus' text format (version 0.0.4)."""
    figures = status(arbiter, workers=False)
    connections = figures["connections"]
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, int]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{labels} {value}" for labels, value in samples)

    family(
        "corral_connections_accepted_total",
        "counter",
        "Connections accepted.",
        [("", connections["accepted"])],
    )
    family(
        "corral_connections_closed_total",
        "counter",
        "Connections closed.",
        [("", connections["closed"])],
    )
    family(
        "corral_connections",
        "gauge",
        "Open connections, with a request in progress (active) or without (idle).",
        [('{state="active"}', connections["active"]), ('{state="idle"}', connections["idle"])],
    )
    apps = figures["applications"]
    family(
        "corral_requests_total",
        "counter",
        "Requests answered, by application.",
        [(_labels(name), app["requests"]["total"]) for name, app in apps.items()],
    )
    family(
        "corral_requests_active",
        "gauge",
        "Requests in the application's code now, by application.",
        [(_labels(name), app["requests"]["active"]) for name, app in apps.items()],
    )
    family(
        "corral_processes",
        "gauge",
        "Worker processes by application and state (idle ones are also running).",
        [
            (_labels(name, state=state), count)
            for name, app in apps.items()
            for state, count in app["processes"].items()
        ],
    )
    served = _expiries(arbiter)
    if served:
        family(
            "corral_tls_certificate_expiry_seconds",
            "gauge",
            "When each served certificate expires (Unix time), by certificate.",
            [
                ('{certificate="' + _escape(name) + '"}', int(until.timestamp()))
                for name, until in served.items()
            ],
        )
    limited = _rate_limits(arbiter)
    refusals = refused_by_listener(arbiter)
    if refusals:
        family(
            "corral_requests_refused_total",
            "counter",
            "Requests the server answered itself instead of serving, by reason and listener.",
            [
                ('{reason="' + reason + '",listener="' + _escape(address) + '"}', count)
                for address, counts in refusals.items()
                for reason, count in counts.items()
            ],
        )
    if limited:
        family(
            "corral_requests_delayed_total",
            "counter",
            "Requests let in over their rate limit, started later, by listener.",
            [
                ('{listener="' + _escape(address) + '"}', delayed)
                for address, (_, delayed) in limited.items()
            ],
        )
    histograms = _latency_by_application(arbiter)
    if histograms:
        name = "corral_request_duration_seconds"
        lines.append(f"# HELP {name} Time from a request's head to its response's end.")
        lines.append(f"# TYPE {name} histogram")
        for app_name, (sum_us, counts) in histograms.items():
            running = 0
            for bound, count in zip(latency.UPPER_BOUNDS_SECONDS, counts, strict=False):
                running += count
                lines.append(f"{name}_bucket{_labels(app_name, le=f'{bound:g}')} {running}")
            running += counts[-1]
            lines.append(f"{name}_bucket{_labels(app_name, le='+Inf')} {running}")
            lines.append(f"{name}_sum{_labels(app_name)} {sum_us / 1e6:.6f}")
            lines.append(f"{name}_count{_labels(app_name)} {running}")
    return "\n".join(lines) + "\n"


def refused_by_listener(arbiter: Arbiter) -> dict[str, dict[str, int]]:
    """Each listener's refusals by reason since the server started, every worker's
    (observe/refusals.py; a rate limit's are its table's)."""
    limited = _rate_limits(arbiter)
    found = {address: tally.counts() for address, tally in refusals.tallies().items()}
    for address, counts in found.items():
        counts["rate_limit"] += limited.get(address, (0, 0))[0]  # (the tally: route steps')
    return found


def _rate_limits(arbiter: Arbiter) -> dict[str, tuple[int, int]]:
    """Each listener's rate limit counts (refused, delayed), read from the pool's table."""
    return {
        address: limiter.table.counts()
        for pool in arbiter.current.pools.values()
        for address, limiter in pool.limiters.items()
    }


def _latency_by_application(arbiter: Arbiter) -> dict[str, tuple[int, list[int]]]:
    """Per application, the histograms of its workers, exited ones included (workers of a
    dynamic pool count durations for the master's scaling even without the setting)."""
    if not arbiter.latency_histogram():
        return {}
    histograms = {name: arbiter.tally(name).latency for name in arbiter.current.doc.applications}
    return {name: histogram for name, histogram in histograms.items() if histogram is not None}


def _labels(application: str, **more: str) -> str:
    pairs = {"application": application, **more}
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in pairs.items()) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

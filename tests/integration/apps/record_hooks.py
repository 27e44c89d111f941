"""Server hooks that record every call: one JSON line per call appended to ``$HOOKS_LOG``.

Each line holds the hook's name, the pid of the process that ran it and what its arguments
showed. ``pre_fork`` tags the worker (``worker.tag``) so that later hooks can tell whether
they received the same object; ``post_request`` first sleeps ``$HOOKS_POST_REQUEST_DELAY``
seconds, if set. Lines are written with one ``os.write`` on an ``O_APPEND``
descriptor, so lines from several processes never interleave.
"""

import json
import os
import time


def _record(hook, **fields):
    line = json.dumps({"hook": hook, "pid": os.getpid(), **fields}) + "\n"
    fd = os.open(os.environ["HOOKS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _worker(worker):
    return {
        "worker_pid": worker.pid,
        "age": worker.age,
        "ppid": worker.ppid,
        "tag": getattr(worker, "tag", None),
        "alive": worker.alive,
        "booted": worker.booted,
    }


def _server(server):
    return {"server_pid": server.pid, "num_workers": server.num_workers}


def nworkers_changed(server, new_value, old_value):
    _record("nworkers_changed", new=new_value, old=old_value, **_server(server))


def on_starting(server):
    _record("on_starting", workers=server.cfg.workers, **_server(server))


def when_ready(server):
    _record("when_ready", bind=server.cfg.bind, forked=len(server.WORKERS), **_server(server))


def pre_fork(server, worker):
    worker.tag = f"w{worker.age}"
    _record("pre_fork", **_worker(worker), **_server(server))


def post_fork(server, worker):
    _record("post_fork", **_worker(worker), **_server(server))


def post_worker_init(worker):
    _record("post_worker_init", **_worker(worker), workers=worker.cfg.workers)


def pre_request(worker, req):
    _record(
        "pre_request",
        **_worker(worker),
        method=req.method,
        uri=req.uri,
        path=req.path,
        query=req.query,
        version=list(req.version),
        headers=req.headers,
        remote_addr=list(req.remote_addr),
    )


def post_request(worker, req, environ, resp):
    # a slow hook: whatever does not wait for it would be recorded before it
    time.sleep(float(os.environ.get("HOOKS_POST_REQUEST_DELAY", "0")))
    _record(
        "post_request",
        **_worker(worker),
        method=req.method,
        path=req.path,
        path_info=environ.get("PATH_INFO"),
        status=resp.status,
        status_code=resp.status_code,
        sent=resp.sent,
        headers=resp.headers,
    )


def worker_int(worker):
    _record("worker_int", **_worker(worker))


def worker_abort(worker):
    _record("worker_abort", **_worker(worker))


def worker_exit(server, worker):
    _record("worker_exit", **_worker(worker), **_server(server))


def child_exit(server, worker):
    _record("child_exit", **_worker(worker), **_server(server), workers=sorted(server.WORKERS))


def on_reload(server):
    _record("on_reload", workers=server.cfg.workers, **_server(server))


def pre_exec(server):
    _record("pre_exec", **_server(server))


def on_exit(server):
    _record("on_exit", **_server(server))

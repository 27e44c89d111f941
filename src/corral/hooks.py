"""Gunicorn-compatible server hooks (the ``hooks`` setting): loading, calling, the views.

Owns: importing the hooks file (``path/hooks.py``) or module (``pkg.hooks``) once, in the
master at start-up, after ``chdir``, ``pythonpath`` and ``env`` (as the application is
imported); checking that every hook it defines is callable with Gunicorn's arguments;
calling the hooks; and the small Gunicorn-shaped objects they receive. Workers inherit the
loaded hooks through fork. A Gunicorn config file (``-c gunicorn.conf.py``) is its own hooks
file: `corral.config.gunicorn` runs it through `load_module` when the configuration is read,
before ``chdir`` as Gunicorn does, and `Hooks.load` takes that module instead of running the
file again. Gunicorn's settings in a file given as ``--hooks`` are not applied (one warning
line each names them).

Invariants:
- A hook never takes the server down: an exception it raises is logged with its traceback
  (``hook NAME failed: ...``) and the caller goes on. A failing ``pre_request`` or
  ``post_request`` does not keep the request from its answer.
- An undefined hook costs a dict miss, and nothing on the request path: the adapter picks the
  hooked call only when ``pre_request`` or ``post_request`` is defined.
- :meth:`Hooks.call` supplies the leading arguments of Gunicorn's signatures: ``server``, and
  in a worker process that worker (``post_fork`` and ``worker_exit`` get both). The master
  passes the worker explicitly to ``pre_fork`` and ``child_exit``; the caller passes the rest.

Where each hook runs, as in Gunicorn (master M, or the worker process W):
- M ``nworkers_changed(server, new_value, old_value)``: the worker count was set (at start,
  TTIN, TTOU, WINCH, a reload committed); ``old_value`` is None the first time.
- M ``on_starting(server)``: before the listeners are bound.
- M ``when_ready(server)``: the listeners are up, before the first worker is forked.
- M ``pre_fork(server, worker)``: just before ``os.fork``; ``worker.pid`` is ``"[booting]"``.
- W ``post_fork(server, worker)``: just after the fork, before the user switch and the import.
- W ``post_worker_init(worker)``: the application is imported, before serving.
- W ``pre_request(worker, req)``: before the application is called, on the thread calling it.
- W ``post_request(worker, req, environ, resp)``: same thread, once the response's last bytes
  are handed over, before the connection's next request.
- W ``worker_int(worker)``: SIGQUIT (workers ignore SIGINT: the master decides).
- W ``worker_abort(worker)``: SIGABRT (a timeout), before the worker reports and exits.
- W ``worker_exit(server, worker)``: the worker process ends (drained, QUIT or ABRT).
- M ``child_exit(server, worker)``: a worker was reaped.
- M ``on_reload(server)``: HUP or a reload: the new configuration read, before its workers
  are forked.
- ``pre_exec(server)``: USR2, in the forked child that is about to exec the new master.
- M ``on_exit(server)``: on the way out, after the pid file is removed; whenever
  ``on_starting`` ran.

The views carry only what Gunicorn documents or common hook code reads:
- ``server``: ``log``, ``pid``, ``proc_name``, ``num_workers``, ``cfg``, ``WORKERS`` (pid →
  worker, the same objects ``pre_fork`` saw).
- ``worker``: ``age`` (spawn counter), ``pid``, ``ppid``, ``log``, ``cfg``, ``alive``,
  ``booted``. Setting ``alive`` does not stop a corral worker.
- ``cfg``: every corral setting under its own name, and Gunicorn's names where they differ
  (``bind``, ``preload_app``, ``keepalive``, ``pidfile``, ``errorlog``, ``accesslog``,
  ``access_log_format``, ``loglevel``, ``raw_env``...: `corral.config.gunicorn_names.CORRAL_NAMES`).
- ``req``: ``method``, ``uri``, ``path``, ``query``, ``fragment``, ``version`` (tuple),
  ``headers`` (list of ``(NAME, value)``, names upper-cased), ``scheme``, ``remote_addr``
  and ``peer_addr``.
- ``resp``: ``status`` (str), ``status_code``, ``headers`` (as the application gave them),
  ``sent`` (body bytes written, chunk framing included, as in the access log).

As Gunicorn does, ``post_request`` may also take only ``(worker, req)`` or
``(worker, req, environ)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import sys
import traceback
from collections.abc import Callable
from functools import cached_property
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from corral.observe.errorlog import LOGGER_NAME

# Gunicorn's hooks and their parameters, in order.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "on_starting": ("server",),
    "on_reload": ("server",),
    "when_ready": ("server",),
    "pre_fork": ("server", "worker"),
    "post_fork": ("server", "worker"),
    "post_worker_init": ("worker",),
    "worker_int": ("worker",),
    "worker_abort": ("worker",),
    "pre_exec": ("server",),
    "pre_request": ("worker", "req"),
    "post_request": ("worker", "req", "environ", "resp"),
    "child_exit": ("server", "worker"),
    "worker_exit": ("server", "worker"),
    "nworkers_changed": ("server", "new_value", "old_value"),
    "on_exit": ("server",),
}
# Hooks about the worker process they run in: call() supplies that worker.
_IN_WORKER = frozenset(
    {
        "post_fork",
        "post_worker_init",
        "worker_int",
        "worker_abort",
        "pre_request",
        "post_request",
        "worker_exit",
    }
)
# Hooks Gunicorn runs as its worker stops (it sets ``alive`` to False first).
_STOPPING = frozenset({"worker_int", "worker_abort", "worker_exit"})
_FILE_MODULE = "corral_hooks"  # sys.modules name of a hooks file
# The modules `load_module` ran, by target (a file's absolute path, or a module name), and for
# what: a config file's module is its hooks too, run once (`Hooks.load` takes it from here).
_LOADED: dict[str, tuple[Any, str]] = {}


class HookError(ValueError):
    """The hooks cannot be loaded: one line for ``corral: error: ...`` (exit code 2)."""


class Hooks:
    """The loaded hook functions, and the views they are called with.

    ``Hooks()`` has no hooks; :meth:`load` reads them. The master's instance is built with
    the arbiter (for the ``server`` view); workers use the copy fork gave them.
    """

    def __init__(self, arbiter: Any = None) -> None:
        self.functions: dict[str, Callable[..., Any]] = {}
        self.log = logging.getLogger(LOGGER_NAME)
        self.server = ServerView(arbiter, self) if arbiter is not None else None
        # In the master, the worker being forked; in a worker process, that worker.
        self.worker: WorkerView | None = None
        self._views: dict[int, WorkerView] = {}  # by pid: the master's workers
        self._spawned = 0
        self._nworkers: int | None = None

    def load(self, target: str | None) -> None:
        """Import ``target`` (None: no hooks) and keep its hooks; raises :class:`HookError`.

        A Gunicorn config file read by ``-c`` was run then: its module is taken as it is.
        Gunicorn's settings in a file given as ``--hooks`` are not applied: one warning each.
        """
        if not target:
            return
        module, label = _LOADED.get(_key(target)) or (load_module(target), "hooks")
        self.functions = hook_functions(module, target)
        if label == "hooks":
            from corral.config.gunicorn_names import settings_in  # (the master's, not a worker's)

            for name in settings_in(vars(module)):
                self.log.warning(
                    "%s: %s is a Gunicorn setting, not applied: --hooks takes only the hooks "
                    "from it (to apply its settings too, give it as -c %s)",
                    _what(target),
                    name,
                    target,
                )

    def defines(self, *names: str) -> bool:
        return any(name in self.functions for name in names)

    def bound(self, name: str) -> Callable[..., None] | None:
        """Hook ``name`` of this worker process, ready to call with the arguments after
        ``worker`` (per-request hooks, bound once); None if it is not defined."""
        function = self.functions.get(name)
        if function is None:
            return None
        worker, log = self.worker, self.log

        def run(*args: Any) -> None:
            try:
                function(worker, *args)
            except Exception as exc:
                log.error("hook %s failed: %s", name, _describe(exc), exc_info=exc)

        return run

    def call(self, name: str, *args: Any) -> None:
        """Run hook ``name`` if defined, with Gunicorn's arguments; log what it raises.

        Also keeps what Gunicorn changes at the same moments, defined or not: ``alive``
        turns False before ``worker_int``/``worker_abort``/``worker_exit``, ``booted``
        True after ``post_worker_init``; ``nworkers_changed`` gets the previous count
        remembered here; ``child_exit`` gets (and forgets) the worker's view.
        """
        worker = self.worker
        if name in _STOPPING and worker is not None:
            worker.alive = False
        elif name == "nworkers_changed":
            args = (args[0], self._nworkers)
            self._nworkers = args[0]
        elif name == "child_exit":
            args = (self._views.pop(args[0].pid, None) or self._orphan_view(args[0]),)
        function = self.functions.get(name)
        if function is not None:
            lead: tuple[Any, ...]
            if name in _IN_WORKER:
                lead = (self.server, worker) if SIGNATURES[name][0] == "server" else (worker,)
            else:
                lead = (self.server,)
            try:
                function(*lead, *args)
            except Exception as exc:
                self.log.error("hook %s failed: %s", name, _describe(exc), exc_info=exc)
        if name == "post_worker_init" and worker is not None:
            worker.booted = True

    # -- the master's workers -------------------------------------------------------------

    def new_worker(self, pool: Any) -> WorkerView:
        """The view of the worker about to be forked (for ``pre_fork``); the child keeps it."""
        self._spawned += 1
        self.worker = WorkerView(self._spawned, os.getpid(), pool, self.log)
        return self.worker

    def adopt(self, process: Any) -> None:
        """In the master, after the fork: the worker just forked is ``process``."""
        view = self.worker
        if view is not None and view.process is None:
            view.process = process
            self._views[process.pid] = view

    def view_of(self, process: Any) -> WorkerView:
        return self._views.get(process.pid) or self._orphan_view(process)

    def worker_stopping(self) -> None:
        """In a worker process: it stops serving (TERM), so ``worker.alive`` turns False."""
        if self.worker is not None:
            self.worker.alive = False

    def _orphan_view(self, process: Any) -> WorkerView:
        view = WorkerView(0, os.getpid(), process.pool, self.log)
        view.process = process
        return view


class ServerView:
    """Gunicorn's ``server``: corral's :class:`~corral.master.arbiter.Arbiter`, as hooks see it."""

    def __init__(self, arbiter: Any, hooks: Hooks) -> None:
        self._arbiter = arbiter
        self._hooks = hooks
        self.log: logging.Logger = arbiter.log
        self.pid = os.getpid()  # the master's, also when read in a worker

    @property
    def num_workers(self) -> int:
        return int(self._arbiter.num_workers)

    @property
    def proc_name(self) -> str:
        return str(self._arbiter.title_name)

    @property
    def cfg(self) -> CfgView:
        """The configuration being started: a reload's, from ``on_reload`` on."""
        arbiter = self._arbiter
        return CfgView(arbiter.pending or arbiter.current)

    @property
    def WORKERS(self) -> dict[int, WorkerView]:  # Gunicorn's name
        return {pid: self._hooks.view_of(p) for pid, p in self._arbiter.workers.items()}


class WorkerView:
    """Gunicorn's ``worker``: one object from ``pre_fork`` on, copied into the child by fork.

    In the master it follows the :class:`~corral.master.process.WorkerProcess` (pid,
    ``booted`` once ready, ``alive`` until retired); in the worker process it is that worker.
    """

    def __init__(self, age: int, ppid: int, generation: Any, log: logging.Logger) -> None:
        self.age = age
        self.ppid = ppid
        self.log = log
        self.process: Any = None  # the master's WorkerProcess, once forked
        self._generation = generation
        self._alive = True
        self._booted = False

    def __repr__(self) -> str:
        return f"<Worker {self.pid}>"

    @property
    def pid(self) -> int | str:
        if self.process is not None:
            return int(self.process.pid)
        pid = os.getpid()
        return "[booting]" if pid == self.ppid else pid

    @property
    def cfg(self) -> CfgView:
        return CfgView(self._generation)

    @property
    def alive(self) -> bool:
        process = self.process
        return self._alive and not (process is not None and process.retiring)

    @alive.setter
    def alive(self, value: bool) -> None:
        self._alive = value

    @property
    def booted(self) -> bool:
        process = self.process
        return bool(process.ready) if process is not None else self._booted

    @booted.setter
    def booted(self, value: bool) -> None:
        self._booted = value


class CfgView:
    """Gunicorn's ``cfg``: the settings of one generation, or of one application's pool, by
    attribute."""

    __slots__ = ("_generation",)

    def __init__(self, generation: Any) -> None:
        self._generation = generation

    def __getattr__(self, name: str) -> Any:
        generation = self._generation
        if name == "bind":
            return list(generation.doc.listeners)
        from corral.config.gunicorn_names import CORRAL_NAMES
        from corral.config.settings import BY_NAME

        key = CORRAL_NAMES.get(name, name)
        if key in BY_NAME:  # each setting is an attribute of the struct of its scope
            for source in (generation.application, generation.settings, generation.doc):
                if hasattr(source, key):
                    return getattr(source, key)
        raise AttributeError(f"no setting {name!r}")


class RequestView:
    """Gunicorn's ``req``, from the parsed head."""

    scheme = "http"

    def __init__(self, head: Any, peer: Any) -> None:
        self._head = head
        self.method: str = head.method
        self.version = (1, 1) if head.version == "1.1" else (1, 0)
        self.remote_addr = self.peer_addr = peer

    # what hooks seldom read is computed when read

    @cached_property
    def uri(self) -> str:
        return str(self._head.target.decode("latin-1"))

    @cached_property
    def _parts(self) -> tuple[str, str, str]:
        return _split_uri(self.uri)

    @property
    def path(self) -> str:
        return self._parts[0]

    @property
    def query(self) -> str:
        return self._parts[1]

    @property
    def fragment(self) -> str:
        return self._parts[2]

    @cached_property
    def headers(self) -> list[tuple[str, str]]:
        return [
            (name.decode("latin-1").upper(), value.decode("latin-1"))
            for name, value in self._head.headers
        ]


class ResponseView:
    """Gunicorn's ``resp``, once the response is complete."""

    def __init__(
        self, status: str | None, status_code: int, headers: list[tuple[str, str]], sent: int
    ) -> None:
        if status is None and status_code:
            status = f"{status_code} {_phrase(status_code)}"
        self.status = status
        self.status_code = status_code
        self.headers = headers
        self.sent = sent


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return ""


def _split_uri(uri: str) -> tuple[str, str, str]:
    """Path, query and fragment, as Gunicorn splits a request target."""
    if uri.startswith("//"):  # a path, not a network location
        parts = urlsplit("." + uri)
        return parts.path[1:], parts.query, parts.fragment
    parts = urlsplit(uri)
    return parts.path, parts.query, parts.fragment


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _where(exc: BaseException) -> str:
    """``file:line`` where an import failed (the innermost frame outside importlib)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: "
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    if frames and frames[-1].filename != __file__:
        return f"{frames[-1].filename}:{frames[-1].lineno}: "
    return ""


def _key(target: str) -> str:
    return os.path.abspath(target) if target.endswith(".py") else target


def _what(target: str, label: str = "hooks") -> str:
    return f"{label} {'file' if target.endswith('.py') else 'module'} {target!r}"


def load_module(target: str, label: str = "hooks") -> Any:
    """Run the file ``path/name.py`` (or import the module ``pkg.name``) and return it; for a
    config file (``label`` "config"), keep it for `Hooks.load`. Raises :class:`HookError`."""
    what = _what(target, label)
    if target.endswith(".py"):
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise HookError(f"{what} not found")
        spec = importlib.util.spec_from_file_location(_FILE_MODULE, path)
        if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has one
            raise HookError(f"{what} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[_FILE_MODULE] = module  # dataclasses and pickle look modules up there
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[_FILE_MODULE]
            raise HookError(f"{what} failed to import: {_where(exc)}{_describe(exc)}") from None
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name and (target == exc.name or target.startswith(exc.name + ".")):
                raise HookError(f"{what} not found ({exc})") from None
            raise HookError(f"{what} failed to import: {_where(exc)}{_describe(exc)}") from None
        except Exception as exc:
            raise HookError(f"{what} failed to import: {_where(exc)}{_describe(exc)}") from None
    if label == "config":
        _LOADED[_key(target)] = (module, label)
    return module


def hook_functions(module: Any, target: str, label: str = "hooks") -> dict[str, Callable[..., Any]]:
    """The hooks ``module`` defines, each checked against Gunicorn's signature."""
    what = _what(target, label)
    functions: dict[str, Callable[..., Any]] = {}
    for name, params in SIGNATURES.items():
        function = getattr(module, name, None)
        if function is None:
            continue
        if not callable(function):
            raise HookError(f"{what}: {name} is not callable ({type(function).__name__})")
        if name == "post_request":
            function = _post_request_adapter(function, what)
        elif not _accepts(function, len(params)):
            raise HookError(
                f"{what}: {name} must accept {len(params)} argument(s) ({', '.join(params)})"
            )
        functions[name] = function
    return functions


def _accepts(function: Callable[..., Any], count: int) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # no signature to read (some builtins): trust it
        return True
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True


def _post_request_adapter(function: Callable[..., Any], what: str) -> Callable[..., Any]:
    """Gunicorn also takes ``post_request(worker, req[, environ])``."""
    if _accepts(function, 4):
        return function
    if _accepts(function, 3):
        return lambda worker, req, environ, _resp: function(worker, req, environ)
    if _accepts(function, 2):
        return lambda worker, req, _environ, _resp: function(worker, req)
    raise HookError(f"{what}: post_request must accept 4 arguments (worker, req, environ, resp)")

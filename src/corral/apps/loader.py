"""Finding the application callable from ``module:callable``; an application's every target
(NGINX Unit's ``targets``: one process imports them all).

Whether an application is ASGI (FastAPI, Starlette, Django's ``ASGIHandler``...) or WSGI is
told here too (:func:`asgi_kind`: a coroutine function, an object whose ``__call__`` is
``async def``, and a class whose ``__call__`` is, its instances being the ASGI 2 application;
a factory's result is judged, not the factory), and the ``interface`` setting decides with it
(:func:`choose_interface`).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from collections.abc import Iterable
from typing import Any


class AppLoadError(Exception):
    """The application could not be imported or is not callable."""


def load_app(module: str, attribute: str | None, factory: Any = False) -> Any:
    """Import ``module`` and return its ``attribute`` (default ``application``, then ``app``);
    with ``factory`` (NGINX Unit's), what calling it with no arguments returns, or with the
    arguments a `corral.config.values.FactoryCall` holds (Gunicorn's
    ``module:factory(ARGS)``).

    An exception raised by the application's own import (or its factory) propagates
    unchanged (:func:`application_traceback` shows its frames); a module that is not there, a
    missing attribute and a callable that is not one raise :class:`AppLoadError`, whose one
    line says it all.
    """
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not _is_not_there(exc, module):
            raise  # the application's own import of another module: its frames show where
        raise AppLoadError(_not_there(exc.name or module)) from None
    names = [attribute] if attribute else ["application", "app"]
    for name in names:
        target: Any = mod
        try:
            for part in name.split("."):
                target = getattr(target, part)
        except AttributeError:
            continue
        if not callable(target):
            raise AppLoadError(f"{module}:{name} is not callable")
        if factory:
            args = getattr(factory, "args", ())
            kwargs = getattr(factory, "kwargs", {})
            target = target(*args, **kwargs)
            if not callable(target):
                what = type(target).__name__
                call = f"{name}(...)" if args or kwargs else f"{name}()"
                raise AppLoadError(f"{module}:{call} returned {what}, not an application")
        return target
    raise AppLoadError(f"module {module!r} has no attribute {' or '.join(map(repr, names))}")


def asgi_kind(target: Any) -> str | None:
    """What makes ``target`` an ASGI application rather than a WSGI one, or None."""
    if inspect.iscoroutinefunction(target):
        return "a coroutine function"
    if inspect.isclass(target):
        # the class's own __call__ (found before the metaclass's): its instances' call
        call = inspect.getattr_static(target, "__call__", None)
        if inspect.iscoroutinefunction(call):
            return "a class whose __call__ is async def"
        return None
    if not inspect.isroutine(target) and inspect.iscoroutinefunction(
        inspect.getattr_static(type(target), "__call__", None)
    ):
        return "an object whose __call__ is async def"
    return None


def choose_interface(interface: str, protocol: str, app: Any) -> str:
    """``"wsgi"`` or ``"asgi"``: how ``app`` is called, given the ``interface`` setting and
    the document's ``protocol`` (Gunicorn's worker class, NGINX Unit's key). An explicit
    ``interface`` wins; with ``auto`` an ASGI worker class (``protocol`` ``asgi``) or an
    application :func:`asgi_kind` recognises is ASGI."""
    if interface in ("wsgi", "asgi"):
        return interface
    if protocol == "asgi" or asgi_kind(app) is not None:
        return "asgi"
    return "wsgi"


def load_entry_points(entry_points: Iterable[Any], factory: Any = False) -> tuple[Any, ...]:
    """The callable of each of an application's entry points (`Application.entry_points`),
    in order: a request routed to target number N runs the Nth. With ``factory``, each is
    what its callable returns."""
    return tuple(load_app(entry.module, entry.callable, factory) for entry in entry_points)


def _is_not_there(exc: ModuleNotFoundError, module: str) -> bool:
    """Whether ``exc`` says that ``module`` (or a package above it) does not exist, rather
    than that code of the application imported a module that does not: no frame of the
    application's is on its traceback."""
    name = exc.name or ""
    named = module == name or module.startswith(name + ".")
    return named and not _application_frames(exc)


def _not_there(name: str) -> str:
    """One line for the module ``name`` that cannot be found, saying where it was looked for:
    the package above it, or the working directory and ``sys.path``."""
    package, _, _ = name.rpartition(".")
    if package in sys.modules:  # imported: the module was looked for in it
        above = sys.modules[package]
        where = getattr(above, "__path__", None)
        if where is None:
            return f"No module named {name!r}: {package!r} is a module, not a package"
        return f"No module named {name!r} (package {package!r} is {', '.join(where)})"
    return f"No module named {name!r} (not in the working directory {os.getcwd()} nor on sys.path)"


_HERE = os.path.abspath(__file__)
_CORRAL = os.path.dirname(os.path.dirname(_HERE)) + os.sep
_MACHINERY = (os.path.dirname(importlib.__file__) + os.sep, "<frozen ")


def _own(stack: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The application's frames (its libraries' included) of ``stack``: those below this
    module's last one (what called the loader is not the application), without corral's or
    the import machinery's."""
    here = [i for i, frame in enumerate(stack) if os.path.abspath(frame.filename) == _HERE]
    return [
        frame
        for frame in stack[here[-1] + 1 if here else 0 :]
        if not frame.filename.startswith(_MACHINERY)
        and not os.path.abspath(frame.filename).startswith(_CORRAL)
    ]


def _application_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return _own(traceback.extract_tb(exc.__traceback__))


def application_traceback(exc: BaseException) -> str | None:
    """The traceback of an application that failed to load with only the application's frames
    (not corral's nor importlib's), its chained exceptions alike; None when it would show no
    more than :func:`describe_load_failure`'s line: an `AppLoadError`, or an exception raised
    with no frame of the application's (a ``SyntaxError`` shows its line of source)."""
    if isinstance(exc, AppLoadError):
        return None
    shown = traceback.TracebackException.from_exception(exc)
    todo, seen = [shown], set()
    while todo:
        each = todo.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        each.stack = traceback.StackSummary.from_list(_own(each.stack))
        todo += [e for e in (each.__cause__, each.__context__) if e is not None]
        todo += each.exceptions or []
    text = "".join(shown.format()).rstrip("\n")
    return text if "\n" in text else None


def load_failure(name: str, entry_points: Iterable[Any], cause: str | None = None) -> str:
    """The line every part of corral says an application failed to load with: named as the
    document names it (its pool, as routes and the control API name it), with the modules it
    imports when they are not its name, ``application blog (blog.wsgi) failed to load:
    CAUSE``; without ``cause``, the line that heads its traceback (ending in ``:``)."""
    modules = ", ".join(m for m in dict.fromkeys(e.module for e in entry_points) if m != name)
    named = f"{name} ({modules})" if modules else name
    return f"application {named} failed to load:" + (f" {cause}" if cause is not None else "")


def describe_load_failure(exc: BaseException) -> str:
    """One line for an application that failed to load: the exception and the application's
    line that raised it, ``ZeroDivisionError: division by zero (File "app.py", line 3, in
    <module>)`` (its last frame outside the standard library and installed packages, else the
    last frame); an
    `AppLoadError`'s own message, which names the application or its virtualenv."""
    if isinstance(exc, AppLoadError):
        return str(exc)

    what = traceback.format_exception_only(type(exc), exc)[-1].strip()
    if isinstance(exc, SyntaxError) and exc.filename:
        return f'{what} (File "{exc.filename}", line {exc.lineno})'
    frames = _application_frames(exc)
    if not frames:
        return what
    libraries = _library_directories()
    own = [f for f in frames if not _in_library(f.filename, libraries)]
    last = (own or frames)[-1]
    return f'{what} (File "{last.filename}", line {last.lineno}, in {last.name})'


def _library_directories() -> tuple[str, ...]:
    """Where this Python's standard library and installed packages are: a frame there is
    where the application's call ended up (``json/decoder.py`` for its bad JSON), not its own
    line."""
    import sysconfig  # (an application that failed to import: once)

    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple({os.path.realpath(paths[key]) + os.sep for key in keys})


def _in_library(filename: str, libraries: tuple[str, ...]) -> bool:
    # a virtualenv's site-packages (--home's) is not among this Python's paths
    path = os.path.realpath(filename)
    return path.startswith(libraries) or f"{os.sep}site-packages{os.sep}" in path

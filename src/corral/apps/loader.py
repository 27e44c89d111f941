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
from collections.abc import Iterable
from typing import Any


class AppLoadError(Exception):
    """The application could not be imported or is not callable."""


def load_app(module: str, attribute: str | None, factory: Any = False) -> Any:
    """Import ``module`` and return its ``attribute`` (default ``application``, then ``app``);
    with ``factory`` (NGINX Unit's), what calling it with no arguments returns, or with the
    arguments a `corral.config.settings.FactoryCall` holds (Gunicorn's
    ``module:factory(ARGS)``).

    An exception raised by the application's own import (or its factory) propagates
    unchanged (its traceback is what the user needs); a missing attribute raises
    :class:`AppLoadError`.
    """
    mod = importlib.import_module(module)
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


def describe_load_failure(exc: BaseException) -> str:
    """One line for an application that failed to load: the exception and where it was raised,
    ``ZeroDivisionError: division by zero (File "app.py", line 3, in <module>)``; an
    `AppLoadError`'s own message, which names the application or its virtualenv."""
    import traceback

    if isinstance(exc, AppLoadError):
        return str(exc)

    what = traceback.format_exception_only(type(exc), exc)[-1].strip()
    if isinstance(exc, SyntaxError) and exc.filename:
        return f'{what} (File "{exc.filename}", line {exc.lineno})'
    # the application's own frames: those below load_app, without the import machinery's
    stack = traceback.extract_tb(exc.__traceback__)
    here = os.path.abspath(__file__)
    below = [i for i, frame in enumerate(stack) if os.path.abspath(frame.filename) == here]
    machinery = (os.path.dirname(importlib.__file__) + os.sep, "<frozen ")
    frames = [
        frame
        for frame in stack[below[-1] + 1 if below else 0 :]
        if not frame.filename.startswith(machinery)
    ]
    if not frames:
        return what
    last = frames[-1]
    return f'{what} (File "{last.filename}", line {last.lineno}, in {last.name})'

"""corral.apps.loader.asgi_kind and choose_interface: an ASGI application is told from a WSGI
one when it is loaded, and the ``interface`` setting decides with it (the integration tests
serve them: test_conformance.py, test_asgi.py)."""

from __future__ import annotations

import functools

import pytest

from corral.apps.loader import asgi_kind, choose_interface


async def coroutine(scope, receive, send):
    pass


class AsyncCall:
    async def __call__(self, scope, receive, send):
        pass


class Asgi2:
    def __init__(self, scope):
        self.scope = scope

    async def __call__(self, receive, send):
        pass


def wsgi(environ, start_response):
    return []


class WsgiClass:
    """PEP 3333's class form: the class is called, the instance iterated."""

    def __init__(self, environ, start_response):
        pass

    def __iter__(self):
        return iter([])


class WsgiCallable:
    def __call__(self, environ, start_response):
        return []


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        (coroutine, "a coroutine function"),
        (functools.partial(coroutine), "a coroutine function"),
        (AsyncCall().__call__, "a coroutine function"),
        (AsyncCall(), "an object whose __call__ is async def"),
        (Asgi2, "a class whose __call__ is async def"),
        (wsgi, None),
        (WsgiClass, None),
        (WsgiCallable(), None),
        (WsgiCallable, None),
        (functools.partial(wsgi), None),
    ],
)
def test_asgi_kind(target, kind):
    assert asgi_kind(target) == kind


@pytest.mark.parametrize(
    ("interface", "protocol", "target", "chosen"),
    [
        ("auto", "wsgi", coroutine, "asgi"),
        ("auto", "wsgi", AsyncCall(), "asgi"),
        ("auto", "wsgi", Asgi2, "asgi"),
        ("auto", "wsgi", wsgi, "wsgi"),
        ("auto", "asgi", wsgi, "asgi"),  # -k uvicorn.workers.UvicornWorker
        ("wsgi", "wsgi", coroutine, "wsgi"),
        ("wsgi", "asgi", coroutine, "wsgi"),  # an explicit interface wins
        ("asgi", "wsgi", WsgiCallable(), "asgi"),
    ],
)
def test_choose_interface(interface, protocol, target, chosen):
    assert choose_interface(interface, protocol, target) == chosen

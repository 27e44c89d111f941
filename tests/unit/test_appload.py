"""corral.apps.loader.asgi_kind: an ASGI application is told from a WSGI one when it is loaded
(the integration tests show the refusal: test_conformance.py)."""

from __future__ import annotations

import functools

import pytest

from corral.apps.loader import asgi_kind


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

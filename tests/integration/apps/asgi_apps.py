"""Raw ASGI 3 applications for tests/integration/test_asgi.py (no framework).

``app`` answers by path: ``/scope`` (the scope as JSON, bytes as latin-1), ``/echo`` (the
body read with ``receive()``, each message's size and ``more_body`` in ``x-messages``),
``/stream`` (``?n=`` chunks, each its own ``http.response.body``), ``/big`` (``?mb=`` MiB in
64 KiB messages; once its last ``send()`` returned it prints ``big sent <mb> MiB`` on standard
error), ``/error`` (raises), ``/body-first``, ``/double-start``, ``/bad-status``,
``/crlf``, ``/not-a-message`` (protocol violations), ``/mapping-messages`` (messages that are
mappings but not dicts), ``/header-forms?form=`` (lists, or malformed),
``/after-start`` (raises once the head went out), ``/send-in-tasks`` (each message sent by
a task of its own: asyncio's ``create_task``, then anyio's ``start_soon``),
``/task-context`` (what a request sees of its task and context: JSON),
``/no-response`` (returns without answering), ``/wait-disconnect`` (streams one chunk, then
waits for ``http.disconnect`` and prints ``disconnect seen <path>`` on standard error),
``/pathsend?path=`` and ``/zerocopy?path=`` (the extensions, on a file), ``/trailers`` (two
trailer messages when the extension is offered; ``?bad=1``: a CR LF in the second's).

``both`` answers ``wsgi`` when called as WSGI and ``asgi`` as ASGI (a plain function
returning a coroutine: ``interface = auto`` takes it for WSGI).
"""

from __future__ import annotations

import json
import sys
from contextvars import ContextVar
from urllib.parse import parse_qs

_REQUEST_VAR: ContextVar[bytes] = ContextVar("request")


def _jsonable(value):
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    return value


async def _answer(send, status, body, headers=()):
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    path = scope["path"][len(scope["root_path"]) :]  # routed below the mount, as frameworks do
    query = parse_qs(scope["query_string"].decode())
    if path.startswith("/scope"):
        body = json.dumps(_jsonable(scope)).encode()
        await _answer(send, 200, body, [(b"content-type", b"application/json")])
    elif path == "/echo":
        messages, data = [], b""
        while True:
            message = await receive()
            assert message["type"] == "http.request", message
            data += message["body"]
            messages.append(f"{len(message['body'])}:{int(message['more_body'])}")
            if not message["more_body"]:
                break
        await _answer(send, 200, data, [(b"x-messages", ",".join(messages).encode())])
    elif path == "/stream":
        count = int(query.get("n", ["3"])[0])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for index in range(count):
            await send(
                {"type": "http.response.body", "body": b"part%d;" % index, "more_body": True}
            )
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif path == "/big":
        size = int(query.get("mb", ["8"])[0]) << 20
        block = bytes(range(256)) * 256  # 64 KiB
        length = str(size).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-length", length)]})  # fmt: skip
        for _ in range(size // len(block)):
            await send({"type": "http.response.body", "body": block, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        print(f"big sent {size >> 20} MiB", file=sys.stderr, flush=True)
    elif path == "/error":
        raise ValueError("boom from the ASGI app")
    elif path == "/body-first":
        await send({"type": "http.response.body", "body": b"oops"})
    elif path == "/mapping-messages":  # not plain dicts: a dict subclass, a read-only view
        from collections import OrderedDict
        from types import MappingProxyType

        await send(OrderedDict(type="http.response.start", status=200, headers=[]))
        await send(MappingProxyType({"type": "http.response.body", "body": b"mapped"}))
    elif path == "/not-a-message":
        await send([("type", "http.response.start"), ("status", 200)])
    elif path == "/double-start":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.start", "status": 200, "headers": []})
    elif path == "/bad-status":
        await _answer(send, "200", b"x")
    elif path == "/crlf":
        await _answer(send, 200, b"x", [(b"x-evil", b"a\r\nInjected: yes")])
    elif path == "/header-forms":
        headers = {
            "lists": [[b"x-form", b"lists"], (b"x-form", b"tuple")],
            "bytearray": [(bytearray(b"x-form"), b"v")],
            "str": [("x-form", "v")],
            "triple": [(b"x-form", b"v", b"w")],
            "not-pairs": 5,
        }[query["form"][0]]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})
    elif path == "/send-in-tasks":
        import asyncio

        import anyio

        await asyncio.create_task(send({"type": "http.response.start", "status": 200}))
        async with anyio.create_task_group() as group:
            group.start_soon(send, {"type": "http.response.body", "body": b"sent by tasks"})
    elif path == "/task-context":
        import asyncio

        import anyio

        seen = _REQUEST_VAR.get(None)  # set by an earlier request: it must not be
        _REQUEST_VAR.set(scope["query_string"])
        task = asyncio.current_task()
        with anyio.move_on_after(0.05) as scope_:  # cancels the current task: this request's
            await anyio.sleep(10)
        await asyncio.sleep(0)
        facts = {
            "seen": seen,
            "kept": _REQUEST_VAR.get(None).decode(),
            "task": task.get_name() if task is not None else None,
            "same_task": asyncio.current_task() is task,
            "cancelled": scope_.cancelled_caught,
        }
        await _answer(send, 200, json.dumps(facts).encode())
    elif path == "/after-start":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first;", "more_body": True})
        raise ValueError("boom after the head")
    elif path == "/no-response":
        return
    elif path == "/wait-disconnect":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"waiting;", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        print(f"disconnect seen {path}", file=sys.stderr, flush=True)
    elif path == "/pathsend":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
        await send({"type": "http.response.pathsend", "path": query["path"][0]})
    elif path == "/zerocopy":
        # the file's bytes 5.. in two parts of a streamed (chunked) answer, then a body
        with open(query["path"][0], "rb") as file:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.zerocopysend", "file": file, "offset": 5,
                        "count": 10, "more_body": True})  # fmt: skip
            await send({"type": "http.response.zerocopysend", "file": file, "offset": 15,
                        "more_body": True})  # fmt: skip
            await send({"type": "http.response.body", "body": b"[end]"})
    elif path == "/trailers":
        offered = "http.response.trailers" in scope["extensions"]
        await send({"type": "http.response.start", "status": 200, "headers": [],
                    "trailers": offered})  # fmt: skip
        await send({"type": "http.response.body", "body": b"body;", "more_body": True})
        await send({"type": "http.response.body", "body": b"done"})
        if offered:
            await send({"type": "http.response.trailers", "more_trailers": True,
                        "headers": [(b"x-checksum", b"abc")]})  # fmt: skip
            last = [(b"x-late", b"1")]
            if "bad" in query:
                last.insert(0, (b"x-bad", b"a\r\nInjected: 1"))
            await send({"type": "http.response.trailers", "headers": last})
    else:
        await _answer(send, 404, b"not found")


async def _both_asgi(scope, receive, send):
    await _answer(send, 200, b"asgi")


def both(first, second, third=None):
    if third is None:
        second("200 OK", [("Content-Type", "text/plain")])
        return [b"wsgi"]
    return _both_asgi(first, second, third)

"""Applications for test_slow_readers.py: a large answer yielded in chunks, and a small one.

- ``/answer?kib=N&chunk=K[&length=1]``: N KiB in chunks of K KiB (`answer_bytes`), chunked
  framing unless ``length`` (then a Content-Length); when the generator has given its last
  chunk the application counts it (``/done`` tells how many did).
- ``/done``: how many answers the application has given whole (its threads are free of them).
- ``/hello``: one small chunk.
"""

from __future__ import annotations

import threading
from urllib.parse import parse_qs

_done = 0
_lock = threading.Lock()


def answer_bytes(kib: int, chunk_kib: int) -> list[bytes]:
    """The chunks of ``/answer``: each line names its chunk and place, so that a byte out of
    order is seen (the test compares the whole answer with their join)."""
    chunks = []
    for index in range(kib // chunk_kib):
        line = f"{index:06d}-".encode()
        chunks.append((line * (chunk_kib * 1024 // len(line) + 1))[: chunk_kib * 1024])
    return chunks


def _answer(kib: int, chunk_kib: int):
    global _done
    yield from answer_bytes(kib, chunk_kib)
    with _lock:
        _done += 1


def application(environ, start_response):
    path = environ["PATH_INFO"]
    query = {key: values[0] for key, values in parse_qs(environ["QUERY_STRING"]).items()}
    if path == "/answer":
        kib, chunk_kib = int(query.get("kib", "1024")), int(query.get("chunk", "64"))
        headers = [("Content-Type", "application/octet-stream")]
        if "length" in query:
            headers.append(("Content-Length", str(kib // chunk_kib * chunk_kib * 1024)))
        start_response("200 OK", headers)
        return _answer(kib, chunk_kib)
    body = str(_done).encode() if path == "/done" else b"hello"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

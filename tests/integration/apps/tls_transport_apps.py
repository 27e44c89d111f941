"""Applications for corral's TLS transport (test_tls_transport.py): an answer that comes
late (after the client half-closed), a big one (flow control) and its digest."""

import hashlib
import time

BIG = bytes(range(256)) * 4096 * 8  # 8 MiB, in 1 MiB pieces
BIG_DIGEST = hashlib.sha256(BIG).hexdigest()


def wsgi(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/late":
        time.sleep(0.5)  # on a thread: the client's EOF or close_notify comes meanwhile
        body = b"late answer"
    elif path == "/big":
        start_response(
            "200 OK", [("Content-Type", "application/octet-stream"), ("X-Digest", BIG_DIGEST)]
        )
        return [BIG[start : start + (1 << 20)] for start in range(0, len(BIG), 1 << 20)]
    else:
        body = b"hello"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

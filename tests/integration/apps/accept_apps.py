"""For test_accept: answers the worker's pid, after sleeping ``?s=SECONDS`` (default 0)."""

import os
import time
from urllib.parse import parse_qs


def application(environ, start_response):
    seconds = parse_qs(environ.get("QUERY_STRING", "")).get("s", ["0"])[0]
    if float(seconds):
        time.sleep(float(seconds))
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

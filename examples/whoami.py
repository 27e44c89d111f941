"""Answers with what the server told the application, as JSON: the scheme, the host, the
client's address, and the worker's pid and user. ``?sleep=SECONDS`` answers that much later
(a slow request, to watch a graceful stop wait for it).

docs/migrating.md runs it behind nginx (is ``X-Forwarded-Proto`` trusted?) and as another user.
"""

import json
import os
import pwd
import time


def application(environ, start_response):
    query = environ.get("QUERY_STRING", "")
    if query.startswith("sleep="):
        time.sleep(float(query[len("sleep=") :]))
    report = {
        "url_scheme": environ["wsgi.url_scheme"],
        "host": environ.get("HTTP_HOST"),
        "remote_addr": environ.get("REMOTE_ADDR"),
        "pid": os.getpid(),
        "user": pwd.getpwuid(os.getuid()).pw_name,
    }
    body = json.dumps(report).encode() + b"\n"
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]

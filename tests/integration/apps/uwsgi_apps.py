"""What a request looked like to the application, for the uwsgi-protocol and nginx tests.

``application`` answers JSON: the request's CGI and WSGI keys (``environ``, strings only, and
``wsgi.url_scheme``), the body it read, and who served it (pid, ids, the virtualenv, the
settings module the ini's ``env`` named). ``/status/NNN`` answers that status; ``/stream``
answers a body of unknown length (a generator); every answer carries ``X-App: uwsgi-apps`` and
a cookie. Imported from a copy by test_nginx_uwsgi.py, so it needs nothing but the stdlib.
"""

import json
import os
import sys
import time


def _ids():
    return {"uid": os.getuid(), "gid": os.getgid()}


IMPORTED_WITH = _ids()


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    body = environ["wsgi.input"].read()
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-App", "uwsgi-apps")])
        return (f"chunk {i}\n".encode() for i in range(5))
    if path == "/slow":
        time.sleep(float(environ.get("QUERY_STRING") or 1))
    status = "200 OK"
    if path.startswith("/status/"):
        code = path.rsplit("/", 1)[1]
        status = f"{code} {'Teapot' if code == '418' else 'Status'}"
    report = {
        "environ": {k: v for k, v in environ.items() if isinstance(v, str)},
        "scheme": environ["wsgi.url_scheme"],
        "multithread": environ["wsgi.multithread"],
        "body": body.decode("latin-1"),
        "pid": os.getpid(),
        "imported": IMPORTED_WITH,
        "serving": _ids(),
        "prefix": sys.prefix,
        "settings_module": os.environ.get("DJANGO_SETTINGS_MODULE"),
    }
    data = json.dumps(report, sort_keys=True).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(data))),
        ("X-App", "uwsgi-apps"),
        ("Set-Cookie", "session=abc; Path=/; HttpOnly"),
    ]
    start_response(status, headers)
    return [data]

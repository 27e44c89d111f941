"""A WSGI application that says which interpreter runs it (tests/integration/test_interpreters.py).

A path ending in ``/sleep?s=N`` blocks its worker for N seconds (the timeout test); any other
path answers JSON: the application's name (``INTERP_APP``), the interpreter's version and
executable, the prefix, where corral was imported from, and the worker's pid and parent's.
"""

import json
import os
import sys
import time

import corral


def application(environ, start_response):
    if environ["PATH_INFO"].endswith("/sleep"):
        time.sleep(float(environ["QUERY_STRING"].partition("s=")[2] or 30))
    body = json.dumps(
        {
            "app": os.environ.get("INTERP_APP", ""),
            "version": list(sys.version_info[:2]),
            "executable": sys.executable,
            "prefix": sys.prefix,
            "corral": corral.__file__,
            "pid": os.getpid(),
            "ppid": os.getppid(),
        }
    ).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]

"""Reports the ids it was imported with and is served with, and where it and corral came from.

Served by test_privileges.py from a copy in a directory the unprivileged user can read.
"""

import json
import os
import sys

import corral


def _ids() -> dict[str, object]:
    return {
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "gid": os.getgid(),
        "egid": os.getegid(),
        "groups": sorted(set(os.getgroups())),
    }


IMPORTED_WITH = _ids()  # taken at import time: the worker must have dropped privileges already


def application(environ, start_response):
    body = json.dumps(
        {
            "imported": IMPORTED_WITH,
            "serving": _ids(),
            "pid": os.getpid(),
            "app_file": __file__,
            "corral_file": corral.__file__,
            "prefix": sys.prefix,
        }
    ).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]

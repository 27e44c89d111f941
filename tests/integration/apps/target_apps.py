"""Callables for the NGINX Unit `targets` and `prefix` tests: each answers JSON naming itself,
its process and the environ's SCRIPT_NAME and PATH_INFO."""

import json
import os


def _app(name: str):
    def application(environ, start_response):
        body = json.dumps(
            {
                "target": name,
                "pid": os.getpid(),
                "script_name": environ["SCRIPT_NAME"],
                "path_info": environ["PATH_INFO"],
            }
        ).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    return application


first = _app("first")
second = _app("second")
other = _app("other")

"""Applications for the `forwarded` and `discard_unsafe_fields` tests: each answers JSON with
what the server put in the environ about the client (``REMOTE_ADDR``, ``REMOTE_PORT`` or
null, ``wsgi.url_scheme``), every ``HTTP_*`` key, and which application answered."""

import json


def _app(name: str):
    def application(environ, start_response):
        body = json.dumps(
            {
                "app": name,
                "remote_addr": environ.get("REMOTE_ADDR"),
                "remote_port": environ.get("REMOTE_PORT"),
                "scheme": environ["wsgi.url_scheme"],
                "headers": {k: v for k, v in environ.items() if k.startswith("HTTP_")},
            }
        ).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    return application


application = _app("a")
app_b = _app("b")

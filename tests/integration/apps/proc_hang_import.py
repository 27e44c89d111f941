"""An application whose import never ends (a database that does not answer, say): its
workers never say ready, which ``startup_timeout`` bounds."""

import time

time.sleep(3600)


def application(environ, start_response):  # pragma: no cover - never imported whole
    start_response("200 OK", [("Content-Length", "0")])
    return [b""]

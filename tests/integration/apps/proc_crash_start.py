"""An application whose import kills the process when ``PROC_CRASH`` is ``1``.

The master never imports the application (no ``--preload``), so only the workers die, each
one at start-up, before it reports ready: the master must back off, not spin.
"""

import os

if os.environ.get("PROC_CRASH") == "1":
    os._exit(1)


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]

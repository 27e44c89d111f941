"""A preloaded application holding about 100 MiB of small containers, for the test that its
workers share them with the master (tests/integration/test_worker.py)."""

import gc

HEAP = [[n] for n in range(1_000_000)]


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(gc.get_freeze_count()).encode()]

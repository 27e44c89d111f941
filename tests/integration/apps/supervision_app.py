"""The application of the supervision tests: chaos_app's answers, plus ways to hurt a worker.

Every answer that comes back is chaos_app's (``X-Worker-Pid: PID``, body ``PID N``), so
:class:`~tests.integration.load.Load` can tell the workers apart. Routes besides chaos_app's:

- ``/alloc?mb=N``: allocates N MiB, touches every page (so it counts in the RSS) and keeps
  it until the process exits, then answers.
- ``/segv``: reads address 0 through ctypes: the worker dies of SIGSEGV, nothing answers.
- ``/raise``: raises, so the worker writes a traceback to the error log (and answers 500).
"""

import ctypes

from chaos_app import application as chaos_application

_kept: list[bytearray] = []


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/alloc":
        megabytes = int(environ.get("QUERY_STRING", "mb=1").partition("=")[2])
        # bytearray(n) is calloc'ed: pages stay shared zero pages until written
        block = bytearray(megabytes << 20)
        for offset in range(0, len(block), 4096):
            block[offset] = 1
        _kept.append(block)
    elif path == "/segv":
        ctypes.string_at(0)
    elif path == "/raise":
        raise RuntimeError("supervision_app: /raise")
    return chaos_application(environ, start_response)

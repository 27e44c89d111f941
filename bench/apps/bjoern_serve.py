"""Serve a WSGI app with bjoern, which has no command line of its own.

bjoern (a C WSGI server on libev) is started only from Python, with
bjoern.run(app, host, port); run.py needs a command to start, so this is it:

    python bench/apps/bjoern_serve.py --host 127.0.0.1 --port 8000 hello:application
"""

import argparse
import contextlib
import importlib

import bjoern


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("app", help="the WSGI app as module:callable")
    args = parser.parse_args()
    module_name, _, callable_name = args.app.partition(":")
    application = getattr(importlib.import_module(module_name), callable_name)
    with contextlib.suppress(KeyboardInterrupt):  # SIGINT is how run.py stops it
        bjoern.run(application, args.host, args.port)


if __name__ == "__main__":
    main()

"""An HTTP server that binds the address it is given: `binds.py port N` (or PORT from the
environment with `binds.py env`) or `binds.py unix PATH`; `--ignore-term` makes it ignore
SIGTERM, `--slow-start S` waits S seconds before it binds, `--crash-after S` exits 3 S seconds
after it serves."""

import http.server
import json
import os
import signal
import socketserver
import sys
import threading
import time

args = sys.argv[1:]
if "--ignore-term" in args:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
if "--slow-start" in args:
    time.sleep(float(args[args.index("--slow-start") + 1]))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = json.dumps({"pid": os.getpid(), "path": self.path, "argv": sys.argv[1:]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Unix(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    def get_request(self):  # BaseHTTPRequestHandler wants a (host, port) client address
        request, _ = super().get_request()
        return request, ("unix", 0)


if args[0] == "unix":
    server = Unix(args[1], Handler)
else:
    port = int(os.environ["PORT"]) if args[0] == "env" else int(args[1])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
if "--crash-after" in args:
    delay = float(args[args.index("--crash-after") + 1])
    threading.Timer(delay, lambda: os._exit(3)).start()
print("serving", args, flush=True)
server.serve_forever()

"""A threaded HTTP server (a kept-alive connection does not hold it) that takes its socket the
systemd way (LISTEN_FDS, LISTEN_PID, fd 3) and answers what it was handed: for the external
application tests."""

import http.server
import json
import os
import signal
import socket
import sys

assert os.environ.get("LISTEN_PID") == str(os.getpid()), "LISTEN_PID is not this process"
assert os.environ.get("LISTEN_FDS") == "1", "LISTEN_FDS is not 1"
listening = socket.socket(fileno=3)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = json.dumps(
            {
                "pid": os.getpid(),
                "path": self.path,
                "argv": sys.argv[1:],
                "cwd": os.getcwd(),
                "env": {
                    k: v for k, v in os.environ.items() if k.startswith(("LISTEN_", "PORT", "APP_"))
                },
                "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        print("request", self.path, flush=True)


class Server(http.server.ThreadingHTTPServer):
    def server_bind(self) -> None:  # the socket is bound already: corral did it
        self.server_address = self.socket.getsockname()


server = Server(("127.0.0.1", 0), Handler, bind_and_activate=False)
server.socket.close()
server.socket = listening
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("serving on fd 3", flush=True)
server.serve_forever()

"""The server starts, answers, and stops on TERM."""

import http.client
import json

from tests.integration.server import Server


def test_hello_and_environ():
    with Server("basic") as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        conn.request("GET", "/")
        response = conn.getresponse()
        assert response.status == 200
        assert response.read() == b"Hello, world!"
        conn.request("GET", "/environ?a=1", headers={"X-Thing": "v"})
        response = conn.getresponse()
        environ = json.loads(response.read())
        assert environ["PATH_INFO"] == "/environ"
        assert environ["QUERY_STRING"] == "a=1"
        assert environ["HTTP_X_THING"] == "v"
        conn.close()
        assert server.stop() == 0

"""A second example application: answers with the method and path it was given.

The control API's worked session (docs/control-api.md) runs it beside examples.hello.
"""


def application(environ, start_response):
    body = f"echo: {environ['REQUEST_METHOD']} {environ['PATH_INFO']}\n".encode("latin-1")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]

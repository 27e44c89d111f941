"""The WSGI (PEP 3333) adapter: environ, input streams, the response cycle, runners."""

"""Sans-IO HTTP/1.1: bytes in, request heads and body events out, response bytes back.

Nothing in this package imports asyncio, touches a socket, reads a clock or calls
an application. The connection layer feeds it bytes and writes what it returns.
"""

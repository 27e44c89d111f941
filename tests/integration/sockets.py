"""What the kernel knows of a test's TCP connection to a server: the bytes still queued.

A test that must show a server *stopped reading* (backpressure, a paused transport) cannot
learn it from the answers alone: a request that is read and queued is answered as late as one
that is left in the socket. The kernel can tell them apart. For each TCP socket of this network
namespace ``/proc/net/tcp`` (``tcp6`` for IPv6) gives its send queue (bytes written and not yet
acknowledged by the peer) and its receive queue (bytes arrived and not yet read by the process
that holds the socket). For a client socket ``sock`` connected to a server on loopback:

- ``sent_not_acked(sock)``: what the client wrote that has not reached the server's socket;
- ``unread_by_server(sock)``: the client's bytes the server process has not read, wherever
  they wait (the client's send queue plus the server socket's receive queue).

A server that has read everything it was sent shows 0; one that stopped reading shows what
waits, and the count does not go down while its loop goes on serving others.
"""

from __future__ import annotations

import socket
from typing import NamedTuple


class Queues(NamedTuple):
    send: int  # written, not acknowledged by the peer
    receive: int  # arrived, not read by the socket's process


def _hex_address(address: tuple[str, int], family: int) -> str:
    """An address as /proc/net/tcp writes it: the IP's bytes as host-order words, the port."""
    host, port = address[0], address[1]
    packed = socket.inet_pton(family, host)
    words = [packed[i : i + 4][::-1] for i in range(0, len(packed), 4)]  # little-endian hosts
    return "".join(word.hex().upper() for word in words) + f":{port:04X}"


def queues(local: tuple[str, int], remote: tuple[str, int], family: int) -> Queues | None:
    """The queues of the socket bound to ``local`` and connected to ``remote``; None when
    there is no such socket (closed, or not in this network namespace)."""
    table = "/proc/net/tcp6" if family == socket.AF_INET6 else "/proc/net/tcp"
    wanted = (_hex_address(local, family), _hex_address(remote, family))
    with open(table) as stream:
        next(stream)  # the column titles
        for line in stream:
            fields = line.split()
            if (fields[1], fields[2]) == wanted:
                send, receive = fields[4].split(":")
                return Queues(int(send, 16), int(receive, 16))
    return None


def sent_not_acked(sock: socket.socket) -> int:
    """Bytes ``sock`` was given that the peer has not acknowledged (its send queue)."""
    found = queues(sock.getsockname(), sock.getpeername(), sock.family)
    assert found is not None, "the client socket is not in /proc/net/tcp"
    return found.send


def unread_by_server(sock: socket.socket) -> int:
    """Bytes written to client socket ``sock`` that the server has not read yet: still in the
    client's send queue, or in the receive queue of the server's socket for the connection."""
    client = queues(sock.getsockname(), sock.getpeername(), sock.family)
    server = queues(sock.getpeername(), sock.getsockname(), sock.family)
    assert client is not None and server is not None, "the connection is not in /proc/net/tcp"
    return client.send + server.receive

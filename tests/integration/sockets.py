"""What the kernel knows of a test's TCP connections to a server: states and queued bytes.

A test that must show a server *stopped reading* (backpressure, a paused transport) cannot
learn it from the answers alone: a request that is read and queued is answered as late as one
that is left in the socket. The kernel can tell them apart. For each TCP socket of this network
namespace ``/proc/net/tcp`` (``tcp6`` for IPv6) gives its state, its send queue (bytes written
and not yet acknowledged by the peer) and its receive queue (bytes arrived and not yet read by
the process that holds the socket). For a client socket ``sock`` connected to a server on
loopback:

- ``unread_by_server(sock)``: the client's bytes the server process has not read, wherever
  they wait (the client's send queue plus the server socket's receive queue). A server that
  read everything it was sent shows 0; one that stopped reading shows what waits, and the
  count does not go down while its loop goes on serving others;
- ``server_side(sock)``: the server's socket, whose send queue holds what the server wrote
  and the client has not taken in;
- ``closed_by_server(...)``: whether the server's process closed its end (its socket is gone,
  or in a state past it: the kernel may still hold unsent bytes of a closed socket).

And for every connection a server accepted on a port (``accepted``): a client's close (its FIN)
counts as one byte in the server socket's receive queue until the server reads it, so
``closes_seen(port)`` tells when the server has seen every client leave, and ``held(port)``
how many connections it still holds open.

One socket is looked up by its addresses with the kernel's socket diagnostics (a netlink
query, as ``ss`` makes: some 15 us); a listing by port reads ``/proc/net/tcp``, which walks the
whole connection table (some 15 ms on the shared development machine).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from typing import NamedTuple

from tests.integration.server import wait_for

ESTABLISHED = 0x01
CLOSE_WAIT = 0x08  # the peer closed; the socket's process has not closed its end yet
LISTEN = 0x0A
OPEN = (ESTABLISHED, CLOSE_WAIT)  # the states in which the process has not closed its end

Address = tuple[str, int]


class Entry(NamedTuple):
    state: int  # ESTABLISHED, CLOSE_WAIT, ... (the kernel's TCP states)
    send: int  # written, not acknowledged by the peer
    receive: int  # arrived, not read by the socket's process


def _hex_address(address: Address, family: int) -> str:
    """An address as /proc/net/tcp writes it: the IP's bytes as host-order words, the port."""
    packed = socket.inet_pton(family, address[0])
    words = [packed[i : i + 4][::-1] for i in range(0, len(packed), 4)]  # little-endian hosts
    return "".join(word.hex().upper() for word in words) + f":{address[1]:04X}"


def _entries(family: int) -> Iterable[tuple[str, str, Entry]]:
    """(local, remote, entry) of every TCP socket of the family, as /proc lists them."""
    table = "/proc/net/tcp6" if family == socket.AF_INET6 else "/proc/net/tcp"
    with open(table) as stream:
        next(stream)  # the column titles
        for line in stream:
            fields = line.split()
            send, receive = fields[4].split(":")
            yield fields[1], fields[2], Entry(int(fields[3], 16), int(send, 16), int(receive, 16))


# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
_SOCKET_ID = struct.Struct("!HH16s16s")  # ports, addresses (then interface, cookie: host order)
_MESSAGE = struct.Struct("=BBBB")  # inet_diag_msg: family, state, timer, retransmits
_QUEUES = struct.Struct("=III")  # after the socket id: expires, receive queue, send queue


def find(local: Address, remote: Address, family: int = socket.AF_INET) -> Entry | None:
    """The socket bound to ``local`` and connected to ``remote``; None when there is none
    (closed and gone, or not in this network namespace)."""
    wanted = _SOCKET_ID.pack(
        local[1],
        remote[1],
        socket.inet_pton(family, local[0]).ljust(16, b"\0"),
        socket.inet_pton(family, remote[0]).ljust(16, b"\0"),
    )
    # inet_diag_req_v2: the family, TCP, no extensions, every state, then the socket's id
    request = struct.pack("=BBBxI", family, socket.IPPROTO_TCP, 0, 0xFFFFFFFF)
    request += wanted + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
    header = _HEADER.pack(_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as netlink:
        netlink.sendall(header + request)
        answer = netlink.recv(65536)
    if _HEADER.unpack_from(answer)[1] == _NLMSG_ERROR:
        return None  # ENOENT: no such socket
    offset = _HEADER.size
    state = _MESSAGE.unpack_from(answer, offset)[1]
    offset += _MESSAGE.size
    if answer[offset : offset + _SOCKET_ID.size] != wanted:
        return None  # the lookup falls back to a listener of the local address
    offset += _SOCKET_ID.size + 12  # the interface and the cookie
    _, receive, send = _QUEUES.unpack_from(answer, offset)
    return Entry(state, send, receive)


def server_side(sock: socket.socket) -> Entry:
    """The server's socket for client socket ``sock``'s connection."""
    found = find(sock.getpeername(), sock.getsockname(), sock.family)
    assert found is not None, "the server's socket is not in /proc/net/tcp"
    return found


def unread_by_server(sock: socket.socket) -> int:
    """Bytes written to client socket ``sock`` that the server has not read yet: still in the
    client's send queue, or in the receive queue of the server's socket for the connection."""
    client = find(sock.getsockname(), sock.getpeername(), sock.family)
    assert client is not None, "the client's socket is not in /proc/net/tcp"
    return client.send + server_side(sock).receive


def closed_by_server(client: Address, server: Address, family: int = socket.AF_INET) -> bool:
    """Whether the server closed its end of the connection from ``client`` to ``server``
    (addresses, not the socket: a reset client socket no longer has a peer name)."""
    found = find(server, client, family)
    return found is None or found.state not in OPEN


def send_each_in_its_own_read(sock: socket.socket, pieces: Iterable[bytes]) -> None:
    """Send each piece once the server has read the one before: the server's reads see the
    pieces one by one, however loaded the machine (a pause between sends does not ensure it)."""
    for index, piece in enumerate(pieces):
        if index:
            wait_for(lambda: unread_by_server(sock) == 0, interval=0.001)
        sock.sendall(piece)


def accepted(port: int, host: str = "127.0.0.1") -> list[Entry]:
    """The server side of each TCP connection on ``host``:``port`` (IPv4), listener aside."""
    local = _hex_address((host, port), socket.AF_INET)
    return [
        entry
        for here, _, entry in _entries(socket.AF_INET)
        if here == local and entry.state != LISTEN
    ]


def closes_seen(port: int, host: str = "127.0.0.1") -> bool:
    """Whether the server read the close of every client that was connected to it: none is
    still established, and none whose client closed has its FIN (or bytes) unread."""
    return all(
        entry.state != ESTABLISHED and not (entry.state == CLOSE_WAIT and entry.receive)
        for entry in accepted(port, host)
    )


def held(port: int, host: str = "127.0.0.1") -> int:
    """How many connections on the port the server still holds open (its end not closed)."""
    return sum(entry.state in OPEN for entry in accepted(port, host))

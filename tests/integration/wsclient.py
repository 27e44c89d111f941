"""A WebSocket client of the tests' own, frame by frame (RFC 6455 5.2), for what a real
client would never send: reserved bits and opcodes, bad fragments, invalid UTF-8, bad close
frames, unanswered pings. Where a well-behaved client is enough, the tests use the
``websockets`` library's."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA

# every connection opened, for `close_all` after each test
OPEN: list[WebSocket] = []


def accept_key(key: bytes) -> bytes:
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def frame(opcode: int, payload: bytes = b"", fin: bool = True, rsv: int = 0) -> bytes:
    """One masked frame, as a client sends it."""
    first = (0x80 if fin else 0) | (rsv << 4) | opcode
    length = len(payload)
    if length < 126:
        head = struct.pack("!BB", first, 0x80 | length)
    elif length < 65536:
        head = struct.pack("!BBH", first, 0x80 | 126, length)
    else:
        head = struct.pack("!BBQ", first, 0x80 | 127, length)
    mask = os.urandom(4)
    return head + mask + masked(payload, mask)


def masked(payload: bytes, mask: bytes) -> bytes:
    """``payload`` XOR the repeated 4-byte ``mask`` (RFC 6455 5.3), as one big-int XOR: fast
    enough for the 16 MiB messages of Autobahn's section 9."""
    size = len(payload)
    if not size:
        return b""
    key = (mask * (size // 4 + 1))[:size]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(size, "big")


def close_frame(code: int | None = 1000, reason: bytes = b"") -> bytes:
    return frame(CLOSE, b"" if code is None else struct.pack("!H", code) + reason)


class WebSocket:
    """A connection after a handshake: ``status``, ``headers`` (names lower-cased)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        OPEN.append(self)
        self.buffer = bytearray()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""

    def _more(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("connection closed")
        self.buffer += data

    def _take(self, count: int) -> bytes:
        while len(self.buffer) < count:
            self._more()
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    def handshake(self, request: bytes) -> None:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, rest = self.buffer.split(b"\r\n\r\n", 1)
        self.buffer = bytearray(rest)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def read_body(self) -> bytes:
        """The rest of a refused handshake's answer, to the close."""
        while True:
            try:
                self._more()
            except (EOFError, ConnectionResetError):
                return bytes(self.buffer)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> tuple[bool, int, int, bytes]:
        """``(fin, rsv, opcode, payload)`` of the next frame from the server (unmasked)."""
        first, second = self._take(2)
        assert not second & 0x80, "a server's frame must not be masked (RFC 6455 5.1)"
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._take(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._take(8))
        return bool(first & 0x80), (first >> 4) & 7, first & 0x0F, self._take(length)

    def read_message(self) -> tuple[int, bytes]:
        """The next data or close frame's ``(opcode, payload)``, pings and pongs skipped."""
        while True:
            _, _, opcode, payload = self.read_frame()
            if opcode not in (PING, PONG):
                return opcode, payload

    def read_close(self) -> tuple[int, str]:
        """The server's close frame (skipping what comes before): ``(code, reason)``, and
        then the server closes the TCP connection."""
        while True:
            opcode, payload = self.read_message()
            if opcode == CLOSE:
                break
        code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
        return code, payload[2:].decode("utf-8")

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """The server closed the TCP connection (EOF, or a reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                self._more()
        except (EOFError, ConnectionResetError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def close_all() -> None:
    while OPEN:
        OPEN.pop().close()


def handshake_request(
    path: str = "/echo", key: bytes | None = None, extra: bytes = b"", version: bytes = b"13"
) -> tuple[bytes, bytes]:
    """``(request, key)`` of a client handshake (RFC 6455 4.1)."""
    key = key if key is not None else base64.b64encode(os.urandom(16))
    request = (
        b"GET %s HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: %s\r\n%s\r\n"
        % (path.encode(), key, version, extra)
    )
    return request, key


def open_socket(address: tuple[str, int]) -> WebSocket:
    """A TCP connection to the server, before any handshake."""
    return WebSocket(socket.create_connection(address, timeout=10))


def connect(address: tuple[str, int], path: str = "/echo", extra: bytes = b"") -> WebSocket:
    """Open a WebSocket (handshake without extensions) and check the 101."""
    ws = open_socket(address)
    request, key = handshake_request(path, extra=extra)
    ws.handshake(request)
    assert ws.status == 101, (ws.status, ws.headers)
    assert ws.headers["sec-websocket-accept"] == accept_key(key).decode()
    return ws

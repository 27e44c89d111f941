"""The PROXY protocol header (HAProxy's, versions 1 and 2), parsed sans I/O: bytes in, the
client it names (or none) and the bytes after it out.

A proxy that speaks it (HAProxy ``send-proxy``/``send-proxy-v2``, nginx ``proxy_protocol on``
in a stream block, AWS and GCP network balancers, stunnel ``protocol = proxy``) writes one
header at the start of each connection, before any byte of the client's: who the client is,
since the connection's own peer is the proxy. The rules kept here (the specification,
haproxy.org/download/2.9/doc/proxy-protocol.txt):

- version 1 is one line of at most 107 bytes, CRLF included: ``PROXY TCP4|TCP6 SRC DST
  SRCPORT DSTPORT`` (single spaces, addresses of the family named, decimal ports 0-65535), or
  ``PROXY UNKNOWN`` followed by anything up to the CRLF: the proxy cannot say, the
  connection's own peer stays;
- version 2 is a 16-byte block (a 12-byte signature, version 2 and the command, family and
  transport, the length of what follows) and the addresses (12 bytes for IPv4, 36 for IPv6,
  216 for unix), then TLVs, which are skipped. ``LOCAL`` (the proxy's own health checks),
  the ``UNSPEC`` family or transport and the unix family keep the connection's peer; a
  datagram transport, an unknown version, command, family or transport, or addresses longer
  than the block that holds them, are refused;
- the header must be the first bytes: anything else (a plain HTTP request, a header of a
  version the listener does not take, a line longer than 107 bytes) is refused. The receiver
  never guesses whether a header is there: that would let any client that reaches the
  listener name its own address.

Every refusal is a :class:`ProxyHeaderError`; the caller closes the connection without an
answer (see ``corral.server.proxied``). Memory is bounded by the protocol: 107 bytes for version 1,
16 + 65535 for version 2 (its length field).
"""

from __future__ import annotations

import socket
import struct

V1_MAX = 107  # the longest version 1 line, CRLF included
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V2_FIXED = 16  # signature, version and command, family and transport, length
_V2_HEAD = struct.Struct(">BBH")
_V1_PREFIX = b"PROXY "
_LOCAL, _PROXY = 0, 1
_UNSPEC, _INET, _INET6, _UNIX = 0, 1, 2, 3
_STREAM, _DGRAM = 1, 2
_ADDRESS_SIZES = {_INET: 12, _INET6: 36, _UNIX: 216}
_V1_FAMILIES = {b"TCP4": socket.AF_INET, b"TCP6": socket.AF_INET6}


class ProxyHeaderError(ValueError):
    """The connection does not start with a PROXY header this listener takes."""


class ProxyHeaderParser:
    """Reads one PROXY header from the first bytes of a connection.

    ``feed`` returns None while the header is incomplete, then the bytes that followed it (the
    client's, maybe ``b""``); ``client`` is then the ``(address, port)`` the header names, or
    None when the connection's own peer stays (v1 ``UNKNOWN``, v2 ``LOCAL``, ``UNSPEC`` or
    unix). ``version`` is 1 or 2 once known.
    """

    __slots__ = ("_buffer", "_v1", "_v2", "client", "version")

    def __init__(self, v1: bool = True, v2: bool = True) -> None:
        self._v1 = v1
        self._v2 = v2
        self._buffer = bytearray()  # appended to: a header fed byte by byte costs linear time
        self.client: tuple[str, int] | None = None
        self.version = 0

    def feed(self, data: bytes) -> bytes | None:
        buffer = self._buffer
        buffer += data
        if not self.version:
            if self._v2 and V2_SIGNATURE.startswith(buffer[:12]):
                self.version = 2 if len(buffer) >= 12 else 0
            elif self._v1 and _V1_PREFIX.startswith(buffer[:6]):
                self.version = 1 if len(buffer) >= 6 else 0
            else:
                raise ProxyHeaderError(f"no PROXY protocol header: {bytes(buffer[:16])!r}")
            if not self.version:
                return None
        return self._v1_line(buffer) if self.version == 1 else self._v2_block(buffer)

    # -- version 1 ------------------------------------------------------------------------------

    def _v1_line(self, buffer: bytearray) -> bytes | None:
        end = buffer.find(b"\r\n", 0, V1_MAX)
        if end < 0:
            if len(buffer) >= V1_MAX:
                raise ProxyHeaderError(f"PROXY v1 line longer than {V1_MAX} bytes")
            if b"\n" in buffer:
                raise ProxyHeaderError("PROXY v1 line not ended by CRLF")
            return None
        line = bytes(buffer[:end])
        parts = line.split(b" ")
        if parts[1:2] == [b"UNKNOWN"]:
            self.client = None  # the rest of the line is to be ignored
        elif len(parts) != 6 or parts[1] not in _V1_FAMILIES:
            raise ProxyHeaderError(f"invalid PROXY v1 line: {line[:V1_MAX]!r}")
        else:
            family = _V1_FAMILIES[parts[1]]
            source = _v1_address(family, parts[2])
            _v1_address(family, parts[3])
            port = _v1_port(parts[4])
            _v1_port(parts[5])
            self.client = (source, port)
        return bytes(buffer[end + 2 :])

    # -- version 2 ------------------------------------------------------------------------------

    def _v2_block(self, buffer: bytearray) -> bytes | None:
        if len(buffer) < V2_FIXED:
            return None
        version_command, family_transport, length = _V2_HEAD.unpack_from(buffer, 12)
        if version_command >> 4 != 2:
            raise ProxyHeaderError(f"PROXY v2 header of version {version_command >> 4}")
        command = version_command & 0x0F
        family, transport = family_transport >> 4, family_transport & 0x0F
        if command not in (_LOCAL, _PROXY):
            raise ProxyHeaderError(f"PROXY v2 header with unknown command {command}")
        if family > _UNIX or transport > _DGRAM:
            raise ProxyHeaderError(f"PROXY v2 header with unknown family {family_transport:#x}")
        end = V2_FIXED + length
        if len(buffer) < end:
            return None
        rest = bytes(buffer[end:])
        if command == _LOCAL:
            self.client = None  # the proxy's own connection: its addresses are to be ignored
            return rest
        if transport == _DGRAM:
            raise ProxyHeaderError("PROXY v2 header for a datagram transport")
        size = _ADDRESS_SIZES.get(family, 0)
        if length < size:
            raise ProxyHeaderError(f"PROXY v2 addresses cut short ({length} of {size} bytes)")
        if transport == _UNSPEC or family in (_UNSPEC, _UNIX):
            self.client = None  # nothing an IP environ could say: the socket's peer stays
            return rest
        block = bytes(buffer[V2_FIXED:end])
        if family == _INET:
            address = socket.inet_ntop(socket.AF_INET, block[0:4])
            (port,) = struct.unpack_from(">H", block, 8)
        else:
            address = socket.inet_ntop(socket.AF_INET6, block[0:16])
            (port,) = struct.unpack_from(">H", block, 32)
        self.client = (address, port)
        return rest


def _v1_address(family: int, text: bytes) -> str:
    try:
        value = text.decode("ascii")
        socket.inet_pton(family, value)
    except (UnicodeDecodeError, OSError):
        raise ProxyHeaderError(f"invalid address in a PROXY v1 line: {text[:64]!r}") from None
    return value


def _v1_port(text: bytes) -> int:
    if not (text.isdigit() and len(text) <= 5) or int(text) > 65535:
        raise ProxyHeaderError(f"invalid port in a PROXY v1 line: {text[:16]!r}")
    return int(text)


__all__ = ["V1_MAX", "V2_SIGNATURE", "ProxyHeaderError", "ProxyHeaderParser"]

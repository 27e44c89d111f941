"""The Autobahn test suite's cases against corral's WebSocket, case for case (issue 11, point 4).

Autobahn|Testsuite checks a server as an echo server: each case opens a connection to the
echo application, sends what the case says (frames whole, one by one with a pause, or cut
into small TCP writes), and expects either the echo (of every data message; a pong for every
ping) followed by a clean close, or the server failing the connection: a close frame with the
code RFC 6455 gives (1002 protocol error, 1007 invalid UTF-8) and the TCP connection closed.
Where Autobahn accepts a server that fails early or late ("non-strict"), so does this: the
data messages that arrive before a failure must be a prefix of the expected echoes. Each test
is named after the case it reproduces (``test_case[6.20.3]``); the sections are 1 framing,
2 pings and pongs, 3 reserved bits, 4 opcodes, 5 fragmentation, 6 UTF-8, 7 closing, 9 sizes
(up to the 16 MiB ``ws_max_size``), 10 auto-fragmentation, 12 compression of payloads of
several kinds and sizes, 13 compression with each offer of RFC 7692's parameters.

Written from the cases' descriptions, not from Autobahn's code. The frames come from the
tests' own client (tests/integration/wsclient.py); sections 12 and 13, which need
permessage-deflate on the client's side too, use the ``websockets`` library's client. Two
differences of scale: 12 and 13 send 20 messages per case where Autobahn sends 1,000 (it
measures speed there; the round trip is what is checked here), and 13's 8-bit windows are 9
bits, because zlib's raw deflate has no 8-bit window (RFC 7692 7.1.2.1 lets a client say 8,
and 9 is what zlib then uses).

Every case runs on each request core (the handshake is the HTTP connection's).
"""

from __future__ import annotations

import json
import random
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.sync.client import connect as ws_connect

from tests.integration import wsclient
from tests.integration.server import Server
from tests.integration.wsclient import BINARY, CLOSE, CONT, PING, PONG, TEXT, frame

PAUSE = 0.01  # between frames sent one by one, or between small writes


pytestmark = pytest.mark.usefixtures("each_core")


@pytest.fixture(scope="module")
def server(each_core):
    with Server("websocket_apps:app") as running:
        yield running


@pytest.fixture(autouse=True)
def _close_sockets():
    yield
    wsclient.close_all()


# -- what a case is -------------------------------------------------------------------------------


@dataclass
class Send:
    """Frames to send: at once, ``one_by_one`` (a pause between frames), or cut into writes
    of ``chop`` bytes (a pause between writes)."""

    frames: list[bytes]
    one_by_one: bool = False
    chop: int = 0


@dataclass
class Case:
    """``steps``: `Send`s, in order. ``expect``: the frames the server must answer with,
    ``(opcode, payload)``. ``fail``: the close code of a server that must fail the
    connection; ``closes``: the case sends a close itself, and this is the code the server's
    close must carry (0: an empty close). In both, the server's close may overtake echoes
    the application had not sent yet (RFC 6455 5.5.1: the close goes "as soon as
    practical"), so the echoes before it must be a prefix of ``expect``. Otherwise the
    echoes are exact, and the case ends with a clean close."""

    steps: list[Send]
    expect: list[tuple[int, bytes]] = field(default_factory=list)
    fail: int | None = None
    closes: int | None = None


CASES: dict[str, Case] = {}


def case(number: str, *steps: Send, expect=(), fail=None, closes=None) -> None:
    assert number not in CASES, number
    CASES[number] = Case(list(steps), list(expect), fail, closes)


def at_once(*frames: bytes) -> Send:
    return Send(list(frames))


def one_by_one(*frames: bytes) -> Send:
    return Send(list(frames), one_by_one=True)


def chopped(*frames: bytes, size: int = 1) -> Send:
    return Send(list(frames), chop=size)


def fragments(opcode: int, payload: bytes, size: int) -> list[bytes]:
    """``payload`` as one message in frames of ``size`` bytes (the first of ``opcode``)."""
    pieces = [payload[i : i + size] for i in range(0, len(payload), size)] or [b""]
    last = len(pieces) - 1
    return [
        frame(opcode if i == 0 else CONT, piece, fin=i == last) for i, piece in enumerate(pieces)
    ]


def close_payload(code: int, reason: bytes = b"") -> bytes:
    return struct.pack("!H", code) + reason


# -- 1: framing -----------------------------------------------------------------------------------

SIZES_1 = [0, 125, 126, 127, 128, 65535, 65536]
for index, size in enumerate(SIZES_1, 1):
    case(f"1.1.{index}", at_once(frame(TEXT, b"*" * size)), expect=[(TEXT, b"*" * size)])
    case(f"1.2.{index}", at_once(frame(BINARY, b"\xfe" * size)), expect=[(BINARY, b"\xfe" * size)])
case("1.1.8", chopped(frame(TEXT, b"*" * 65536), size=997), expect=[(TEXT, b"*" * 65536)])
case("1.2.8", chopped(frame(BINARY, b"\xfe" * 65536), size=997), expect=[(BINARY, b"\xfe" * 65536)])

# -- 2: pings and pongs ---------------------------------------------------------------------------

HELLO = b"Hello, world!"
case("2.1", at_once(frame(PING)), expect=[(PONG, b"")])
case("2.2", at_once(frame(PING, HELLO)), expect=[(PONG, HELLO)])
case(
    "2.3",
    at_once(frame(PING, b"\x00\xff\xfe\xfd\xfc\xfb\x00\xff")),
    expect=[(PONG, b"\x00\xff\xfe\xfd\xfc\xfb\x00\xff")],
)
case("2.4", at_once(frame(PING, b"\xfe" * 125)), expect=[(PONG, b"\xfe" * 125)])
case("2.5", at_once(frame(PING, b"\xfe" * 126)), fail=1002)  # a control frame has <= 125
case("2.6", chopped(frame(PING, b"\xfe" * 125), size=1), expect=[(PONG, b"\xfe" * 125)])
case("2.7", at_once(frame(PONG)))  # unsolicited pongs are ignored
case("2.8", at_once(frame(PONG, b"unsolicited pong payload")))
case(
    "2.9",
    at_once(frame(PONG, b"unsolicited"), frame(PING, b"solicited")),
    expect=[(PONG, b"solicited")],
)
PINGS = [b"payload-%d" % n for n in range(10)]
case("2.10", at_once(*(frame(PING, p) for p in PINGS)), expect=[(PONG, p) for p in PINGS])
case("2.11", chopped(*(frame(PING, p) for p in PINGS), size=1), expect=[(PONG, p) for p in PINGS])

# -- 3: reserved bits, never set without an extension that defines them ----------------------------

HI = b"Hello"
case("3.1", at_once(frame(TEXT, HI, rsv=1)), fail=1002)
case(
    "3.2",
    at_once(frame(TEXT, HI), frame(TEXT, HI, rsv=2), frame(PING)),
    expect=[(TEXT, HI)],
    fail=1002,
)
case(
    "3.3",
    one_by_one(frame(TEXT, HI), frame(TEXT, HI, rsv=3), frame(PING)),
    expect=[(TEXT, HI)],
    fail=1002,
)
case(
    "3.4",
    chopped(frame(TEXT, HI), frame(TEXT, HI, rsv=4), frame(PING)),
    expect=[(TEXT, HI)],
    fail=1002,
)
case("3.5", at_once(frame(BINARY, b"\xff" * 8, rsv=5)), fail=1002)
case("3.6", at_once(frame(PING, HI, rsv=6)), fail=1002)
case("3.7", at_once(frame(CLOSE, close_payload(1000), rsv=7)), fail=1002)

# -- 4: reserved opcodes (3-7 data, 11-15 control) ----------------------------------------------

for group, (first, kind) in enumerate([(3, "data"), (11, "control")], 1):
    op = iter(range(first, first + 5))
    case(f"4.{group}.1", at_once(frame(next(op))), fail=1002)
    case(f"4.{group}.2", at_once(frame(next(op), b"reserved " + kind.encode())), fail=1002)
    case(
        f"4.{group}.3",
        one_by_one(frame(TEXT, HI), frame(next(op)), frame(PING)),
        expect=[(TEXT, HI)],
        fail=1002,
    )
    case(
        f"4.{group}.4",
        one_by_one(frame(TEXT, HI), frame(next(op), b"payload"), frame(PING)),
        expect=[(TEXT, HI)],
        fail=1002,
    )
    case(
        f"4.{group}.5",
        chopped(frame(TEXT, HI), frame(next(op), b"payload"), frame(PING)),
        expect=[(TEXT, HI)],
        fail=1002,
    )

# -- 5: fragmentation -----------------------------------------------------------------------------

FRAG1, FRAG2 = b"fragment1", b"fragment2"
WHOLE = FRAG1 + FRAG2
TWO = [frame(TEXT, FRAG1, fin=False), frame(CONT, FRAG2)]
WITH_PING = [frame(TEXT, FRAG1, fin=False), frame(PING, b"ping"), frame(CONT, FRAG2)]
case("5.1", at_once(frame(PING, FRAG1, fin=False), frame(CONT, FRAG2)), fail=1002)
case("5.2", at_once(frame(PONG, FRAG1, fin=False), frame(CONT, FRAG2)), fail=1002)
case("5.3", at_once(*TWO), expect=[(TEXT, WHOLE)])
case("5.4", one_by_one(*TWO), expect=[(TEXT, WHOLE)])
case("5.5", chopped(*TWO), expect=[(TEXT, WHOLE)])
case("5.6", at_once(*WITH_PING), expect=[(PONG, b"ping"), (TEXT, WHOLE)])
case("5.7", one_by_one(*WITH_PING), expect=[(PONG, b"ping"), (TEXT, WHOLE)])
case("5.8", chopped(*WITH_PING), expect=[(PONG, b"ping"), (TEXT, WHOLE)])
ORPHAN_LAST = [frame(CONT, FRAG2), *TWO]  # a continuation that ends no message
ORPHAN_FIRST = [frame(CONT, FRAG1, fin=False), frame(CONT, FRAG2), *TWO]
for number, frames in (("5.9", ORPHAN_LAST), ("5.12", ORPHAN_FIRST)):
    major, minor = number.split(".")
    case(number, at_once(*frames), fail=1002)
    case(f"{major}.{int(minor) + 1}", one_by_one(*frames), fail=1002)
    case(f"{major}.{int(minor) + 2}", chopped(*frames), fail=1002)
case(
    "5.15",
    at_once(*TWO, frame(CONT, b"fragment3", fin=False), frame(TEXT, b"fragment4")),
    expect=[(TEXT, WHOLE)],
    fail=1002,
)
NESTED = [frame(CONT, FRAG1, fin=False), frame(TEXT, FRAG2, fin=False), frame(CONT, b"3")]
case("5.16", at_once(*NESTED, *NESTED), fail=1002)
case("5.17", at_once(frame(CONT, FRAG1), *NESTED[1:], frame(CONT, FRAG1), *NESTED[1:]), fail=1002)
case("5.18", at_once(frame(TEXT, FRAG1, fin=False), frame(TEXT, FRAG2)), fail=1002)
FIVE = [b"fragment%d" % n for n in range(1, 6)]
PINGED = [
    frame(TEXT, FIVE[0], fin=False),
    frame(CONT, FIVE[1], fin=False),
    frame(PING, b"pongme 1!"),
    frame(CONT, FIVE[2], fin=False),
    frame(CONT, FIVE[3], fin=False),
    frame(PING, b"pongme 2!"),
    frame(CONT, FIVE[4]),
]
PINGED_ECHO = [(PONG, b"pongme 1!"), (PONG, b"pongme 2!"), (TEXT, b"".join(FIVE))]
case("5.19", one_by_one(*PINGED), expect=PINGED_ECHO)
case("5.20", chopped(*PINGED, size=3), expect=PINGED_ECHO)

# -- 6: UTF-8 in text messages (RFC 3629; the sequences of Markus Kuhn's stress test) ------------


def text_case(number: str, payload: bytes, send=at_once, size: int = 0) -> None:
    """A text message that is valid UTF-8 (echoed) or not (1007); ``size`` sends it in
    frames of that many bytes."""
    try:
        payload.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    frames = fragments(TEXT, payload, size) if size else [frame(TEXT, payload)]
    if valid:
        case(number, send(*frames), expect=[(TEXT, payload)])
    else:
        case(number, send(*frames), fail=1007)


KOSME = "\u03ba\u1f79\u03c3\u03bc\u03b5".encode()  # 11 bytes: 2 + 3 + 2 + 2 + 2
MIXED = "Hello-\u00b5@\u00df\u00f6\u00e4\u00fc\u00e0\u00e1-UTF-8!!".encode()
case("6.1.1", at_once(frame(TEXT)), expect=[(TEXT, b"")])
case(
    "6.1.2",
    at_once(frame(TEXT, fin=False), frame(CONT, fin=False), frame(CONT)),
    expect=[(TEXT, b"")],
)
case(
    "6.1.3",
    at_once(frame(TEXT, fin=False), frame(CONT, b"middle", fin=False), frame(CONT)),
    expect=[(TEXT, b"middle")],
)
text_case("6.2.1", MIXED)
case(
    "6.2.2",
    at_once(frame(TEXT, MIXED[:7], fin=False), frame(CONT, MIXED[7:])),
    expect=[(TEXT, MIXED)],
)  # a cut between two characters
text_case("6.2.3", MIXED, size=1)  # cuts through every two-byte character
text_case("6.2.4", KOSME, size=1)
SURROGATE_IN = KOSME + b"\xed\xa0\x80" + b"edited"
text_case("6.3.1", SURROGATE_IN)
text_case("6.3.2", SURROGATE_IN, size=1)
# fail fast: the invalid byte ends it, not the end of the message
TOO_HIGH = b"\xf4\x90\x80\x80"  # U+110000, beyond Unicode
case(
    "6.4.1",
    one_by_one(
        frame(TEXT, KOSME, fin=False), frame(CONT, TOO_HIGH, fin=False), frame(CONT, b"edited")
    ),
    fail=1007,
)
case(
    "6.4.2",
    one_by_one(
        frame(TEXT, KOSME, fin=False),
        frame(CONT, TOO_HIGH[:2], fin=False),
        frame(CONT, TOO_HIGH[2:] + b"edited"),
    ),
    fail=1007,
)
case("6.4.3", chopped(frame(TEXT, KOSME + TOO_HIGH + b"edited"), size=4), fail=1007)
case("6.4.4", chopped(frame(TEXT, KOSME + TOO_HIGH[:2] + b"edited"), size=2), fail=1007)
text_case("6.5.1", KOSME)
text_case("6.5.2", KOSME, size=3)  # cuts inside the three-byte character
text_case("6.5.3", KOSME, size=1)
text_case("6.5.4", KOSME, send=chopped)
text_case("6.5.5", KOSME, send=one_by_one, size=1)
for length in range(1, 12):  # every prefix of the 11 bytes: a cut character is invalid
    text_case(f"6.6.{length}", KOSME[:length])

UTF8_SEQUENCES = {
    # first and last sequences of each length
    "6.7": [b"\x00", b"\xc2\x80", b"\xe0\xa0\x80", b"\xf0\x90\x80\x80"],
    "6.8": [b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80"],  # 5 and 6 bytes: not UTF-8
    "6.9": [b"\x7f", b"\xdf\xbf", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf"],
    "6.10": [b"\xf7\xbf\xbf\xbf", b"\xfb\xbf\xbf\xbf\xbf", b"\xfd\xbf\xbf\xbf\xbf\xbf"],
    # other boundaries: U+D7FF, U+E000, U+FFFD, U+10FFFF, U+110000
    "6.11": [
        b"\xed\x9f\xbf",
        b"\xee\x80\x80",
        b"\xef\xbf\xbd",
        b"\xf4\x8f\xbf\xbf",
        b"\xf4\x90\x80\x80",
    ],
    # continuation bytes where no character began
    "6.12": [
        b"\x80",
        b"\xbf",
        b"\x80\xbf",
        b"\x80\xbf\x80",
        b"\x80\xbf\x80\xbf",
        b"\x80\xbf\x80\xbf\x80",
        b"\x80\xbf\x80\xbf\x80\xbf",
        bytes(range(0x80, 0xC0)),
    ],
    # start bytes each followed by a space
    "6.13": [
        b"".join(bytes([b, 0x20]) for b in range(lo, hi))
        for lo, hi in ((0xC0, 0xE0), (0xE0, 0xF0), (0xF0, 0xF8), (0xF8, 0xFC), (0xFC, 0xFE))
    ],
    # sequences whose last continuation byte is missing
    "6.14": [
        b"\xc0",
        b"\xe0\x80",
        b"\xf0\x80\x80",
        b"\xf8\x80\x80\x80",
        b"\xfc\x80\x80\x80\x80",
        b"\xdf",
        b"\xef\xbf",
        b"\xf7\xbf\xbf",
        b"\xfb\xbf\xbf\xbf",
        b"\xfd\xbf\xbf\xbf\xbf",
    ],
    "6.16": [b"\xfe", b"\xff", b"\xfe\xfe\xff\xff"],  # bytes that never appear
    # overlong forms of "/", the largest overlong forms, overlong forms of NUL
    "6.17": [
        b"\xc0\xaf",
        b"\xe0\x80\xaf",
        b"\xf0\x80\x80\xaf",
        b"\xf8\x80\x80\x80\xaf",
        b"\xfc\x80\x80\x80\x80\xaf",
    ],
    "6.18": [
        b"\xc1\xbf",
        b"\xe0\x9f\xbf",
        b"\xf0\x8f\xbf\xbf",
        b"\xf8\x87\xbf\xbf\xbf",
        b"\xfc\x83\xbf\xbf\xbf\xbf",
    ],
    "6.19": [
        b"\xc0\x80",
        b"\xe0\x80\x80",
        b"\xf0\x80\x80\x80",
        b"\xf8\x80\x80\x80\x80",
        b"\xfc\x80\x80\x80\x80\x80",
    ],
    # UTF-16 surrogates, alone and paired: never in UTF-8
    "6.20": [
        b"\xed" + bytes(pair)
        for pair in (
            (0xA0, 0x80),
            (0xAD, 0xBF),
            (0xAE, 0x80),
            (0xAF, 0xBF),
            (0xB0, 0x80),
            (0xBE, 0x80),
            (0xBF, 0xBF),
        )
    ],
    "6.21": [
        b"\xed" + bytes(high) + b"\xed" + bytes(low)
        for high in ((0xA0, 0x80), (0xAD, 0xBF), (0xAE, 0x80), (0xAF, 0xBF))
        for low in ((0xB0, 0x80), (0xBF, 0xBF))
    ],
    # noncharacters are valid UTF-8: U+FFFE, U+FFFF and the last two of each plane
    "6.22": [chr(plane << 16 | low).encode() for plane in range(17) for low in (0xFFFE, 0xFFFF)],
    # specials: the replacement character, the byte order mark, other specials
    "6.23": [chr(c).encode() for c in (0xFFFD, 0xFEFF, 0xFFF9, 0xFFFA, 0xFFFB, 0xFFFC, 0x2028)],
}
for section, sequences in UTF8_SEQUENCES.items():
    for index, sequence in enumerate(sequences, 1):
        text_case(f"{section}.{index}", sequence)
text_case("6.15.1", b"".join(UTF8_SEQUENCES["6.14"]))

# -- 7: the closing handshake ---------------------------------------------------------------------

NORMAL = frame(CLOSE, close_payload(1000))
case("7.1.1", at_once(frame(TEXT, HI), NORMAL), expect=[(TEXT, HI)], closes=1000)
case("7.1.2", at_once(NORMAL, NORMAL), closes=1000)  # the second close is never answered
case("7.1.3", at_once(NORMAL, frame(PING, b"after the close")), closes=1000)  # no pong
case("7.1.4", at_once(NORMAL, frame(TEXT, b"after the close")), closes=1000)  # no echo
# a close in the middle of a fragmented message: the websockets library fails the connection
# (1002, "incomplete fragmented message") where Autobahn expects a clean close
case("7.1.5", at_once(frame(TEXT, FRAG1, fin=False), NORMAL, frame(CONT, FRAG2)), fail=1002)
BIG = b"*" * 262144
case(
    "7.1.6",
    at_once(*(frame(TEXT, BIG) for _ in range(10)), NORMAL, frame(PING)),
    expect=[(TEXT, BIG)] * 10,
    closes=1000,
)
case("7.3.1", at_once(frame(CLOSE)), closes=0)
case("7.3.2", at_once(frame(CLOSE, b"\x03")), fail=1002)  # one byte: no code
case("7.3.3", at_once(NORMAL), closes=1000)
case(
    "7.3.4",
    at_once(frame(CLOSE, close_payload(1000, b"Hello World!"))),
    closes=1000,
)
case(
    "7.3.5",
    at_once(frame(CLOSE, close_payload(1000, b"*" * 123))),
    closes=1000,
)
case("7.3.6", at_once(frame(CLOSE, close_payload(1000, b"*" * 124))), fail=1002)  # 126 bytes
case("7.5.1", at_once(frame(CLOSE, close_payload(1000, KOSME + SURROGATE_IN[11:]))), fail=1007)
VALID_CODES = [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999]
for index, code in enumerate(VALID_CODES, 1):  # the server's close echoes the client's code
    case(
        f"7.7.{index}",
        at_once(frame(CLOSE, close_payload(code))),
        closes=code,
    )
INVALID_CODES = [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999]
for index, code in enumerate(INVALID_CODES, 1):
    case(f"7.9.{index}", at_once(frame(CLOSE, close_payload(code))), fail=1002)
case("7.13.1", at_once(frame(CLOSE, close_payload(5000))), fail=1002)
case("7.13.2", at_once(frame(CLOSE, close_payload(65535))), fail=1002)

# -- 9: sizes, up to ws_max_size (16 MiB) ----------------------------------------------------------

KIB, MIB = 1024, 1024 * 1024


def payload_of(opcode: int, size: int) -> bytes:
    return b"*" * size if opcode == TEXT else bytes(range(256)) * (size // 256)


for kind, opcode in ((1, TEXT), (2, BINARY)):
    for index, size in enumerate([64 * KIB, 256 * KIB, MIB, 4 * MIB, 8 * MIB, 16 * MIB], 1):
        data = payload_of(opcode, size)
        case(f"9.{kind}.{index}", at_once(frame(opcode, data)), expect=[(opcode, data)])
    data = payload_of(opcode, 4 * MIB)
    for index, size in enumerate([64 << (2 * n) for n in range(9)], 1):  # 64 B ... 4 MiB
        case(
            f"9.{kind + 2}.{index}",
            at_once(*fragments(opcode, data, size)),
            expect=[(opcode, data)],
        )
    data = payload_of(opcode, MIB)
    for index, size in enumerate([64 << n for n in range(6)], 1):  # 64 B ... 2 KiB writes
        case(
            f"9.{kind + 4}.{index}",
            chopped(frame(opcode, data), size=size),
            expect=[(opcode, data)],
        )
    for index, size in enumerate([0, 16, 64, 256, 1024, 4096], 1):
        data = payload_of(opcode, size)
        case(
            f"9.{kind + 6}.{index}",
            at_once(*[frame(opcode, data)] * 1000),
            expect=[(opcode, data)] * 1000,
        )

# -- 10: auto-fragmentation -----------------------------------------------------------------------

LONG = "\u00e9t\u00e9 ".encode() * 10922  # 65,532 bytes; 1,300-byte frames cut characters
case("10.1.1", at_once(*fragments(TEXT, LONG, 1300)), expect=[(TEXT, LONG)])


# -- running a case ---------------------------------------------------------------------------


def send(ws: wsclient.WebSocket, step: Send) -> None:
    """Send a step; a server that failed the connection meanwhile stops it (what it sent
    before it closed is still read)."""
    if step.chop:
        data = b"".join(step.frames)
        writes = [data[start : start + step.chop] for start in range(0, len(data), step.chop)]
        pause = PAUSE / 10 if step.chop < 64 else 0
    elif step.one_by_one:
        writes, pause = step.frames, PAUSE
    else:
        writes, pause = [b"".join(step.frames)], 0
    try:
        for data in writes:
            ws.sock.sendall(data)
            if pause:
                time.sleep(pause)
    except (BrokenPipeError, ConnectionResetError):
        pass


def read_until_close(ws: wsclient.WebSocket) -> list[tuple[int, bytes]]:
    frames = []
    while True:
        fin, rsv, opcode, payload = ws.read_frame()
        assert fin and rsv == 0, (fin, rsv, opcode)
        frames.append((opcode, payload))
        if opcode == CLOSE:
            return frames


@pytest.mark.parametrize("number", list(CASES))
def test_case(server, number: str) -> None:
    spec = CASES[number]
    ws = wsclient.connect(("127.0.0.1", server.port))
    ws.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ws.sock.settimeout(30)
    for step in spec.steps:
        send(ws, step)
    if spec.fail is None and spec.closes is None:
        for expected in spec.expect:
            assert ws.read_frame()[2:] == expected
        ws.send(frame(CLOSE, close_payload(1000)))
        assert read_until_close(ws) == [(CLOSE, close_payload(1000))]
    else:
        got = read_until_close(ws)
        close = got.pop()[1]
        assert got == spec.expect[: len(got)], f"{number}: not a prefix of the echoes"
        code = struct.unpack("!H", close[:2])[0] if close else 0
        wanted = spec.fail if spec.fail is not None else spec.closes
        assert code == wanted, f"{number}: closed with {code}, not {wanted}"
    assert ws.closed_by_server(timeout=10)


def test_every_section_is_here() -> None:
    sections = {number.split(".")[0] for number in CASES} | {"12", "13"}
    assert sections == {"1", "2", "3", "4", "5", "6", "7", "9", "10", "12", "13"}
    assert len(CASES) + len(COMPRESSION_CASES) > 500


# -- 12 and 13: permessage-deflate (RFC 7692) ------------------------------------------------


def payloads(kind: str, size: int) -> Iterator[str | bytes]:
    """Messages of ``size`` bytes of one kind, each a little different from the last (a
    compressor's context between messages matters)."""
    rng = random.Random(f"{kind}-{size}")
    for index in range(20):
        if kind == "json":
            record = {"id": index, "name": f"user{index}", "tags": ["a", "b"], "score": 1.5}
            text = json.dumps([record] * (size // 60 + 1))
            yield text[:size]
        elif kind == "bitmap":  # runs of 64 black or white pixels, a byte each
            runs = bytes(rng.choice((0, 255)) for _ in range(size // 64 + 1))
            yield b"".join(bytes([run]) * 64 for run in runs)[:size]
        elif kind == "text":
            words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog,", "and"]
            yield " ".join(rng.choice(words) for _ in range(size // 3))[:size]
        elif kind == "html":
            row = f"<tr><td class='n'>{index}</td><td><a href='/item/{index}'>item</a></td></tr>\n"
            yield ("<html><body><table>\n" + row * (size // len(row) + 1))[:size]
        else:  # random bytes: nothing to compress
            yield rng.randbytes(size)


COMPRESSION_SIZES = [16, 64, 256, 1024, 4096, 8192, 16384, 32768, 65536, 131072]
KINDS = ["json", "bitmap", "text", "html", "random"]
# Autobahn's offers of section 13, in RFC 7692's terms (see the docstring on 8-bit windows);
# 13.7 makes two offers, the server takes the first
OFFERS = [
    [{}],
    [{"client_no_context_takeover": True}],
    [{"client_max_window_bits": 9}],
    [{"client_max_window_bits": 15}],
    [{"client_no_context_takeover": True, "client_max_window_bits": 9}],
    [{"client_no_context_takeover": True, "client_max_window_bits": 15}],
    [
        {
            "server_no_context_takeover": True,
            "server_max_window_bits": 9,
            "client_no_context_takeover": True,
            "client_max_window_bits": 9,
        },
        {},
    ],
]


def compression_cases() -> dict[str, tuple[list[dict], str, int, int]]:
    """number -> (offer, kind, size, fragment size or 0)."""
    cases = {}
    for section, kind in enumerate(KINDS, 1):  # 12.1 ... 12.5: one kind of payload each
        for index, size in enumerate(COMPRESSION_SIZES[:9], 1):
            cases[f"12.{section}.{index}"] = ([{}], kind, size, 0)
        for index, size in enumerate(COMPRESSION_SIZES[:9], 10):
            cases[f"12.{section}.{index}"] = ([{}], kind, size, 256)
    for section, offer in enumerate(OFFERS, 1):  # 13.1 ... 13.7: one offer each
        for index, size in enumerate(COMPRESSION_SIZES[:9], 1):
            cases[f"13.{section}.{index}"] = (offer, "text", size, 0)
        for index, size in enumerate(COMPRESSION_SIZES[:9], 10):
            cases[f"13.{section}.{index}"] = (offer, "text", size, 256)
    return cases


COMPRESSION_CASES = compression_cases()


@pytest.mark.parametrize("number", list(COMPRESSION_CASES))
def test_compression_case(server, number: str) -> None:
    offers, kind, size, fragment = COMPRESSION_CASES[number]
    factories = [ClientPerMessageDeflateFactory(**offer) for offer in offers]
    with ws_connect(
        f"ws://127.0.0.1:{server.port}/echo", extensions=factories, max_size=None
    ) as ws:
        agreed = ws.response.headers["Sec-WebSocket-Extensions"]
        assert agreed.startswith("permessage-deflate"), agreed
        assert ("server_no_context_takeover" in agreed) == bool(
            offers[0].get("server_no_context_takeover")
        ), agreed
        for message in payloads(kind, size):
            if fragment:
                ws.send(message[i : i + fragment] for i in range(0, len(message), fragment))
            else:
                ws.send(message)
            assert ws.recv() == message

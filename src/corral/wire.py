"""The heartbeat pipe's protocol, worker -> master: one typed message per kind of line.

Why a module of its own: the lines are written in three places (the worker's loop,
``server/worker.py``; its watchdog thread, ``apps/deadline.py``; the master's code in a new
worker before the application is imported, ``master/child.py``) and read by the master
(``master/process.py``, ``Supervisor._on_line``), and later by a ``corral ctl top`` view. Each
side builds or matches a message class; only this module knows the bytes. It imports neither
the master nor the server, only the standard library and ``observe/latency.py``'s bucket
count (itself stdlib only), so any of them can use it (``control/ctl.py`` is stdlib only).

The messages are frozen ``dataclass(slots=True)`` classes rather than ``msgspec.Struct``:
the worker sends about six lines a second, so the ~0.4 µs a frozen dataclass costs to
build (a Struct: ~0.04 µs) is nothing beside the ``os.write`` of each, and the stdlib keeps
the module usable where msgspec is not imported. Both give equality, ``repr`` and ``match``
patterns.

Invariants:

- One message is one line of text (UTF-8): its kind, then its fields, each after one space,
  then ``\\n``. It is written with one ``os.write``.
- A line, newline included, is shorter than ``PIPE_BUF`` (4096 bytes), so one write to the
  pipe is atomic: lines from the loop, the watchdog thread and a signal handler never
  interleave. :func:`encode` makes sure of it: a method is cut at 32 characters, a target at
  200, a cause at 1000 (at most 4 bytes each in UTF-8), and spaces and control characters
  are written ``%XX`` in a method or target, as spaces in a cause (which is the line's last
  field, so it may hold spaces).
- :class:`LineDecoder` never raises: an unknown, malformed, non-UTF-8 or over-long line is
  skipped, and logged the first time for its kind (one WARNING per kind and decoder).
- A decoded message is well-formed as a whole: counts are decimal integers >= 0, an age or a
  time is a finite number, a latency line has one count per bucket of ``observe/latency.py``.

The lines (``AT``: the worker's ``CLOCK_MONOTONIC`` when it wrote the line, which is the
master's clock too: one clock per boot, for every process; ``AGE``: seconds, as the worker
measured it then; ``TARGET`` as the request line has it, spaces written ``%20``):

=========================================  =========================================
``ready``                                  :class:`Ready`
``closed``                                 :class:`Closed`
``alive AT``                               :class:`Alive`
``conn ACCEPTED CLOSED ACTIVE IDLE BUSY``  :class:`Connections`
``lat SUM_US C0,C1,...,C18``               :class:`Latency`
``hb SERVED AT AGE METHOD TARGET``         :class:`Beat` (``hb SERVED AT 0`` when idle)
``retire SERVED``                          :class:`Retire`
``renewed NUMBER``                         :class:`Renewed`
``failed CAUSE``                           :class:`Failed`
``abort AGE METHOD TARGET``                :class:`Abort` (``abort 0`` when idle)
``stuck AGE METHOD TARGET``                :class:`Stuck`
=========================================  =========================================
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from corral.observe.latency import BOUNDS

__all__ = [
    "PIPE_BUF",
    "PULSE",
    "Abort",
    "Alive",
    "Beat",
    "Closed",
    "Connections",
    "Failed",
    "InProgress",
    "Latency",
    "LineDecoder",
    "Malformed",
    "Message",
    "Ready",
    "Renewed",
    "Retire",
    "Stuck",
    "decode",
    "encode",
]

PIPE_BUF = 4096  # POSIX's least: a write of at most this many bytes to a pipe is atomic
# A worker's loop says it is alive this often (an ``alive`` line, or the ``hb`` line once a
# second), so the master knows to within this when a loop went silent (master/timeouts.py)
PULSE = 0.25
METHOD_MAX = 32  # characters of a method, of a target, of a cause that are sent
TARGET_MAX = 200
CAUSE_MAX = 1000
LOG_SAMPLE = 100  # bytes of a skipped line that its log line shows

# ASCII's control characters and the space: they would split a field or the line
_CONTROLS = (*range(0x21), 0x7F)
_ESCAPED = str.maketrans({c: f"%{c:02X}" for c in _CONTROLS})  # in a method or a target
_BLANKED = str.maketrans({c: " " for c in _CONTROLS})  # in a cause


# -- the messages ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InProgress:
    """A worker's oldest request in progress (a field of :class:`Beat`, :class:`Abort` and
    :class:`Stuck`, not a line of its own)."""

    age: float  # seconds it has been in progress (in the application, for Stuck)
    method: str
    target: str

    def describe(self) -> str:
        """``"METHOD TARGET"``, as the master's log lines name the request."""
        return f"{self.method} {self.target}"


@dataclass(frozen=True, slots=True)
class Ready:
    """The application is imported and the listeners are served; sent once."""


@dataclass(frozen=True, slots=True)
class Closed:
    """A drain began: the listeners and the hand-off socket are closed; sent once."""


@dataclass(frozen=True, slots=True)
class Alive:
    """Every :data:`PULSE` seconds but the ticks that send a :class:`Beat`: the loop ran at
    ``at`` (``CLOCK_MONOTONIC``)."""

    at: float


@dataclass(frozen=True, slots=True)
class Connections:
    """Every tick: connections accepted and closed so far; the open ones with a request
    (active) or without (idle); requests in the application now (busy)."""

    accepted: int
    closed: int
    active: int
    idle: int
    busy: int


@dataclass(frozen=True, slots=True)
class Latency:
    """Every tick with ``latency_histogram``: the request durations so far, their sum in µs
    and one count per bucket of ``observe/latency.py``."""

    sum_us: int
    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Beat:
    """Every second: responses finished so far, and the oldest request in progress (None
    when there is none), its age at ``at``, when the loop ran (``CLOCK_MONOTONIC``)."""

    served: int
    at: float
    request: InProgress | None


@dataclass(frozen=True, slots=True)
class Retire:
    """``max_requests`` reached (``served`` responses): the master starts a successor."""

    served: int


@dataclass(frozen=True, slots=True)
class Renewed:
    """The master's renewal ``number`` (new certificates, master/renewal.py) was acted on: its
    certificates serve the new handshakes (or the worker logged why they could not)."""

    number: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The application could not be imported or started (one line: the exception and where
    it was raised); sent once, just before exit code 3."""

    cause: str


@dataclass(frozen=True, slots=True)
class Abort:
    """From the ``SIGABRT`` handler, just before the worker exits: what it was serving."""

    request: InProgress | None


@dataclass(frozen=True, slots=True)
class Stuck:
    """From the watchdog thread, at most once: a request did not unwind within
    ``request_timeout_grace`` (its age is its time in the application)."""

    request: InProgress


Message: TypeAlias = (
    Ready
    | Closed
    | Alive
    | Connections
    | Latency
    | Beat
    | Retire
    | Renewed
    | Failed
    | Abort
    | Stuck
)


# -- encoding -------------------------------------------------------------------------------


def encode(message: Message) -> bytes:
    """``message`` as its line, newline included, shorter than :data:`PIPE_BUF` bytes."""
    match message:
        case Beat(served, at, request):
            text = f"hb {served} {float(at)!r} {_request_text(request)}"
        case Alive(at):
            text = f"alive {float(at)!r}"
        case Connections(accepted, closed, active, idle, busy):
            text = f"conn {accepted} {closed} {active} {idle} {busy}"
        case Latency(sum_us, counts):
            text = f"lat {sum_us} {','.join(map(str, counts))}"
        case Ready():
            text = "ready"
        case Closed():
            text = "closed"
        case Retire(served):
            text = f"retire {served}"
        case Renewed(number):
            text = f"renewed {number}"
        case Failed(cause):
            text = f"failed {cause.translate(_BLANKED)[:CAUSE_MAX]}"
        case Abort(request):
            text = f"abort {_request_text(request)}"
        case Stuck(request):
            text = f"stuck {_request_text(request)}"
        case _:
            raise TypeError(f"not a heartbeat message: {message!r}")
    line = (text + "\n").encode("utf-8", "replace")  # a lone surrogate becomes "?"
    # the text fields are cut above: only counts of hundreds of digits could pass this
    assert len(line) < PIPE_BUF, f"a heartbeat line of {len(line)} bytes"
    return line


def _request_text(request: InProgress | None) -> str:
    if request is None:
        return "0"
    method = request.method.translate(_ESCAPED)[:METHOD_MAX]
    target = request.target.translate(_ESCAPED)[:TARGET_MAX]
    return f"{float(request.age)!r} {method} {target}"


# -- decoding -------------------------------------------------------------------------------


class Malformed(ValueError):
    """A line of a known kind that does not parse (caught by :class:`LineDecoder`)."""


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):  # int() would take " 1", "1_0", "-1", Arabic digits
        raise Malformed(f"not a count: {text[:20]!r}")
    return int(text)


# what repr() writes of a finite float (and an integer)
_AGE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:e[-+][0-9]+)?")


def _age(text: str) -> float:
    if _AGE.fullmatch(text) is None:
        raise Malformed(f"not an age: {text[:20]!r}")
    age = float(text)
    if not math.isfinite(age):
        raise Malformed(f"not an age: {text[:20]!r}")
    return age


def _fields(rest: str | None, count: int) -> list[str]:
    fields = [] if rest is None else rest.split(" ")
    if len(fields) != count:
        raise Malformed(f"{len(fields)} fields, not {count}")
    return fields


def _request(fields: list[str]) -> InProgress | None:
    if fields == ["0"]:
        return None
    if len(fields) != 3:
        raise Malformed(f"a request is AGE METHOD TARGET or 0, not {len(fields)} fields")
    age, method, target = fields
    return InProgress(_age(age), method, target)


def _beat(rest: str | None) -> Beat:
    if rest is None:
        raise Malformed("no fields")
    fields = rest.split(" ")
    if len(fields) < 3:
        raise Malformed(f"{len(fields)} fields, not SERVED AT and a request")
    served, at, *request = fields
    return Beat(_count(served), _age(at), _request(request))


def _alive(rest: str | None) -> Alive:
    (at,) = _fields(rest, 1)
    return Alive(_age(at))


def _connections(rest: str | None) -> Connections:
    return Connections(*(_count(field) for field in _fields(rest, 5)))


def _latency(rest: str | None) -> Latency:
    sum_us, counts = _fields(rest, 2)
    values = tuple(_count(count) for count in counts.split(","))
    if len(values) != BOUNDS + 1:
        raise Malformed(f"{len(values)} latency buckets, not {BOUNDS + 1}")
    return Latency(_count(sum_us), values)


def _bare(message: Ready | Closed) -> Callable[[str | None], Ready | Closed]:
    def parse(rest: str | None) -> Ready | Closed:
        _fields(rest, 0)
        return message

    return parse


def _retire(rest: str | None) -> Retire:
    (served,) = _fields(rest, 1)
    return Retire(_count(served))


def _renewed(rest: str | None) -> Renewed:
    (number,) = _fields(rest, 1)
    return Renewed(_count(number))


def _failed(rest: str | None) -> Failed:
    if rest is None:
        raise Malformed("no cause")
    return Failed(rest)  # the last field: spaces are its own


def _abort(rest: str | None) -> Abort:
    return Abort(_request([] if rest is None else rest.split(" ")))


def _stuck(rest: str | None) -> Stuck:
    age, method, target = _fields(rest, 3)
    return Stuck(InProgress(_age(age), method, target))


# the kind -> what parses the rest of the line (None: the line is the kind alone)
_PARSERS: dict[bytes, Callable[[str | None], Message]] = {
    b"hb": _beat,
    b"alive": _alive,
    b"conn": _connections,
    b"lat": _latency,
    b"ready": _bare(Ready()),
    b"closed": _bare(Closed()),
    b"retire": _retire,
    b"renewed": _renewed,
    b"failed": _failed,
    b"abort": _abort,
    b"stuck": _stuck,
}


def decode(line: bytes) -> Message:
    """One line (without its newline) as its message; :class:`Malformed` (a ValueError) for
    a line that is not one. :class:`LineDecoder` is what reads a pipe."""
    if len(line) >= PIPE_BUF - 1:
        raise Malformed(f"a line of {len(line) + 1} bytes")
    kind, space, rest = line.partition(b" ")
    parse = _PARSERS.get(kind)
    if parse is None:
        raise Malformed("unknown kind")
    try:
        return parse(rest.decode("utf-8") if space else None)
    except UnicodeDecodeError as exc:
        raise Malformed(f"not UTF-8 at byte {len(kind) + 1 + exc.start}") from None


class LineDecoder:
    """Bytes read from one worker's pipe in, its complete messages out.

    A line may span reads: its start is kept until its newline comes. A line that is not a
    message is skipped, and only the first one of its kind (of each known kind, and of
    unknown ones, and of over-long ones) is logged, as a WARNING naming ``name`` (say,
    ``worker 2 (pid 1234)``). Bytes without a newline beyond the size limit are dropped up
    to the next newline, so the buffer stays below :data:`PIPE_BUF`.
    """

    def __init__(self, name: str = "", log: logging.Logger | None = None) -> None:
        self.name = name
        self.log = log if log is not None else logging.getLogger("corral")
        self._partial = b""
        self._overlong = False  # dropping the rest of a line already too long
        self._logged: set[bytes] = set()  # the kinds of skipped lines already logged

    def feed(self, data: bytes) -> list[Message]:
        """The messages completed by ``data``, in order."""
        if self._overlong:  # the rest of a line too long to be a message
            end = data.find(b"\n")
            if end < 0:
                return []
            self._overlong = False
            data = data[end + 1 :]
        if self._partial:
            data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        messages = []
        for line in lines:
            try:
                messages.append(decode(line))
            except ValueError as exc:
                self._skipped(line, exc)
        if len(self._partial) >= PIPE_BUF - 1:
            self._skipped(self._partial, Malformed("a line of more than PIPE_BUF bytes"))
            self._partial = b""
            self._overlong = True
        return messages

    def _skipped(self, line: bytes, why: ValueError) -> None:
        kind = line.partition(b" ")[0]
        if len(line) >= PIPE_BUF - 1:
            kind = b"(over-long)"
        elif kind not in _PARSERS:
            kind = b"(unknown)"
        if kind in self._logged:
            return
        self._logged.add(kind)
        who = f"{self.name}: " if self.name else ""
        self.log.warning(
            "%sskipped a heartbeat line, %s: %r (further %s lines are skipped unlogged)",
            who,
            why,
            line[:LOG_SAMPLE],
            kind.decode("ascii"),
        )

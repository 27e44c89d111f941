"""Generated requests for the parser's parity and differential tests, and the by-hand run.

`generate` writes one to three pipelined requests from a grammar that mostly follows HTTP/1.1
and often does not (odd methods, targets, versions, separators, line ends, framing fields,
chunk lines); `mutate` then flips, inserts, deletes or repeats a few bytes. Both draw from a
`Chooser`, so that the same code serves `random` (the by-hand run: fast, a million inputs)
and hypothesis (the tests: shrinking).

`outcome` is what a parser makes of an input fed in given pieces: the requests it reported
(method, target, version, headers, body, keep-alive, framing), the status it refused with,
and whether it stopped parsing. The two builds of corral's parser must give the same outcome
for every input and every split; llhttp (tests/llhttp_oracle.py) must refuse what they refuse
and parse the same requests from what they accept, except in the cases `disagreement` names,
each decided by an RFC clause that corral follows and llhttp does not.

By hand: ``python -m tests.differential --count 1000000`` (``--seed N`` to vary) prints how
many inputs agreed with llhttp, every class of difference with a count and an example, and
exits 1 on an unexplained one; ``--atheris --count N`` lets libFuzzer mutate instead, guided by
the coverage of the Python code, and stops at the first broken parity or unexplained
difference (writing the input to ``crash-*``).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from corral.http.errors import HttpError
from corral.http.head import Limits, RequestSink
from corral.http.parser import _HOST_VALUE  # (the grammar the parser holds a Host to)
from corral.server.handoff import message_end
from tests.llhttp_oracle import RequestParser as LlhttpParser

METHODS = (
    b"GET",
    b"GET",
    b"GET",
    b"POST",
    b"POST",
    b"HEAD",
    b"PUT",
    b"DELETE",
    b"OPTIONS",
    b"PATCH",
    b"CONNECT",
    b"TRACE",
    b"PROPFIND",
    b"M-SEARCH",
    b"PRI",
    b"FOO",
    b"get",
    b"G\x00T",
    b"GE T",
    b"",
    b"DESCRIBE",
    b"SOURCE",
)
TARGETS = (
    b"/",
    b"/",
    b"/path",
    b"/a?b=c&d",
    b"/%41%2F",
    b"*",
    b"http://example.com/x",
    b"http://[::1]:8080/",
    b"example.com:443",
    b"//double",
    b"/a#frag",
    b"/\x7f",
    b"/\x80",
    b"/a b",
    b"",
    b"ftp://h/",
    b"http:///x",
    b"/" + b"x" * 70,
)
VERSIONS = (
    b"HTTP/1.1",
    b"HTTP/1.1",
    b"HTTP/1.1",
    b"HTTP/1.0",
    b"HTTP/0.9",
    b"HTTP/2.0",
    b"HTTP/1.2",
    b"http/1.1",
    b"HTTP/1.",
    b"HTTP/11",
    b"RTSP/1.0",
    b"",
    b"HTTP/1.1 ",
)
SPACES = (b" ", b" ", b" ", b" ", b"  ", b"\t")
ENDS = (b"\r\n",) * 12 + (b"\n", b"\r", b"\r\r\n", b"\n\r")
SEPARATORS = (b": ", b": ", b":", b":  ", b" : ", b":\t", b"\t:")
NAMES = (
    b"Accept",
    b"User-Agent",
    b"X-Custom",
    b"Cookie",
    b"X_Under",
    b"x-lower",
    b"X\x00Nul",
    b"X Space",
    b"",
    b"X\x80",
    b"Content-Type",
)
VALUES = (
    b"text/html",
    b"",
    b"a, b",
    b"  padded  ",
    b"\x80\xff",
    b"a\x00b",
    b"a\x01b",
    b"a\tb",
    b"x" * 40,
    b"\x7f",
)
CL_VALUES = (
    b"0",
    b"3",
    b"5",
    b"10",
    b"03",
    b"+3",
    b"-1",
    b"3, 3",
    b"",
    b"3 ",
    b" 3",
    b"99999999999999999999999",
    b"18446744073709551615",
    b"0x10",
    b"1e3",
)
TE_VALUES = (
    b"chunked",
    b"chunked",
    b"CHUNKED",
    b"gzip, chunked",
    b"chunked, gzip",
    b"identity",
    b"xchunked",
    b"chunked;q=1",
    b"gzip,,chunked",
    b"",
    b" chunked ",
    b"chunked,",
)
CONNECTION_VALUES = (
    b"close",
    b"keep-alive",
    b"Upgrade",
    b"keep-alive, close",
    b"Close",
    b"closed",
    b"upgrade, keep-alive",
    b"foo,  close ",
)
EXPECT_VALUES = (b"100-continue", b"100-Continue", b"200-ok", b"")
CHUNK_EXTS = (
    b"",
    b"",
    b"",
    b";a=b",
    b";a",
    b';a="b c"',
    b" ;a",
    b"; a",
    b";a=",
    b';a="\\"',
    b";=b",
    b';a="\x01"',
    b";a=b;c",
    b";" + b"x" * 70,  # longer than the differential's field size
)


class Chooser:
    """Where the generator's choices come from."""

    def choice(self, options: Sequence[Any]) -> Any:
        raise NotImplementedError

    def integer(self, low: int, high: int) -> int:
        raise NotImplementedError

    def chance(self, p: float) -> bool:
        raise NotImplementedError


class RandomChooser(Chooser):
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.rng.randrange(len(options))]

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p


def _body(choose: Chooser) -> bytes:
    return bytes(choose.integer(97, 122) for _ in range(choose.integer(0, 12)))


def _chunked(choose: Chooser, body: bytes) -> bytes:
    out = []
    rest = body
    while rest:
        size = choose.integer(1, len(rest))
        piece, rest = rest[:size], rest[size:]
        digits = b"%x" % size
        if choose.chance(0.1):
            digits = b"0" + digits.upper()
        if choose.chance(0.05):
            digits = choose.choice((b"g", b"-1", b"", b"f" * 17, b"0x1", b" 1"))
        out.append(digits + choose.choice(CHUNK_EXTS) + choose.choice(ENDS) + piece)
        out.append(choose.choice(ENDS) if choose.chance(0.1) else b"\r\n")
    out.append(b"0" + choose.choice(CHUNK_EXTS) + b"\r\n")
    if choose.chance(0.2):
        out.append(b"Trailer-Field: v" + choose.choice(ENDS))
    out.append(choose.choice(ENDS) if choose.chance(0.1) else b"\r\n")
    return b"".join(out)


def _request(choose: Chooser) -> bytes:
    end = b"\r\n" if choose.chance(0.8) else None
    line = (
        choose.choice(METHODS)
        + choose.choice(SPACES)
        + choose.choice(TARGETS)
        + (choose.choice(SPACES) + choose.choice(VERSIONS) if choose.chance(0.97) else b"")
    )
    fields = []
    if choose.chance(0.9):
        hosts = (b"example.com", b"h:80", b"", b"[::1]", b"a b", b"h:8x", b"u@h", b"[::1")
        fields.append(b"Host: " + choose.choice(hosts))
    if choose.chance(0.05):
        fields.append(b"Host: second")
    body = _body(choose) if choose.chance(0.4) else b""
    framing = choose.integer(0, 4)
    encoded = b""
    if framing == 1 or (framing == 0 and body):
        value = b"%d" % len(body) if choose.chance(0.7) else choose.choice(CL_VALUES)
        fields.append(b"Content-Length: " + value)
        encoded = body
        if choose.chance(0.05):
            fields.append(b"Content-Length: " + value)
    elif framing == 2:
        fields.append(b"Transfer-Encoding: " + choose.choice(TE_VALUES))
        encoded = _chunked(choose, body)
        if choose.chance(0.05):
            fields.append(b"Content-Length: 3")
        if choose.chance(0.05):
            fields.append(b"Transfer-Encoding: " + choose.choice(TE_VALUES))
    for _ in range(choose.integer(0, 4)):
        kind = choose.integer(0, 5)
        if kind == 0:
            fields.append(b"Connection: " + choose.choice(CONNECTION_VALUES))
        elif kind == 1:
            fields.append(b"Expect: " + choose.choice(EXPECT_VALUES))
        elif kind == 2:
            fields.append(b"Upgrade: websocket")
        else:
            name = choose.choice(NAMES)
            fields.append(name + choose.choice(SEPARATORS) + choose.choice(VALUES))
    if choose.chance(0.03):
        fields.append(b" folded continuation")
    if choose.integer(0, 3) == 0:
        order = list(fields)
        index = choose.integer(0, len(order)) if order else 0
        fields = order[index:] + order[:index]
    head = line + (end or choose.choice(ENDS))
    for field in fields:
        head += field + (end or choose.choice(ENDS))
    head += end or choose.choice(ENDS)
    if choose.chance(0.05):
        head = choose.choice((b"\r\n", b"\n", b"\r\n\r\n")) + head
    return head + encoded


def generate(choose: Chooser) -> bytes:
    """One to three requests, pipelined."""
    return b"".join(_request(choose) for _ in range(choose.integer(1, 3)))


def mutate(choose: Chooser, data: bytes) -> bytes:
    """A few bytes flipped, inserted, deleted or repeated."""
    data = bytearray(data)
    for _ in range(choose.integer(1, 3)):
        if not data:
            break
        at = choose.integer(0, len(data) - 1)
        how = choose.integer(0, 3)
        if how == 0:
            data[at] = choose.choice(
                (0, 9, 10, 13, 32, 34, 44, 58, 59, 127, 128, 255, choose.integer(0, 255))
            )
        elif how == 1:
            data.insert(at, choose.choice((10, 13, 32, 9, 0, 58, 44)))
        elif how == 2:
            del data[at]
        else:
            data[at:at] = data[at : at + choose.integer(1, 8)]
    return bytes(data)


# -- outcomes -------------------------------------------------------------------------------------

LIMITS = Limits(request_line=64, fields=8, field_size=64, body=100)


class _Recorder(RequestSink):
    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_request(self, head: Any) -> None:
        self.events.append(
            [
                head.method,
                head.target,
                head.version,
                tuple(head.headers),
                head.keep_alive,
                head.content_length,
                head.chunked,
                head.expect_continue,
                b"",
                False,
            ]
        )

    def on_body(self, chunk: bytes) -> None:
        self.events[-1][8] += chunk

    def on_request_end(self) -> None:
        self.events[-1][9] = True


def outcome(parser_class: type, pieces: Sequence[bytes], limits: Limits = LIMITS) -> tuple:
    """(requests, the status refused with or None, ended) of ``parser_class`` fed ``pieces``."""
    recorder = _Recorder()
    parser = parser_class(recorder, limits)
    status = None
    for piece in pieces:
        if parser.ended:
            break
        try:
            parser.feed(piece)
        except HttpError as error:
            status = error.status
            break
    return tuple(tuple(event) for event in recorder.events), status, parser.ended


def splits(choose: Chooser, data: bytes) -> list[list[bytes]]:
    """``data`` whole, cut at two chosen places, and (when short) byte by byte."""
    ways = [[data]]
    if len(data) > 2:
        a, b = sorted((choose.integer(1, len(data) - 1), choose.integer(1, len(data) - 1)))
        ways.append([data[:a], data[a:b], data[b:]])
    if len(data) <= 200:
        ways.append([data[i : i + 1] for i in range(len(data))])
    return ways


_LLHTTP_METHODS = {
    b"DELETE",
    b"GET",
    b"HEAD",
    b"POST",
    b"PUT",
    b"CONNECT",
    b"OPTIONS",
    b"TRACE",
    b"COPY",
    b"LOCK",
    b"MKCOL",
    b"MOVE",
    b"PROPFIND",
    b"PROPPATCH",
    b"SEARCH",
    b"UNLOCK",
    b"BIND",
    b"REBIND",
    b"UNBIND",
    b"ACL",
    b"REPORT",
    b"MKACTIVITY",
    b"CHECKOUT",
    b"MERGE",
    b"M-SEARCH",
    b"NOTIFY",
    b"SUBSCRIBE",
    b"UNSUBSCRIBE",
    b"PATCH",
    b"PURGE",
    b"MKCALENDAR",
    b"LINK",
    b"UNLINK",
    b"SOURCE",
    b"QUERY",
}
_CHUNK_LINE = re.compile(rb"[0-9A-Fa-f]+;")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BARE_CR_FIRST = re.compile(rb"(?:\r?\n)*\r(?!\n)")
_EMPTY_EXTENSION = re.compile(rb"(?m)^[0-9A-Fa-f]+(?:;[^\r\n]*)?(?:;=|=;|=\r|;;|;\r)")


def _complete(requests: tuple) -> tuple:
    return tuple(request for request in requests if request[9])


def _connection_options(request: tuple) -> set[bytes]:
    return {
        option.strip(b" \t").lower()
        for name, value in request[3]
        if name.lower() == b"connection"
        for option in value.split(b",")
    }


def disagreement(data: bytes, ours: tuple, llhttp: tuple, core: type) -> str | None:
    """None when llhttp and corral agree on ``data``; else the class of the difference.

    Agreement: both refuse, or both accept and report the same complete requests and the same
    end of parsing. The classes that corral decides by an RFC clause start with "RFC"; any other
    is a defect in one of the two."""
    ours_refused, llhttp_refused = ours[1] is not None, llhttp[1] is not None
    mine, theirs = _complete(ours[0]), _complete(llhttp[0])
    if ours_refused and llhttp_refused:
        return None
    if not ours_refused and not llhttp_refused and (mine, ours[2]) == (theirs, llhttp[2]):
        return None
    # the first request on which they differ
    index = next(
        (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
        min(len(mine), len(theirs)),
    )
    if index < len(mine) and index < len(theirs):
        a, b = mine[index], theirs[index]
        if (
            a[:4] + a[5:] == b[:4] + b[5:]
            and a[2] == "1.0"
            and {b"close", b"keep-alive"} <= (_connection_options(a))
        ):
            return "RFC 9112 9.3: close wins over an HTTP/1.0 keep-alive"
        return "unexplained: the same request parsed differently"
    if not ours_refused and not ours[2] and mine == theirs:
        finished = outcome(core, [data + b"\r\n\r\n"])
        if finished[1] is not None:
            return "corral judges a line at its end, and the input stops inside it"
    if ours[1] == 413 and not llhttp_refused:
        return "corral refuses a body over the limit at its declared size, llhttp at its bytes"
    if ours_refused and not theirs[index:]:
        finished = outcome(LlhttpParser, [data + b"\r\n\r\n"])
        if finished[1] is not None:
            return "llhttp refuses later in the request, and the input stops before"
    if ours[1] == 501:
        return "RFC 9112 6.1: a transfer coding before chunked is one corral does not implement"
    if ours_refused:
        # the bytes of the request corral refused: after the ones both parsed (llhttp's count)
        segment = data[message_end(data, index) :] if index else data
        line = segment.lstrip(b"\r\n").split(b"\n", 1)[0].rstrip(b"\r")
        if _BARE_CR_FIRST.match(segment):
            return "RFC 9112 2.2: empty lines before a request are skipped, a bare CR is not one"
        if b"  " in line or b"\t" in line:
            return "RFC 9112 3: request-line elements are separated by one SP"
        if line.split(b" ")[2:3] and line.split(b" ")[2].startswith((b"RTSP/", b"ICE/")):
            return "RFC 9112 2.3: HTTP-name is HTTP"
        if ours[1] == 431 and any(
            len(line.rstrip(b"\r")) > LIMITS.field_size + 2 for line in segment.split(b"\n")
        ):
            # so that a partial line can be judged before it ends (the split rule)
            return "a field line may be 2 bytes longer than the field's size: no more OWS"
        if any(
            len(line.rstrip(b"\r")) > LIMITS.field_size and _CHUNK_LINE.match(line)
            for line in segment.split(b"\n")
        ):
            return "RFC 9112 7.1.1: chunk extensions are limited (as a field is, by corral)"
        if any(
            _HOST_VALUE.fullmatch(line[5:].strip(b" \t")) is None
            for line in segment.split(b"\r\n")
            if line[:5].lower() == b"host:"
        ):
            return "RFC 9112 3.2: a Host value other than uri-host [':' port] is 400"
        if _EMPTY_EXTENSION.search(segment):
            return "RFC 9112 7.1.1: a chunk-ext-name is a token, its value a token or quoted-string"
        return "unexplained: corral refuses"
    if llhttp[1] == 431:
        # the old parser counted a value's trailing whitespace against limit_request_field_size
        wider = Limits(LIMITS.request_line, LIMITS.fields, LIMITS.field_size + len(data), 100)
        if _gets_further(data, wider, mine, theirs):
            return "RFC 9110 5.5: a field's size is its name and value, without the OWS around it"
        # and it counted trailer fields together with the head's against limit_request_fields
        wider = Limits(LIMITS.request_line, LIMITS.fields * 2, LIMITS.field_size, 100)
        if _gets_further(data, wider, mine, theirs):
            return "limit_request_fields bounds the head's fields and the trailers, each"
    segment = data[message_end(data, index) :] if index else data
    method = segment.lstrip(b"\r\n").split(b" ", 1)[0]
    if method not in _LLHTTP_METHODS and _TOKEN.fullmatch(method):
        return "RFC 9110 9.1: a method is any token; the application answers an unknown one"
    return "unexplained: llhttp refuses"


def _gets_further(data: bytes, limits: Limits, mine: tuple, theirs: tuple) -> bool:
    """The oracle under ``limits`` completes more requests than it did, and the same as ours:
    the limit was where it stopped."""
    further = _complete(outcome(LlhttpParser, [data], limits)[0])
    return len(further) > len(theirs) and further == mine[: len(further)]


def check(data: bytes, choose: Chooser, cores: Sequence[type]) -> str | None:
    """The parity of ``cores`` on every split of ``data`` (AssertionError if broken), then the
    llhttp comparison of the first core's outcome (its class, None when they agree)."""
    reference = None
    for pieces in splits(choose, data):
        for core in cores:
            got = outcome(core, pieces)
            if reference is None:
                reference = got
            elif got != reference:
                raise AssertionError(
                    f"{core.__module__} fed {[len(p) for p in pieces]} gave {got}, "
                    f"not {reference}, for {data!r}"
                )
    assert reference is not None
    return disagreement(data, reference, outcome(LlhttpParser, [data]), cores[0])


def run(count: int, seed: int, cores: Sequence[type], report: Callable[[str], None]) -> int:
    rng = random.Random(seed)
    choose = RandomChooser(rng)
    classes: Counter[str] = Counter()
    examples: dict[str, bytes] = {}
    for _ in range(count):
        data = generate(choose)
        if choose.chance(0.5):
            data = mutate(choose, data)
        found = check(data, choose, cores)
        if found is not None:
            classes[found] += 1
            examples.setdefault(found, data)
    report(f"{count} inputs, seed {seed}: {count - sum(classes.values())} agreed with llhttp")
    for name, n in classes.most_common():
        report(f"  {n:8d}  {name}\n            e.g. {examples[name][:160]!r}")
    return sum(n for name, n in classes.items() if name.startswith("unexplained"))


def main() -> int:
    from tests.cores import request_parser

    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--count", type=int, default=100_000)
    options.add_argument("--seed", type=int, default=1)
    options.add_argument("--atheris", action="store_true")
    args = options.parse_args()
    cores = [request_parser("compiled"), request_parser("python")]
    if args.atheris:
        return _atheris(args.count, cores)
    return 1 if run(args.count, args.seed, cores, print) else 0


def _atheris(count: int, cores: Sequence[type]) -> int:
    """libFuzzer's mutations, guided by the coverage of the Python code loaded (the twin, the
    oracle; the compiled parser is not instrumented, but is fed every input), from a seed
    corpus of generated requests."""
    import tempfile

    import atheris

    atheris.instrument_all()
    choose = RandomChooser(random.Random(0))

    def one(data: bytes) -> None:
        # a broken parity or an unexplained difference stops the run (libFuzzer keeps the input)
        found = check(data, choose, cores)
        if found is not None and found.startswith("unexplained"):
            raise AssertionError(f"{found}: {data!r}")

    seeds = tempfile.mkdtemp(prefix="corral-seeds-")
    for index in range(500):
        with open(f"{seeds}/{index}", "wb") as seed:
            seed.write(generate(choose))

    atheris.Setup([sys.argv[0], f"-runs={count}", "-max_len=1024", seeds], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())

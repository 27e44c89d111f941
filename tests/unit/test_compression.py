"""Response compression's engine (corral.compression): the decision for each answer, the
negotiation by RFC 9110 §12.5.3, each codec against the real decompressor (whole bodies and
streams flushed piece by piece), and settings.http.compression's validation errors."""

from __future__ import annotations

import copy
import sys
import zlib
from typing import Any

import brotli
import pytest

from corral.compression import CODINGS, CompressionRules, Outcome, build_rules, make_codec
from corral.compression.codecs import check_compressor
from corral.config import ConfigError
from corral.config.document import validate_document

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

BASE = {
    "listeners": {"127.0.0.1:8000": {"pass": "applications/app"}},
    "applications": {"app": {"type": "python", "module": "app"}},
}
HTML = [("Content-Type", "text/html; charset=utf-8")]
PAGE = b"".join(b"<p>line %d of a page that compresses well</p>\n" % i for i in range(400))


def document(compression: Any) -> Any:
    data = copy.deepcopy(BASE)
    data["settings"] = {"http": {"compression": compression}}
    return validate_document(data)


def rules(compression: Any) -> CompressionRules:
    made = build_rules(document(compression).settings.http.compression)
    assert made is not None
    return made


def decide(
    compression: Any,
    headers: list[tuple[str, str]],
    accept: str | None = "gzip, br, zstd",
    length: int | None = 5000,
    method: str = "GET",
    status: int = 200,
) -> Outcome | None:
    return rules(compression).decide(method, status, headers, accept, length)


GZIP = {"compressors": [{"encoding": "gzip"}]}
# the server's order: br, then gzip, then zstd
THREE = {
    "types": ["text/*", "application/json"],
    "compressors": [{"encoding": "br"}, {"encoding": "gzip"}, {"encoding": "zstd"}],
}


def coding(outcome: Outcome | None) -> str | None:
    """The coding an answer is compressed with ("" when only its fields change)."""
    if outcome is None:
        return None
    return outcome.codec.coding if outcome.codec is not None else ""


def field(outcome: Outcome, name: str) -> list[str]:
    return [value for key, value in outcome.headers if key.lower() == name.lower()]


# -- negotiation (RFC 9110 §12.5.3) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("gzip", "gzip"),
        ("gzip, br, zstd", "br"),  # equal weights: the server's order
        ("zstd, gzip", "gzip"),
        ("gzip;q=0.5, br;q=0.8, zstd", "zstd"),  # the client's weights first
        ("gzip;q=0.5, br;q=0.4", "gzip"),
        ("GZIP;Q=0.3", "gzip"),  # names and q without case
        ("x-gzip", "gzip"),  # RFC 9110 §8.4.1.3
        ("*", "br"),  # any coding: the server's first
        ("*;q=0.5, br;q=0", "gzip"),  # br refused, the rest weighed by '*'
        ("identity;q=0, zstd;q=0.1", "zstd"),
        ("br;q=0, gzip;q=0, zstd;q=0", ""),  # none of ours: as it is
        ("gzip;q=0.5, identity", ""),  # the client prefers the body as it is
        ("identity", ""),
        ("compress, deflate", ""),  # codings this server does not make
        ("", ""),  # an empty value: identity only
        (None, ""),  # no field: no server compresses (nginx, Unit, Apache)
        ("*;q=0", ""),  # nothing acceptable, identity neither: sent as it is, never a 406
        ("gzip;q=2, br;q=0.x", ""),  # not qvalues: those elements say nothing
    ],
)
def test_the_coding_is_the_clients_heaviest_then_the_servers_first(
    accept: str | None, expected: str
) -> None:
    outcome = decide(THREE, HTML, accept)
    assert coding(outcome) == expected
    assert outcome is not None and field(outcome, "Vary") == ["Accept-Encoding"]


def test_the_request_header_list_is_searched_for_accept_encoding() -> None:
    """The response path may hand the request's parsed fields instead of the value: they are
    read only when the answer gets as far as the negotiation, several fields joined."""
    made = rules(THREE)
    request = [(b"Host", b"x"), (b"ACCEPT-ENCODING", b"gzip;q=0.5"), (b"accept-encoding", b"zstd")]
    assert coding(made.decide("GET", 200, HTML, request, None)) == "zstd"
    assert coding(made.decide("GET", 200, HTML, [(b"Host", b"x")], None)) == ""
    assert coding(made.decide("GET", 200, HTML, [(b"Accept-Encoding", b"br")], None)) == "br"


def test_a_known_length_leaves_out_the_compressors_it_does_not_reach() -> None:
    compression = {
        "compressors": [
            {"encoding": "br", "min_length": 1000},
            {"encoding": "gzip", "min_length": 300},
        ]
    }
    assert coding(decide(compression, HTML, "br, gzip", length=5000)) == "br"
    assert coding(decide(compression, HTML, "br, gzip", length=500)) == "gzip"
    assert coding(decide(compression, HTML, "br", length=500)) == ""  # Vary: a longer body is
    assert decide(compression, HTML, "br, gzip", length=299) is None  # below every one
    assert coding(decide(compression, HTML, "br, gzip", length=None)) == "br"  # streamed


# -- which answers ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [100, 101, 103, 204, 206])
def test_answers_without_a_whole_body_are_never_compressed(status: int) -> None:
    assert decide(GZIP, HTML, status=status) is None


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_304_has_the_vary_and_etag_the_200_would_have(method: str) -> None:
    """RFC 9110 §15.4.5: the 200 for this request would be compressed, its ETag weak; a
    client revalidating that copy gets a 304 saying so, and no Content-Encoding."""
    headers = [*HTML, ("ETag", '"v1"'), ("Cache-Control", "max-age=60")]
    outcome = decide(GZIP, headers, "gzip", length=None, method=method, status=304)
    assert outcome is not None and outcome.codec is None
    assert outcome.headers == [
        *HTML,
        ("ETag", 'W/"v1"'),
        ("Cache-Control", "max-age=60"),
        ("Vary", "Accept-Encoding"),
    ]
    # the 200 would not be compressed for this client: its ETag stays strong, Vary all the same
    outcome = decide(GZIP, headers, "br", length=None, method=method, status=304)
    assert outcome is not None and outcome.headers == [*headers, ("Vary", "Accept-Encoding")]
    # a 304 handed with a length of 0 is not a short body
    assert decide(GZIP, headers, "gzip", length=0, status=304) is not None
    # without a type (a 304 may have none) it cannot be told: left alone
    assert decide(GZIP, [("ETag", '"v1"')], "gzip", length=None, status=304) is None


def test_other_statuses_are_compressed() -> None:
    for status in (200, 201, 301, 404, 500):
        assert coding(decide(GZIP, HTML, status=status)) == "gzip"


def test_a_head_gets_vary_and_the_gets_fields_but_no_coding() -> None:
    headers = [*HTML, ("Content-Length", "5000"), ("ETag", '"v1"')]
    outcome = decide(GZIP, headers, method="HEAD")
    assert outcome is not None and outcome.codec is None
    assert outcome.headers == [*headers, ("Vary", "Accept-Encoding")]


@pytest.mark.parametrize(
    "extra",
    [
        ("Content-Encoding", "gzip"),  # already encoded
        ("content-encoding", "br"),
        ("Cache-Control", "no-transform"),
        ("Cache-Control", "public, max-age=60, No-Transform"),
        ("Content-Range", "bytes 0-99/5000"),
    ],
)
def test_an_encoded_untransformable_or_partial_answer_is_left_alone(
    extra: tuple[str, str],
) -> None:
    assert decide(GZIP, [*HTML, extra]) is None


def test_a_cache_control_without_no_transform_is_compressed() -> None:
    for value in ("public, max-age=60", "x-no-transform-ish", "no-store"):
        headers = [*HTML, ("Cache-Control", value)]
        assert coding(decide(GZIP, headers)) == "gzip", value


def test_content_encoding_identity_turns_compression_off_and_is_not_sent() -> None:
    """An application's way to keep one answer uncompressed (BREACH): the field is dropped
    (RFC 9110 keeps identity out of Content-Encoding) and nothing else changes."""
    headers = [*HTML, ("Content-Encoding", " Identity"), ("Content-Length", "5000")]
    outcome = decide(GZIP, headers)
    assert outcome is not None and outcome.codec is None
    assert outcome.headers == [*HTML, ("Content-Length", "5000")]
    # its type not listed: the field is dropped all the same
    outcome = decide(GZIP | {"types": ["application/json"]}, headers)
    assert outcome is not None and outcome.headers == [*HTML, ("Content-Length", "5000")]


@pytest.mark.parametrize(
    ("content_type", "listed"),
    [
        ("text/html", True),
        ("text/html; charset=utf-8", True),
        ("TEXT/Plain;charset=UTF-8", True),
        ("application/json", True),
        ("application/json-seq", False),
        ("text/event-stream", False),  # negated
        ("image/png", False),
        ("", False),
        (";charset=utf-8", False),
    ],
)
def test_types_are_unit_patterns_on_the_media_type(content_type: str, listed: bool) -> None:
    compression = {
        "types": ["text/*", "application/json", "!text/event-stream"],
        "compressors": [{"encoding": "gzip"}],
    }
    outcome = decide(compression, [("Content-Type", content_type)])
    assert coding(outcome) == ("gzip" if listed else None)


def test_without_types_every_type_but_an_answer_without_one() -> None:
    assert coding(decide(GZIP, [("Content-Type", "image/png")])) == "gzip"
    assert decide(GZIP, [("Content-Length", "5000")]) is None
    regex = {"types": ["~^text/(html|css)$"], "compressors": [{"encoding": "gzip"}]}
    assert coding(decide(regex, [("Content-Type", "text/css")])) == "gzip"
    assert decide(regex, [("Content-Type", "text/csv")]) is None


def test_a_body_below_min_length_or_empty_is_left_alone() -> None:
    assert decide(GZIP, HTML, length=255) is None  # the default min_length: 256
    assert coding(decide(GZIP, HTML, length=256)) == "gzip"
    none = {"compressors": [{"encoding": "gzip", "min_length": 0}]}
    assert decide(none, HTML, length=0) is None
    assert coding(decide(none, HTML, length=1)) == "gzip"
    assert rules(GZIP).least_length == 256 and rules(none).least_length == 1


# -- the fields of a compressed answer ----------------------------------------------------------


def test_a_compressed_answers_fields() -> None:
    headers = [
        ("Content-Type", "text/html"),
        ("Content-Length", "5000"),
        ("ETag", '"33a64df5"'),
        ("Accept-Ranges", "bytes"),
        ("Set-Cookie", "a=1"),
    ]
    given = list(headers)
    outcome = decide(GZIP, headers)
    assert outcome is not None
    assert outcome.headers == [
        ("Content-Type", "text/html"),
        ("ETag", 'W/"33a64df5"'),  # the compressed bytes are not the identity's
        ("Set-Cookie", "a=1"),
        ("Content-Encoding", "gzip"),
        ("Vary", "Accept-Encoding"),
    ]
    assert headers == given  # the application's list is not changed


@pytest.mark.parametrize(
    ("etag", "sent"),
    [('"x"', 'W/"x"'), ('W/"x"', 'W/"x"'), (' "x" ', 'W/"x"')],
)
def test_a_strong_etag_becomes_weak_and_a_weak_one_stays(etag: str, sent: str) -> None:
    outcome = decide(GZIP, [*HTML, ("ETag", etag)])
    assert outcome is not None and field(outcome, "ETag") == [sent]


@pytest.mark.parametrize(
    ("vary", "sent"),
    [
        (["Cookie"], ["Cookie, Accept-Encoding"]),
        (["Cookie, User-Agent"], ["Cookie, User-Agent, Accept-Encoding"]),
        (["accept-encoding"], ["accept-encoding"]),
        (["Origin, Accept-Encoding"], ["Origin, Accept-Encoding"]),
        (["*"], ["*"]),
        ([""], ["Accept-Encoding"]),
        (["Cookie", "Accept-Encoding"], ["Cookie", "Accept-Encoding"]),
        (["Cookie", "Origin"], ["Cookie", "Origin, Accept-Encoding"]),
    ],
)
@pytest.mark.parametrize("accept", ["gzip", None])
def test_vary_is_merged_with_the_applications(
    vary: list[str], sent: list[str], accept: str | None
) -> None:
    """Compressed or not (no Accept-Encoding), the answer says it varies with it."""
    outcome = decide(GZIP, [*HTML, *(("Vary", value) for value in vary)], accept)
    assert outcome is not None and field(outcome, "Vary") == sent
    assert coding(outcome) == ("gzip" if accept else "")


# -- the codecs ---------------------------------------------------------------------------------


def decompressor(name: str) -> Any:
    """A streaming decompressor of the coding: feed(bytes) -> bytes, and whether it saw the
    stream's end."""
    if name == "gzip":
        return zlib.decompressobj(31)
    if name == "deflate":
        return zlib.decompressobj(15)
    if name == "br":
        return brotli.Decompressor()
    return zstd.ZstdDecompressor()


def unpack(name: str, data: bytes) -> bytes:
    whole = decompressor(name)
    out = whole.process(data) if name == "br" else whole.decompress(data)
    assert ended(name, whole), "the stream is not complete"
    return out  # type: ignore[no-any-return]


def ended(name: str, whole: Any) -> bool:
    return bool(whole.is_finished() if name == "br" else whole.eof)


# a level of each coding's range: the lowest, the default and the highest (zstd's top level
# only for whole bodies: a stream at 19 holds 80 MiB)
LEVELS = [
    (name, level)
    for name, coding in CODINGS.items()
    for level in sorted({coding.lowest, coding.default, coding.highest})
]


@pytest.mark.parametrize(("name", "level"), LEVELS)
def test_a_whole_body_round_trips(name: str, level: int) -> None:
    codec = make_codec(name, level)
    assert (codec.coding, codec.level) == (name, level)
    for body in (PAGE, b"x", bytes(range(256)) * 50):
        compressed = codec.whole(body)
        assert unpack(name, compressed) == body
    assert len(codec.whole(PAGE)) < len(PAGE) / 5


@pytest.mark.parametrize(("name", "level"), [(n, lv) for n, lv in LEVELS if lv < 19])
def test_each_piece_fed_leaves_decompressible_at_once(name: str, level: int) -> None:
    """What `feed` returns, with what came before, decompresses to every byte fed so far:
    a streamed answer's piece reaches the client when the application sends it."""
    encoder = make_codec(name, level).stream()
    decoder = decompressor(name)
    pieces = [b'data: {"tick": %d}\n\n' % i for i in range(50)] + [PAGE, b"", b"end"]
    fed = received = b""
    for piece in pieces:
        out = encoder.feed(piece)
        if not piece:
            assert out == b""  # never an empty chunk
            continue
        assert out
        fed += piece
        received += decoder.process(out) if name == "br" else decoder.decompress(out)
        assert received == fed
    tail = encoder.finish()
    received += decoder.process(tail) if name == "br" else decoder.decompress(tail)
    assert received == fed and ended(name, decoder)


def test_gzip_and_deflate_are_their_formats() -> None:
    assert zlib.decompress(make_codec("gzip", 6).whole(PAGE), 31) == PAGE
    assert zlib.decompress(make_codec("deflate", 6).whole(PAGE)) == PAGE  # the zlib wrapper
    assert make_codec("gzip", 6).whole(PAGE)[:2] == b"\x1f\x8b"


def test_gzip_levels_one_to_three_use_isal_and_higher_ones_zlib() -> None:
    pytest.importorskip("isal", reason="ISA-L is the compression extra's (pip install isal)")
    for level in range(1, 10):
        codec = make_codec("gzip", level)
        assert codec.library == ("isal" if level <= 3 else "zlib"), level
    assert make_codec("deflate", 2).library == "isal"


def test_a_zstd_streams_window_is_at_most_512_kib() -> None:
    """At every level a stream's window is capped (RFC 9659's limit is 8 MiB): the frame
    header says it (RFC 8878 §3.1.1.1.2)."""
    for level in (3, 6, 12):
        encoder = make_codec("zstd", level).stream()
        frame = encoder.feed(PAGE) + encoder.finish()
        descriptor = frame[4]
        assert not descriptor & 0x20  # not a single segment: the window is given
        exponent, mantissa = frame[5] >> 3, frame[5] & 7
        window = (1 << (10 + exponent)) + ((1 << (10 + exponent)) // 8) * mantissa
        assert window <= 512 * 1024, level


def test_a_whole_zstd_frame_says_its_size() -> None:
    frame = make_codec("zstd", 3).whole(PAGE)
    assert zstd.get_frame_info(frame).decompressed_size == len(PAGE)


def test_a_worker_makes_each_codec_once_in_the_servers_order() -> None:
    made = rules(THREE)
    assert [c.coding for c in made.codecs] == ["br", "gzip", "zstd"]
    outcome = made.decide("GET", 200, HTML, "gzip", None)
    assert outcome is not None and outcome.codec is made.codecs[1]
    assert build_rules(document(None).settings.http.compression) is None


# -- settings.http.compression ------------------------------------------------------------------


def test_unit_shapes_are_accepted() -> None:
    one = document({"compressors": {"encoding": "gzip", "level": 9, "min_length": 0}})
    assert one.settings.http.compression.compressors.level == 9
    many = document({"types": "text/html", "compressors": [{"encoding": "deflate"}]})
    assert many.settings.http.compression.types == "text/html"
    assert document(None).settings.http.compression is None


@pytest.mark.parametrize(
    ("compression", "message"),
    [
        (
            {"compressors": [{"encoding": "gzip", "level": 12}]},
            '$.settings.http.compression.compressors[0]: expected "level" from 1 to 9 for '
            "gzip, got 12",
        ),
        (
            {"compressors": {"encoding": "br", "level": -1}},
            '$.settings.http.compression.compressors: expected "level" from 0 to 11 for br, got -1',
        ),
        (
            {"compressors": [{"encoding": "gzip"}, {"encoding": "zstd", "level": 22}]},
            '$.settings.http.compression.compressors[1]: expected "level" from -7 to 19 for '
            "zstd, got 22 (above 19 the window passes the 8 MiB an HTTP client may refuse, "
            "RFC 9659)",
        ),
        (
            {"compressors": [{"encoding": "lz4"}]},
            '$.settings.http.compression.compressors[0]: expected "encoding" one of "gzip", '
            '"deflate", "br", "zstd", got "lz4"',
        ),
        (
            {"compressors": [{"level": 3}]},
            '$.settings.http.compression.compressors[0]: missing required key "encoding"',
        ),
        (
            {"compressors": [{"encoding": "gzip", "min_length": -1}]},
            "$.settings.http.compression.compressors[0].min_length: expected int >= 0, got -1",
        ),
        (
            {"compressors": [{"encoding": "gzip", "lvl": 1}]},
            "$.settings.http.compression.compressors[0].lvl: unknown key",
        ),
        (
            {"compressors": []},
            '$.settings.http.compression: "compressors": expected at least one compressor, got []',
        ),
        (
            {"compressors": [{"encoding": "gzip"}, {"encoding": "gzip", "level": 6}]},
            '$.settings.http.compression: "compressors": "gzip" is listed twice (the second '
            "would never be chosen)",
        ),
        (
            {"types": ["text/**"], "compressors": [{"encoding": "gzip"}]},
            "$.settings.http.compression: types[0]: pattern 'text/**' has '**'; one '*' "
            "already matches any run",
        ),
        (
            {"types": [1], "compressors": [{"encoding": "gzip"}]},
            "$.settings.http.compression.types[0]: expected string, got 1",
        ),
        (
            {"types": ["text/*"]},
            '$.settings.http.compression: missing required key "compressors"',
        ),
        (
            {"compressor": [{"encoding": "gzip"}]},
            '$.settings.http.compression.compressor: unknown key (did you mean "compressors"?)',
        ),
        (
            "gzip",
            '$.settings.http.compression: expected object {types, compressors} or null, got "gzip"',
        ),
    ],
)
def test_each_mistake_is_one_line_naming_its_place(compression: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        document(compression)
    assert str(caught.value) == message


def test_a_coding_whose_library_is_missing_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "brotli", None)  # what an absent package looks like
    assert check_compressor("br", 4) == (
        'br needs the brotli package: pip install "corral[compression]" (or brotli)'
    )
    with pytest.raises(ConfigError) as caught:
        document({"compressors": [{"encoding": "gzip"}, {"encoding": "br"}]})
    assert str(caught.value) == (
        "$.settings.http.compression.compressors[1]: br needs the brotli package: "
        'pip install "corral[compression]" (or brotli)'
    )
    assert check_compressor("gzip", 1) == ""  # the standard library's

"""Accept-Encoding by RFC 9110 §12.5.3: weights, ``*``, ``identity;q=0``, and the choice of
an offer by the client's weights with the server's order breaking ties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.http.accept import IDENTITY_ONLY, choose, parse_accept_encoding

OFFERS = ("br", "zstd", "gzip", "identity")


@pytest.mark.parametrize(
    ("value", "chosen"),
    [
        # browsers' values: every offer weighs 1, so the server's order decides
        ("gzip, deflate, br, zstd", "br"),
        ("gzip, deflate, br", "br"),
        ("gzip, deflate", "gzip"),
        (b"gzip, deflate, br, zstd", "br"),
        # the client's weights come first
        ("br;q=0.5, gzip", "gzip"),
        ("br;q=0.5, gzip;q=0.8, zstd;q=0.9", "zstd"),
        ("gzip;q=1.0, br;q=0.999", "gzip"),
        ("GZIP", "gzip"),
        ("x-gzip", "gzip"),
        ("gzip ; q=0.5 , br ; Q=0.4", "gzip"),
        # '*' weighs what is not named, identity included
        ("*", "br"),
        ("*;q=0.5, gzip", "gzip"),
        ("br;q=0, *", "zstd"),
        ("*;q=0", None),
        ("*;q=0, identity", "identity"),
        ("identity;q=0", None),
        ("identity;q=0, gzip;q=0.1", "gzip"),
        # identity is acceptable unless excluded
        ("compress", "identity"),
        ("", "identity"),
        (None, "identity"),
        ("gzip;q=0", "identity"),
        # a weight that is no qvalue drops its element only
        ("br;q=2, gzip", "gzip"),
        ("br;q=abc, gzip;q=0.5", "gzip"),
        ("br;q=0.1234", "identity"),
        ("br;q=1.001", "identity"),
        ("br;q=1., gzip;q=0.9", "br"),
        ("br;q=.5", "identity"),
        ("br;q=\u0661", "identity"),  # a non-ASCII digit is no digit of a qvalue
        # junk elements are skipped
        (", ,gzip,", "gzip"),
        ("gzip;level=9", "gzip"),
    ],
)
def test_choice(value: str | bytes | None, chosen: str | None) -> None:
    assert choose(OFFERS, parse_accept_encoding(value)) == chosen


def test_weights_in_thousandths() -> None:
    accepted = parse_accept_encoding("gzip;q=0.5, br;q=0.05, *;q=0.001")
    assert accepted.weight("gzip") == 500
    assert accepted.weight("br") == 50
    assert accepted.weight("zstd") == 1
    assert accepted.weight("identity") == 1
    assert IDENTITY_ONLY.weight("identity") == 1  # acceptable, below any named coding
    assert IDENTITY_ONLY.weight("gzip") == 0


def test_a_coding_named_twice_keeps_its_highest_weight() -> None:
    assert parse_accept_encoding("gzip;q=0, gzip;q=0.5").weight("gzip") == 500


def test_offers_without_identity_may_find_none() -> None:
    assert choose(("br", "gzip"), parse_accept_encoding("deflate")) is None
    assert choose(("br", "gzip"), parse_accept_encoding("deflate, gzip")) == "gzip"


def test_parses_and_choices_are_cached() -> None:
    first = parse_accept_encoding("gzip, br")
    assert parse_accept_encoding("gzip, br") is first
    assert choose(["gzip", "br"], first) == "gzip"  # a list is keyed as its tuple
    assert choose(("br", "gzip"), first) == "br"


def test_the_caches_stay_bounded() -> None:
    for i in range(2000):
        parse_accept_encoding(f"gzip;q=0.{i % 1000:03d}, x{i}")
    accepted = parse_accept_encoding("gzip")
    for i in range(100):
        choose((f"c{i}", "gzip"), accepted)
    from corral.http import accept

    assert len(accept._parsed) <= accept._CACHE_LIMIT
    assert len(accepted._choices) <= accept._CHOICES_LIMIT


@given(st.text(alphabet=st.sampled_from(list("gzipbr*;q=0.15, \tidentyX-")), max_size=40))
def test_any_value_parses_to_an_offer_or_none(value: str) -> None:
    chosen = choose(OFFERS, parse_accept_encoding(value))
    assert chosen is None or chosen in OFFERS
    if chosen is not None:
        assert parse_accept_encoding(value).weight(chosen) > 0

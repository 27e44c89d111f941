"""``--compression CODINGS``: the flag's value as the document's ``settings.http.compression``,
and its mistakes as one line each (corral.compression.flag)."""

from __future__ import annotations

import pytest

from corral.compression.flag import COMPRESSIBLE_TYPES
from corral.config.errors import Invalid
from corral.config.settings import SETTINGS
from corral.config.values import Compression, Compressor

COMPRESSION = next(setting for setting in SETTINGS if setting.name == "compression")


def parse_codings(value: object) -> object:
    assert COMPRESSION.resolve is not None
    try:
        return COMPRESSION.resolve(value)
    except Invalid as exc:
        raise ValueError(exc.message) from None


def test_codings_in_order_with_their_levels() -> None:
    setting = parse_codings("gzip:6, br ,zstd:-1")
    assert setting == Compression(
        types=COMPRESSIBLE_TYPES,
        compressors=[
            Compressor(encoding="gzip", level=6),
            Compressor(encoding="br"),
            Compressor(encoding="zstd", level=-1),
        ],
    )


def test_a_table_from_a_document_passes_as_it_is() -> None:
    table = {"types": ["text/*"], "compressors": {"encoding": "gzip"}}
    assert parse_codings(table) is table


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "expected CODING[:LEVEL],... (gzip, br, zstd), got ''"),
        ("gzip,,br", "expected CODING[:LEVEL],..."),
        ("gzip:high", "gzip: expected a whole number for its level, got 'high'"),
        ("gzip:10", 'expected "level" from 1 to 9 for gzip, got 10'),
        ("lzma", '"encoding" one of "gzip", "deflate", "br", "zstd", got "lzma"'),
    ],
)
def test_each_mistake_is_one_line(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_codings(value)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)

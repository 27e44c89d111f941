"""`corral.apps.venv`'s reading of pyvenv.cfg, and `home` in the document."""

from __future__ import annotations

import pytest

from corral.apps.venv import recorded_version
from corral.config import ConfigError
from corral.config.document import validate_document


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("home = /usr/bin\nversion = 3.11.2\n", (3, 11)),  # venv
        ("home = /usr/bin\nversion_info = 3.12.1.final.0\nversion = 3.11\n", (3, 12)),  # virtualenv
        ("VERSION_INFO=3.9.18\n", (3, 9)),  # uv writes no spaces; keys in any case
        ("home = /usr/bin\n", None),
        ("version = three\n", None),
    ],
)
def test_recorded_version(text, version):
    assert recorded_version(text) == version


def document(**app):
    return {"applications": {"a": {"module": "m", **app}}}


def test_home_in_the_document_is_absolute():
    assert validate_document(document(home="/srv/venv")).applications["a"].home == "/srv/venv"
    with pytest.raises(ConfigError) as info:
        validate_document(document(home="venv"))
    assert str(info.value) == ('$.applications.a.home: expected absolute path or null, got "venv"')


def test_home_and_preload_are_refused_together():
    with pytest.raises(ConfigError, match=r"^\$\.applications\.a\.home: home cannot be combined"):
        validate_document(document(home="/srv/venv", preload=True))

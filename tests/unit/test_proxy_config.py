"""The PROXY protocol's settings: `--proxy-protocol [MODE]`, `--proxy-allow-from`, their file
keys, a listener's own `proxy_protocol`/`proxy_allow_from`, and the per-listener choice the
master hands to the workers (`proxied.proxy_choice`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.config import ConfigError, load, validate_document
from corral.config.listening import ProxyMode
from corral.config.sources import format_help
from corral.server.proxied import ProxyPlan, proxy_choice

GUNICORN_DEFAULT = ["127.0.0.1", "::1"]


def settings_of(*argv: str):
    return load(["app:application", *argv]).settings


@pytest.mark.parametrize(
    ("argv", "mode"),
    [
        ((), ProxyMode.OFF),
        (("--proxy-protocol",), ProxyMode.AUTO),  # Gunicorn: the flag alone is auto
        (("--proxy-protocol", "v1"), ProxyMode.V1),
        (("--proxy-protocol=v2",), ProxyMode.V2),
        (("--proxy-protocol", "off"), ProxyMode.OFF),
        (("--proxy-protocol", "-w", "2"), ProxyMode.AUTO),
    ],
)
def test_the_flag_with_or_without_a_mode(argv: tuple[str, ...], mode: ProxyMode) -> None:
    settings = settings_of(*argv)
    assert settings.proxy_protocol is mode
    assert settings.proxy_allow_from == GUNICORN_DEFAULT


def test_allow_from_takes_gunicorns_comma_list_and_star() -> None:
    settings = settings_of("--proxy-protocol", "--proxy-allow-from", "10.0.0.0/8, 192.0.2.7,::1")
    assert settings.proxy_allow_from == ["10.0.0.0/8", "192.0.2.7", "::1"]
    assert settings_of("--proxy-allow-from", "*").proxy_allow_from == ["*"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--proxy-protocol", "v3"),
            '--proxy-protocol: expected "off", "v1", "v2" or "auto" (a bool in a file), got "v3"',
        ),
        (
            ("--proxy-allow-from", "10.0.0.0/8,nonsense"),
            "--proxy-allow-from: address pattern 'nonsense': expected an IPv4 address, a CIDR "
            "block or a range",
        ),
        (("--proxy-allow-from", ","), "--proxy-allow-from: expected at least one address, or '*'"),
    ],
)
def test_bad_values_are_one_line(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_of(*argv)
    assert str(info.value) == message


def test_file_keys_take_gunicorns_boolean_too(tmp_path: Path) -> None:
    path = tmp_path / "corral.toml"
    path.write_text('app = "app"\nproxy_protocol = true\nproxy_allow_from = ["10.1.0.0/16"]\n')
    settings = load(["-c", str(path)]).settings
    assert (settings.proxy_protocol, settings.proxy_allow_from) == (ProxyMode.AUTO, ["10.1.0.0/16"])
    path.write_text('app = "app"\nproxy_protocol = false\n')
    assert load(["-c", str(path)]).settings.proxy_protocol is ProxyMode.OFF


def test_help_shows_the_optional_mode() -> None:
    text = format_help()
    assert "--proxy-protocol [MODE]" in text
    assert "--proxy-allow-from ADDRESSES" in text


def document(listener: dict, settings: dict | None = None):
    return validate_document(
        {
            "listeners": {"127.0.0.1:8000": {"pass": "applications/a", **listener}},
            "applications": {"a": {"module": "app"}},
            "settings": settings or {},
        }
    )


@pytest.mark.parametrize(
    ("listener", "settings", "choice"),
    [
        ({}, {}, None),
        ({}, {"proxy_protocol": "auto"}, (ProxyMode.AUTO, ("127.0.0.1", "::1"))),
        ({"proxy_protocol": True}, {}, (ProxyMode.AUTO, ("127.0.0.1", "::1"))),
        (
            {"proxy_protocol": "v2", "proxy_allow_from": "10.0.0.1"},
            {},
            (ProxyMode.V2, ("10.0.0.1",)),
        ),
        ({"proxy_protocol": False}, {"proxy_protocol": "v1"}, None),  # the listener's own wins
        (
            {"proxy_allow_from": ["*"]},
            {"proxy_protocol": "v1", "proxy_allow_from": ["10.0.0.0/8"]},
            (ProxyMode.V1, ("*",)),
        ),
    ],
)
def test_a_listener_key_overrides_the_setting(listener: dict, settings: dict, choice) -> None:
    doc = document(listener, settings)
    assert proxy_choice(doc.listeners["127.0.0.1:8000"], doc.settings) == choice


@pytest.mark.parametrize(
    ("listener", "message"),
    [
        (
            {"proxy_protocol": "v9"},
            '$.listeners["127.0.0.1:8000"].proxy_protocol: expected',
        ),
        (
            {"proxy_allow_from": ["10.0.0.1", "10.0.0.0/99"]},
            '$.listeners["127.0.0.1:8000"].proxy_allow_from[1]: address pattern',
        ),
    ],
)
def test_bad_listener_keys_are_one_line(listener: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        document(listener)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("allow", "peer", "allowed"),
    [
        (("127.0.0.1", "::1"), ("127.0.0.1", 5000), True),
        (("127.0.0.1", "::1"), ("::1", 5000, 0, 0), True),
        (("127.0.0.1", "::1"), ("10.0.0.1", 5000), False),
        (("10.0.0.0/8",), ("10.200.0.1", 1), True),
        (("*",), ("203.0.113.9", 1), True),
        (("10.0.0.0/8",), "/run/corral.sock", True),  # a unix socket's peer: always
        (("10.0.0.0/8",), "", True),
    ],
)
def test_the_plan_checks_the_peer(allow: tuple, peer, allowed: bool) -> None:
    import logging

    plan = ProxyPlan(ProxyMode.AUTO, allow, logging.getLogger("test"))
    assert plan.allows(peer) is allowed

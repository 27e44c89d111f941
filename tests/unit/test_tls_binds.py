"""Plain listeners beside HTTPS ones from the command line (issue 33, point 5): Hypercorn's
``--insecure-bind`` and the redirect of ``--https-redirect``, as the document they make."""

from __future__ import annotations

import msgspec
import pytest

from corral.config import ConfigError, load, validate_document
from corral.config.listener_tls import Tls
from tests.unit.test_config import error_of

TLS = ["--certfile", "site.pem", "--keyfile", "site.key"]


def test_insecure_binds_are_plain_listeners_beside_the_https_binds() -> None:
    doc = load(["app", *TLS, "-b", ":8443", "--insecure-bind", ":8080", "--insecure-bind", "8081"])
    tls = {key: listener.tls for key, listener in doc.listeners.items()}
    assert tls == {"0.0.0.0:8443": msgspec.UNSET, "0.0.0.0:8080": False, "127.0.0.1:8081": False}
    assert {listener.pass_ for listener in doc.listeners.values()} == {"applications/app"}
    assert doc.routes is msgspec.UNSET


@pytest.mark.parametrize(
    ("bind", "location"),
    [(":443", "https://$host$request_uri"), ("127.0.0.1:8443", "https://$host:8443$request_uri")],
)
def test_the_redirect_flag_routes_the_plain_listeners_to_the_first_bind(
    bind: str, location: str
) -> None:
    argv = ["app", *TLS, "-b", bind, "--insecure-bind", ":80", "--https-redirect"]
    doc = load(argv)
    assert doc.listeners["0.0.0.0:80"].pass_ == "routes/https_redirect"
    assert doc.listeners[bind.replace(":443", "0.0.0.0:443")].pass_ == "applications/app"
    assert doc.routes == {
        "https_redirect": [
            {"match": {"method": ["GET", "HEAD"]}, "action": {"return": 301, "location": location}},
            {"action": {"return": 308, "location": location}},
        ]
    }


def test_the_redirect_beside_static_routes_names_both(tmp_path) -> None:
    argv = ["app", *TLS, "-b", ":8443", "--insecure-bind", ":80", "--https-redirect"]
    doc = load([*argv, "--static", f"/static={tmp_path}"])
    assert doc.listeners["0.0.0.0:8443"].pass_ == "routes/served"
    assert doc.listeners["0.0.0.0:80"].pass_ == "routes/https_redirect"
    assert set(doc.routes) == {"served", "https_redirect"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--https-redirect"], "--https-redirect: redirects the plain listeners of "
         "insecure_bind to HTTPS: give one (--insecure-bind ADDRESS)"),
        (["--https-redirect", "--insecure-bind", "80"], "--https-redirect: redirects to HTTPS: "
         "give certfile and keyfile for the binds"),
        ([*TLS, "-b", "127.0.0.1:0", "--insecure-bind", "80", "--https-redirect"],
         "--https-redirect: redirects to the port of the first bind address, which needs one "
         "(a TCP address with a port other than 0), not 127.0.0.1:0"),
        ([*TLS, "--insecure-bind", "8000"], "--insecure-bind: 127.0.0.1:8000 is also a bind "
         "address (HTTPS); one address speaks one protocol"),
    ],
)  # fmt: skip
def test_mistakes_are_one_line(argv: list[str], message: str) -> None:
    assert error_of(["app", *argv]) == message


def test_a_document_listener_says_true_false_or_names_the_store() -> None:
    listeners = {
        "127.0.0.1:80": {"pass": "applications/app", "tls": False},
        "127.0.0.1:443": {"pass": "applications/app", "tls": True},
        "127.0.0.1:8443": {"pass": "applications/app", "tls": {"certificate": "site"}},
    }
    doc = validate_document({"listeners": listeners, "applications": {"app": {"module": "m"}}})
    tls = {key: listener.tls for key, listener in doc.listeners.items()}
    assert tls["127.0.0.1:80"] is False and tls["127.0.0.1:443"] is True
    assert isinstance(tls["127.0.0.1:8443"], Tls) and tls["127.0.0.1:8443"].names == ("site",)
    expected = (
        r"\.tls: expected object \{certificate, session, conf_commands, client_certificate\} "
        "or true or false"
    )
    with pytest.raises(ConfigError, match=expected):
        validate_document({"listeners": {"127.0.0.1:80": {"pass": "routes", "tls": "site"}}})

"""NGINX Unit's certificate store without sockets: a PEM bundle parsed and checked
(tls/bundle.py), kept on disk and restored (tls/store.py), and /certificates' answers
(control/certificates.py), with bundles made at test time (tests/certificates.py)."""

from __future__ import annotations

import base64
import datetime
import logging
import os
import stat
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives import serialization

from corral.config import ConfigError, validate_document
from corral.control import certificates
from corral.tls.bundle import BundleError, parse_bundle, unit_time
from corral.tls.store import CertificateStore
from tests.certificates import DAY, NOW, authority, leaf, self_signed

# -- one bundle --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, key_text", [("rsa", "RSA (2048 bits)"), ("ec", "ECDH")])
def test_a_ca_signed_bundle_is_described_as_unit_describes_it(kind, key_text):
    issued = leaf(kind, dns=("example.test", "*.example.test"))
    bundle = parse_bundle(issued.bundle())
    assert bundle.names == ("example.test", "*.example.test")
    assert bundle.not_after == issued.certificate.not_valid_after_utc
    assert bundle.not_before == issued.certificate.not_valid_before_utc
    since, until = unit_time(NOW - DAY), unit_time(NOW + 90 * DAY)
    ca = {"common_name": "Test Intermediate CA", "country": "NZ", "organization": "Corral Tests"}
    root_name = {"common_name": "Test Root CA", "country": "NZ", "organization": "Corral Tests"}
    assert bundle.info == {
        "key": key_text,
        "chain": [
            {
                "subject": {
                    "common_name": "example.test",
                    "alt_names": ["example.test", "*.example.test"],
                },
                "issuer": ca,
                "validity": {"since": since, "until": until},
            },
            {"subject": ca, "issuer": root_name, "validity": {"since": since, "until": until}},
            {
                "subject": root_name,
                "issuer": root_name,
                "validity": {"since": since, "until": until},
            },
        ],
    }
    # the key and the chain as a TLS context loads them: the leaf first, then its issuers
    assert bundle.chain_pem == issued.certificate_pem + issued.chain_pem
    assert bundle.key_pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert serialization.load_pem_private_key(bundle.key_pem, None).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == issued.certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert bundle.pem == issued.bundle()
    assert b"PRIVATE" not in repr(bundle).encode()  # a bundle may be logged, never its key


def test_unit_time_is_openssl_asn1_time_print():
    moment = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    assert unit_time(moment) == "Jan  2 03:04:05 2030 GMT"
    assert unit_time(moment.replace(day=12, month=11)) == "Nov 12 03:04:05 2030 GMT"


def test_the_key_may_come_first_and_the_names_fall_back_on_the_common_name():
    issued = self_signed("ec", common="only-cn.test")
    bundle = parse_bundle(b"some words before\n" + issued.key_pem + issued.certificate_pem)
    assert bundle.names == ("only-cn.test",)
    assert bundle.info["chain"][0]["subject"] == {"common_name": "only-cn.test"}
    assert "alt_names" not in bundle.info["chain"][0]["subject"]


def test_openssls_trusted_certificate_is_read_without_its_trust_data():
    issued = leaf("ec")
    der = issued.certificate.public_bytes(serialization.Encoding.DER)
    aux = bytes.fromhex("3000")  # an empty X509_CERT_AUX: a DER SEQUENCE after the certificate
    body = base64.encodebytes(der + aux)
    trusted = (
        b"-----BEGIN TRUSTED CERTIFICATE-----\n" + body + b"-----END TRUSTED CERTIFICATE-----\n"
    )
    bundle = parse_bundle(trusted + issued.chain_pem + issued.key_pem)
    assert bundle.chain_pem == issued.certificate_pem + issued.chain_pem


def _pkcs8_encrypted(issued):
    return issued.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )


def _refusals():
    good, other = leaf("ec"), leaf("ec")
    return [
        ("mismatched key", good.certificate_pem + good.chain_pem + other.key_pem,
         "the private key does not match the first certificate (CN=example.test)"),
        ("intermediate first", good.chain_pem + good.certificate_pem + good.key_pem,
         "the private key does not match the first certificate (O=Corral Tests,C=NZ,CN=Test "
         "Intermediate CA), which must be the leaf"),
        ("root before intermediate", good.certificate_pem + _swap(good.chain_pem) + good.key_pem,
         "certificate 2 (O=Corral Tests,C=NZ,CN=Test Root CA) did not issue certificate 1 "
         "(CN=example.test): order the chain from the leaf to the root"),
        ("another ca's chain", good.certificate_pem + self_signed().certificate_pem
         + good.key_pem, "certificate 2 (CN=self.test) did not issue certificate 1"),
        ("no certificate", good.key_pem, "no certificate found"),
        ("two keys", good.bundle() + other.key_pem,
         "PEM block 5 (EC PRIVATE KEY): a second private key: a bundle has one"),
        ("encrypted pkcs8", good.certificate_pem + _pkcs8_encrypted(good),
         "PEM block 2 (ENCRYPTED PRIVATE KEY): an encrypted key is not supported"),
        ("truncated", good.bundle()[:-30], "a PEM block is not closed by its END line"),
        ("other type", good.bundle() + b"-----BEGIN X509 CRL-----\nAA==\n-----END X509 CRL-----\n",
         "PEM block 5 (X509 CRL): unsupported PEM type"),
        ("not base64", b"-----BEGIN CERTIFICATE-----\n%%%\n-----END CERTIFICATE-----\n",
         "PEM block 1 (CERTIFICATE): not base64"),
        ("not a certificate", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
         "PEM block 1 (CERTIFICATE): not a certificate"),
        ("empty", b"", "no certificate found"),
    ]  # fmt: skip


def test_certificates_without_a_key_are_a_ca_bundle_in_any_order():
    # corral's own (Unit refuses them): the authorities of client certificates
    root, intermediate = authority()
    bundle = parse_bundle(root.certificate_pem + b"text between\n" + intermediate.certificate_pem)
    assert bundle.authorities and bundle.key_pem == b""
    assert "key" not in bundle.info
    assert [c["subject"]["common_name"] for c in bundle.info["chain"]] == [
        "Test Root CA",
        "Test Intermediate CA",
    ]
    assert not parse_bundle(leaf("ec").bundle()).authorities
    expired = parse_bundle(leaf("ec", not_after=NOW - DAY).certificate_pem)
    assert expired.validity_warning().startswith("certificate 1 (CN=example.test) expired on ")


def _swap(chain_pem: bytes) -> bytes:
    """The chain's two certificates in the wrong order (root, then intermediate)."""
    end = b"-----END CERTIFICATE-----\n"
    first, second, _ = chain_pem.split(end)
    return second + end + first + end


@pytest.mark.parametrize("what, data, message", _refusals(), ids=[r[0] for r in _refusals()])
def test_a_bad_bundle_is_refused_with_one_line_saying_why(what, data, message):
    with pytest.raises(BundleError) as info:
        parse_bundle(data)
    assert str(info.value).startswith(message), what
    assert "\n" not in str(info.value)


def test_an_expired_or_future_bundle_is_kept_with_a_warning_as_unit_keeps_it():
    expired = parse_bundle(leaf("rsa", not_before=NOW - 90 * DAY, not_after=NOW - DAY).bundle())
    assert expired.validity_warning() == (
        f"the leaf (CN=example.test) expired on {unit_time(NOW - DAY)}"
    )
    future = parse_bundle(leaf("ec", not_before=NOW + DAY, not_after=NOW + 9 * DAY).bundle())
    assert future.validity_warning() == (
        f"the leaf (CN=example.test) is not valid before {unit_time(NOW + DAY)}"
    )
    good = parse_bundle(leaf("ec").bundle())
    assert good.validity_warning() is None
    later = NOW + 400 * DAY  # after the leaf and the CAs made for the tests
    assert good.validity_warning(later).startswith("the leaf (CN=example.test) expired on ")


# -- the store -------------------------------------------------------------------------------


def test_the_store_keeps_each_bundle_private_and_restores_it(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    state = tmp_path / "state"
    store = CertificateStore(str(state))
    store.load()  # nothing there yet: nothing made either
    assert not state.exists()
    rsa, ec = leaf("rsa"), leaf("ec", dns=("other.test",))
    store.add("rsa", rsa.bundle())
    store.add("ec", ec.bundle())
    assert store.names() == ["rsa", "ec"]
    assert "rsa" in store and "nope" not in store and store.get("nope") is None
    assert store.missing(["ec", "nope", "rsa", "x"]) == ["nope", "x"]
    certs = state / "certs"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE(certs.stat().st_mode) == 0o700
    assert sorted(os.listdir(certs)) == ["ec", "rsa"]
    for name in ("ec", "rsa"):
        assert stat.S_IMODE((certs / name).stat().st_mode) == 0o600
    assert (certs / "rsa").read_bytes() == rsa.bundle()  # as uploaded, as Unit keeps it
    # a crash's leftover temporary file and a corrupt file: skipped, the second one logged
    (certs / ".new-abc").write_bytes(b"half")
    (certs / "broken").write_bytes(b"not a bundle")
    again = CertificateStore(str(state), logging.getLogger("test.store"))
    again.load()
    assert sorted(again.names()) == ["ec", "rsa"]
    assert again.info("rsa") == store.info("rsa")
    assert again.get("ec").names == ("other.test",)  # type: ignore[union-attr]
    assert "certificate 'broken': not restored from" in caplog.text
    assert "no certificate found" in caplog.text
    assert again.remove("rsa") is True
    assert again.remove("rsa") is False
    assert sorted(os.listdir(certs)) == [".new-abc", "broken", "ec"]


def test_a_name_has_one_bundle_and_names_are_file_names(tmp_path):
    store = CertificateStore(str(tmp_path))
    data = leaf("ec").bundle()
    store.add("site", data)
    with pytest.raises(ValueError):
        store.add("site", data)
    for bad in ("", ".hidden", "a/b", "..", "nul\0", "x" * 256):
        with pytest.raises(ValueError):
            store.add(bad, data)
    assert store.names() == ["site"]
    assert os.listdir(tmp_path / "certs") == ["site"]


def test_an_expired_upload_is_logged_with_its_expiry(tmp_path, caplog):
    store = CertificateStore(str(tmp_path), logging.getLogger("test.store"))
    store.add("old", leaf("ec", not_before=NOW - 9 * DAY, not_after=NOW - DAY).bundle())
    assert f"certificate 'old': the leaf (CN=example.test) expired on {unit_time(NOW - DAY)}" in (
        caplog.text
    )


def test_the_master_imports_cryptography_only_when_a_bundle_is_parsed(tmp_path):
    """The store and the API load without it; only parsing a bundle imports it."""
    code = (
        "import sys, corral.control.server, corral.tls.store as s\n"
        f"store = s.CertificateStore({str(tmp_path)!r}); store.load()\n"
        "print('cryptography' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "False\n"


# -- the API's answers -----------------------------------------------------------------------


def _document(*names: str):
    return validate_document(
        {
            "listeners": {
                "127.0.0.1:8443": {"pass": "applications/a", "tls": {"certificate": list(names)}}
            },
            "applications": {"a": {"module": "m"}},
        }
    )


def test_certificates_answers_are_units(tmp_path):
    store = CertificateStore(str(tmp_path))
    data = leaf("ec").bundle()

    def call(method, path, body=b"", docs=()):
        try:
            return 200, certificates.handle(store, docs, method, path, body)
        except certificates.Refused as exc:
            return exc.status, exc.title

    assert call("GET", "/certificates") == (200, {})
    assert call("PUT", "/certificates/site", data) == (
        200,
        {"success": "Certificate chain uploaded."},
    )
    assert call("PUT", "/certificates/site", data) == (400, "Certificate already exists.")
    assert call("PUT", "/certificates/bad", b"junk") == (400, "Invalid certificate.")
    assert call("PUT", "/certificates", data) == (400, "Invalid certificate name.")
    assert call("PUT", "/certificates/site/chain", data) == (400, "Invalid certificate name.")
    assert call("PUT", "/certificates/.x", data) == (400, "Invalid certificate name.")
    assert call("POST", "/certificates/site", data) == (405, "Invalid method.")
    assert call("GET", "/certificates/nope") == (404, "Certificate doesn't exist.")
    assert call("GET", "/certificates/site/key") == (200, "ECDH")
    assert call("GET", "/certificates/site/chain/0/subject/common_name") == (200, "example.test")
    assert call("GET", "/certificates/site/chain/9") == (404, "Invalid path.")
    assert call("GET", "/certificates") == (200, {"site": store.info("site")})
    used = _document("other", "site")
    assert certificates.users([used], "site") == ['$.listeners["127.0.0.1:8443"].tls.certificate']
    assert call("DELETE", "/certificates/site", docs=[used]) == (
        400,
        "Certificate is used in the configuration.",
    )
    assert call("DELETE", "/certificates/nope") == (404, "Certificate doesn't exist.")
    assert call("DELETE", "/certificates/site") == (200, {"success": "Certificate deleted."})
    assert call("GET", "/certificates") == (200, {})
    expired = leaf("ec", not_before=NOW - 9 * DAY, not_after=NOW - DAY).bundle()
    status, answer = call("PUT", "/certificates/old", expired)
    assert status == 200 and answer["warning"].startswith("the leaf (CN=example.test) expired")


def test_a_listener_naming_a_certificate_the_store_lacks_is_refused_in_units_words(tmp_path):
    store = CertificateStore(str(tmp_path))
    store.add("site", leaf("ec").bundle())
    certificates.check_listeners(store, _document("site"))
    with pytest.raises(ConfigError) as info:
        certificates.check_listeners(store, _document("site", "gone"))
    assert str(info.value) == (
        '$.listeners["127.0.0.1:8443"].tls.certificate: Certificate "gone" is not found.'
    )

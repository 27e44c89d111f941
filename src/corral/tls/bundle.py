"""One bundle of NGINX Unit's certificate store: a private key and a certificate chain in PEM,
parsed, checked and described as Unit's ``GET /certificates/NAME`` describes it.

What a bundle may hold is what Unit reads: PEM blocks in any order, text between them ignored;
the certificates (``CERTIFICATE``, ``X509 CERTIFICATE``, ``TRUSTED CERTIFICATE``) form the
chain in the order given, the leaf first; exactly one unencrypted private key (``PRIVATE KEY``,
or ``RSA PRIVATE KEY``, ``EC PRIVATE KEY``...). An encrypted key, another kind of block, a
second key or no certificate: the bundle is refused (`BundleError`, one line). corral's own
(Unit refuses it): a bundle of certificates without a key is a *CA bundle*, the authorities a
listener checks client certificates against (its ``tls.client_certificate.ca``), never a
listener's certificate; its certificates are a set, in no order.

Checks Unit leaves to OpenSSL when a listener first uses the bundle, made here at upload so
that a bundle in the store is one a listener can serve: the key is the leaf's, and each
certificate after the leaf issued the one before it (its subject is the other's issuer and its
key verifies the other's signature). A certificate outside its validity period is kept, as
Unit keeps it: `Bundle.validity_warning` says so, for the store's log and the upload's answer.

`cryptography` is imported by `parse_bundle` only: importing this module costs nothing, and
only the master, when the store is used, ever parses a bundle.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

__all__ = ["Bundle", "BundleError", "parse_bundle", "unit_time"]

_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)
_CERTIFICATE_TYPES = (b"CERTIFICATE", b"X509 CERTIFICATE", b"TRUSTED CERTIFICATE")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class BundleError(ValueError):
    """A bundle the store refuses; ``str()`` is one line saying why."""


@dataclass(frozen=True, slots=True)
class Bundle:
    """A parsed, checked bundle. The key is in no repr: a bundle may be logged."""

    pem: bytes = field(repr=False)  # as uploaded: what the store keeps on disk
    key_pem: bytes = field(repr=False)  # the private key, PKCS#8 PEM, unencrypted; b"": none
    chain_pem: bytes = field(repr=False)  # the leaf, then each issuer, PEM
    names: tuple[str, ...]  # the leaf's DNS names (subjectAltName), else its common name
    not_before: datetime  # the leaf's validity, in UTC
    not_after: datetime
    # each certificate's (subject, not before, not after), the leaf first
    validity: tuple[tuple[str, datetime, datetime], ...]
    info: dict[str, Any] = field(repr=False)  # Unit's JSON: {"key": ..., "chain": [...]}

    @property
    def authorities(self) -> bool:
        """A CA bundle: certificates without a key (see the module doc)."""
        return not self.key_pem

    def validity_warning(self, now: datetime | None = None) -> str | None:
        """Why a certificate of the chain cannot be trusted ``now`` (expired or not yet
        valid), or None."""
        moment = now or datetime.now(UTC)
        for place, (subject, since, until) in enumerate(self.validity):
            which = f"chain certificate {place + 1}"
            if place == 0:
                which = "certificate 1" if self.authorities else "the leaf"
            if moment > until:
                return f"{which} ({subject}) expired on {unit_time(until)}"
            if moment < since:
                return f"{which} ({subject}) is not valid before {unit_time(since)}"
        return None


def parse_bundle(data: bytes) -> Bundle:
    """The bundle ``data`` holds, checked. Raises `BundleError`."""
    from cryptography.exceptions import UnsupportedAlgorithm

    try:
        return _parse(data)
    except UnsupportedAlgorithm as exc:  # a key or signature this OpenSSL cannot use
        raise BundleError(f"unsupported algorithm: {exc}") from None


def _parse(data: bytes) -> Bundle:
    from cryptography.hazmat.primitives import serialization

    key, chain = _read_blocks(data)
    if not chain:
        raise BundleError("no certificate found")
    if key is not None:
        _check_key(key, chain[0])
        _check_order(chain)
    leaf = chain[0]
    pem = serialization.Encoding.PEM
    info: dict[str, Any] = {} if key is None else {"key": _key_text(key)}
    info["chain"] = [_certificate_info(c) for c in chain]
    key_pem = b""
    if key is not None:
        unencrypted = serialization.NoEncryption()
        key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, unencrypted)
    return Bundle(
        pem=data,
        key_pem=key_pem,
        chain_pem=b"".join(certificate.public_bytes(pem) for certificate in chain),
        names=_names(leaf),
        not_before=leaf.not_valid_before_utc,
        not_after=leaf.not_valid_after_utc,
        validity=tuple((_subject(c), c.not_valid_before_utc, c.not_valid_after_utc) for c in chain),
        info=info,
    )


def _read_blocks(data: bytes) -> tuple[PrivateKeyTypes | None, list[x509.Certificate]]:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    blocks = list(_BLOCK.finditer(data))
    if data.count(b"-----BEGIN ") != len(blocks):
        raise BundleError("a PEM block is not closed by its END line")
    key: PrivateKeyTypes | None = None
    chain: list[x509.Certificate] = []
    for number, block in enumerate(blocks, 1):
        kind, body = block[1], block[2]
        what = f"PEM block {number} ({kind.decode()})"
        if b"Proc-Type:" in body or kind == b"ENCRYPTED PRIVATE KEY":
            raise BundleError(f"{what}: an encrypted key is not supported: decrypt it first")
        if kind in _CERTIFICATE_TYPES:
            der = _der(body, what)
            if kind == b"TRUSTED CERTIFICATE":  # OpenSSL's: the certificate, then trust data
                der = der[: _der_length(der, what)]
            try:
                chain.append(x509.load_der_x509_certificate(der))
            except ValueError as exc:
                raise BundleError(f"{what}: not a certificate: {exc}") from None
        elif kind == b"PRIVATE KEY" or kind.endswith(b" PRIVATE KEY"):
            if key is not None:
                raise BundleError(f"{what}: a second private key: a bundle has one")
            try:  # the whole block again: traditional keys are told apart by their type
                key = serialization.load_pem_private_key(block[0], password=None)
            except (ValueError, TypeError) as exc:
                raise BundleError(f"{what}: not a usable private key: {exc}") from None
        else:
            raise BundleError(f"{what}: unsupported PEM type")
    return key, chain


def _der(body: bytes, what: str) -> bytes:
    try:
        return base64.b64decode(b"".join(body.split()), validate=True)
    except (binascii.Error, ValueError):
        raise BundleError(f"{what}: not base64") from None


def _der_length(der: bytes, what: str) -> int:
    """The length of the DER value at the start of ``der``, its tag and length included."""
    if len(der) < 2:
        raise BundleError(f"{what}: truncated")
    first = der[1]
    if first < 0x80:
        return 2 + first
    octets = first & 0x7F
    return 2 + octets + int.from_bytes(der[2 : 2 + octets], "big")


def _check_key(key: PrivateKeyTypes, leaf: x509.Certificate) -> None:
    from cryptography.hazmat.primitives import serialization

    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*spki) != leaf.public_key().public_bytes(*spki):
        raise BundleError(
            f"the private key does not match the first certificate ({_subject(leaf)}), "
            "which must be the leaf"
        )


def _check_order(chain: list[x509.Certificate]) -> None:
    from cryptography.exceptions import InvalidSignature

    for place in range(len(chain) - 1):
        issued, issuer = chain[place], chain[place + 1]
        try:
            issued.verify_directly_issued_by(issuer)
        except (ValueError, TypeError, InvalidSignature):
            raise BundleError(
                f"certificate {place + 2} ({_subject(issuer)}) did not issue certificate "
                f"{place + 1} ({_subject(issued)}): order the chain from the leaf to the root"
            ) from None


def _names(leaf: x509.Certificate) -> tuple[str, ...]:
    from cryptography import x509

    try:
        extension = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        pass
    else:
        dns = extension.value.get_values_for_type(x509.DNSName)
        if dns:
            return tuple(dns)
    common = _attribute(leaf.subject, "common_name")
    return (common,) if common is not None else ()


def _key_text(key: PrivateKeyTypes) -> str:
    """Unit's words for the key: ``RSA (2048 bits)``, ``ECDH`` (sic: any EC key), else
    ``unknown`` (Unit's ``DH (BITS bits)`` is left out: no certificate's key is one)."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, rsa.RSAPrivateKey):
        return f"RSA ({key.key_size} bits)"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "ECDH"
    return "unknown"


# Unit's members of a subject or issuer, in its order ("alt_names" comes after the first)
_NAME_FIELDS = (
    ("common_name", "COMMON_NAME"),
    ("country", "COUNTRY_NAME"),
    ("state_or_province", "STATE_OR_PROVINCE_NAME"),
    ("locality", "LOCALITY_NAME"),
    ("organization", "ORGANIZATION_NAME"),
    ("department", "ORGANIZATIONAL_UNIT_NAME"),
)


def _certificate_info(certificate: x509.Certificate) -> dict[str, Any]:
    from cryptography import x509

    subject_alt = _alt_names(certificate, x509.SubjectAlternativeName)
    issuer_alt = _alt_names(certificate, x509.IssuerAlternativeName)
    return {
        "subject": _name_info(certificate.subject, subject_alt),
        "issuer": _name_info(certificate.issuer, issuer_alt),
        "validity": {
            "since": unit_time(certificate.not_valid_before_utc),
            "until": unit_time(certificate.not_valid_after_utc),
        },
    }


def _alt_names(certificate: x509.Certificate, kind: Any) -> list[str] | None:
    from cryptography import x509

    try:
        extension = certificate.extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return None
    return list(extension.value.get_values_for_type(x509.DNSName))


def _name_info(name: x509.Name, alt_names: list[str] | None) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for place, (key, _) in enumerate(_NAME_FIELDS):
        if place == 1 and alt_names is not None:
            info["alt_names"] = alt_names
        value = _attribute(name, key)
        if value is not None:
            info[key] = value
    return info


def _attribute(name: x509.Name, key: str) -> str | None:
    """The first value of the attribute Unit calls ``key`` in ``name``, if any."""
    from cryptography.x509.oid import NameOID

    oid = getattr(NameOID, dict(_NAME_FIELDS)[key])
    found = name.get_attributes_for_oid(oid)
    if not found:
        return None
    value = found[0].value
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _subject(certificate: x509.Certificate) -> str:
    """A certificate as a message names it: its subject, as OpenSSL prints one."""
    return certificate.subject.rfc4514_string() or "an empty subject"


def unit_time(moment: datetime) -> str:
    """A time as Unit's JSON gives it (OpenSSL's ``ASN1_TIME_print``):
    ``Jan  2 03:04:05 2030 GMT``."""
    moment = moment.astimezone(UTC)
    return (
        f"{_MONTHS[moment.month - 1]} {moment.day:2d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} {moment.year} GMT"
    )

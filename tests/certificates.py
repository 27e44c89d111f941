"""Keys and certificates made at test time with `cryptography`: a root CA, an intermediate CA
and leaves signed by it, RSA 2048 or ECDSA P-256, valid now or expired, as PEM bytes.

RSA keys take a while to make: the CA pair is made once per process (`authority`).
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID

if TYPE_CHECKING:
    import trustme

NOW = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
DAY = datetime.timedelta(days=1)


@dataclass
class Issued:
    """A key and its certificate, and the chain above it (intermediate first)."""

    key: CertificateIssuerPrivateKeyTypes
    certificate: x509.Certificate
    chain: tuple[x509.Certificate, ...] = ()

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def chain_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.chain)

    def bundle(self) -> bytes:
        """Unit's ``cat cert.pem ca.pem key.pem > bundle.pem``."""
        return self.certificate_pem + self.chain_pem + self.key_pem


def make_key(kind: str) -> CertificateIssuerPrivateKeyTypes:
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert kind == "ec"
    return ec.generate_private_key(ec.SECP256R1())


def name(common: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if organization:
        attributes += [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "NZ"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
        ]
    return x509.Name(attributes)


def issue(
    subject: x509.Name,
    key: CertificateIssuerPrivateKeyTypes,
    issuer: Issued | None = None,
    *,
    ca: bool = False,
    dns: tuple[str, ...] = (),
    not_before: datetime.datetime = NOW - DAY,
    not_after: datetime.datetime = NOW + 90 * DAY,
) -> Issued:
    """A certificate for ``key``, signed by ``issuer`` (itself when None)."""
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.certificate.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False
        )
    signer = issuer.key if issuer else key
    certificate = builder.sign(signer, hashes.SHA256())
    chain = (issuer.certificate, *issuer.chain) if issuer else ()
    return Issued(key, certificate, chain)


@functools.cache
def authority() -> tuple[Issued, Issued]:
    """A root CA and an intermediate CA it signed, made once."""
    root = issue(name("Test Root CA", "Corral Tests"), make_key("ec"), ca=True)
    intermediate = issue(
        name("Test Intermediate CA", "Corral Tests"), make_key("ec"), root, ca=True
    )
    return root, intermediate


def leaf(
    kind: str = "ec",
    dns: tuple[str, ...] = ("example.test", "*.example.test"),
    **validity: datetime.datetime,
) -> Issued:
    """A server certificate signed by the intermediate, its chain the intermediate and root."""
    _, intermediate = authority()
    return issue(
        name(dns[0] if dns else "leaf.test"), make_key(kind), intermediate, dns=dns, **validity
    )


def self_signed(kind: str = "ec", common: str = "self.test") -> Issued:
    return issue(name(common), make_key(kind))


def issue_files(ca: trustme.CA, directory: Path, stem: str = "server") -> tuple[Path, Path]:
    """A certificate of trustme's ``ca`` for localhost and 127.0.0.1, as a chain file and a
    key file in ``directory`` (what ``--certfile`` and ``--keyfile`` name)."""
    cert = ca.issue_cert("localhost", "127.0.0.1")
    chain, key = directory / f"{stem}.pem", directory / f"{stem}.key"
    cert.private_key_pem.write_to_path(str(key))
    with chain.open("wb") as out:
        for blob in cert.cert_chain_pems:
            out.write(blob.bytes())
    return chain, key

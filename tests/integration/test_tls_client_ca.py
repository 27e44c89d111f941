"""Client certificates checked against a CA bundle of the store (issue 33, point 2): a
listener's ``tls.client_certificate`` (``ca``: bundles without a key; ``required``), the
application told of the client's certificate (mod_ssl's ``SSL_CLIENT_*`` keys); a CA bundle
a listener uses is not deleted; a renewal of the listener's certificate keeps asking.
"""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from tests.certificates import Issued, issue, leaf, make_key, name
from tests.integration.control import listening_port
from tests.integration.server import read_response
from tests.integration.test_tls import store_server
from tests.integration.test_tls_renewal import NAME, serial, trusting

pytestmark = pytest.mark.usefixtures("each_core")


def authority(common: str) -> Issued:
    return issue(name(common, "Corral Tests"), make_key("ec"), ca=True)


def holder(issued: Issued, directory: Path) -> ssl.SSLContext:
    """A client context that trusts the server and gives ``issued``'s certificate."""
    chain, key = directory / f"{id(issued)}.pem", directory / f"{id(issued)}.key"
    chain.write_bytes(issued.certificate_pem)
    key.write_bytes(issued.key_pem)
    root = trusting().get_ca_certs(binary_form=True)[0]
    context = ssl.create_default_context(cadata=ssl.DER_cert_to_PEM_cert(root))
    context.load_cert_chain(str(chain), str(key))
    return context


def told(port: int, context: ssl.SSLContext) -> tuple[dict[str, Any], int]:
    """What the application was told of the connection (its SSL_* keys), and the serial of
    the server's certificate. A refusal raises."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=NAME) as tls,
    ):
        tls.sendall(f"GET / HTTP/1.1\r\nHost: {NAME}\r\n\r\n".encode())
        status, _, body = read_response(tls)
        assert status == 200
        return json.loads(body), int(tls.getpeercert()["serialNumber"], 16)


REFUSED = (ssl.SSLError, ConnectionError, AssertionError)  # (TLS 1.3: after the handshake)


def document(certificate: str, client_certificate: dict[str, Any]) -> dict[str, Any]:
    return {
        "listeners": {
            "127.0.0.1:0": {
                "pass": "applications/app",
                "tls": {"certificate": certificate, "client_certificate": client_certificate},
            }
        },
        "applications": {"app": {"module": "tls_apps", "callable": "wsgi", "processes": 2}},
    }


def test_a_client_certificate_is_required_of_the_stores_ca(tmp_path: Path) -> None:
    clients, strangers = authority("Client CA"), authority("Stranger CA")
    alice = issue(name("alice"), make_key("ec"), clients)
    mallory = issue(name("mallory"), make_key("ec"), strangers)
    site, renewed = leaf("ec"), leaf("ec")
    with store_server(site=site, renewed=renewed) as (server, control):
        uploaded = control.put("/certificates/clients", clients.certificate_pem)
        assert uploaded.status == 200 and "a CA bundle" in uploaded.json["note"]
        assert "key" not in control.get("/certificates/clients").json
        given = document("site", {"ca": "clients"})  # required: the default
        assert control.put("/config", given).status == 200
        port = listening_port(server, "127.0.0.1:0")
        facts, _ = told(port, holder(alice, tmp_path))
        assert facts["SSL_CLIENT_VERIFY"] == "SUCCESS"
        assert facts["SSL_CLIENT_S_DN"] == "CN=alice"
        assert facts["SSL_CLIENT_I_DN"] == "O=Corral Tests,C=NZ,CN=Client CA"
        with pytest.raises(REFUSED):
            told(port, trusting())  # none given
        with pytest.raises(REFUSED):
            told(port, holder(mallory, tmp_path))  # another authority's
        # the CA bundle is not deleted while the listener uses it
        refused = control.delete("/certificates/clients")
        assert refused.status == 400
        assert refused.json["error"] == "Certificate is used in the configuration."
        assert "tls.client_certificate.ca" in refused.json["detail"]
        # a renewal of the listener's certificate (the running workers) keeps asking
        pids = sorted(server.worker_pids())
        given["listeners"]["127.0.0.1:0"]["tls"]["certificate"] = "renewed"
        assert control.put("/config", given).status == 200
        facts, served = told(port, holder(alice, tmp_path))
        assert served == serial(renewed) and facts["SSL_CLIENT_VERIFY"] == "SUCCESS"
        with pytest.raises(REFUSED):
            told(port, trusting())
        assert sorted(server.worker_pids()) == pids


def test_an_optional_client_certificate_is_checked_when_given(tmp_path: Path) -> None:
    clients, strangers = authority("Client CA"), authority("Stranger CA")
    alice = issue(name("alice"), make_key("ec"), clients)
    mallory = issue(name("mallory"), make_key("ec"), strangers)
    with store_server(site=leaf("ec")) as (server, control):
        assert control.put("/certificates/clients", clients.certificate_pem).status == 200
        given = document("site", {"ca": ["clients"], "required": False})
        assert control.put("/config", given).status == 200
        port = listening_port(server, "127.0.0.1:0")
        facts, _ = told(port, trusting())  # none given: in, without the keys
        assert facts["SSL_CLIENT_VERIFY"] == "NONE" and "SSL_CLIENT_S_DN" not in facts
        facts, _ = told(port, holder(alice, tmp_path))
        assert (facts["SSL_CLIENT_VERIFY"], facts["SSL_CLIENT_S_DN"]) == ("SUCCESS", "CN=alice")
        with pytest.raises(REFUSED):
            told(port, holder(mallory, tmp_path))


def test_bundles_in_the_wrong_place_are_refused_in_one_line() -> None:
    clients = authority("Client CA")
    with store_server(site=leaf("ec")) as (server, control):
        assert control.put("/certificates/clients", clients.certificate_pem).status == 200
        for certificate, ca, where, text in (
            ("clients", "clients", "certificate", 'Certificate "clients" has no private key'),
            ("site", "site", "client_certificate.ca", 'Certificate "site" has a private key'),
            ("site", "none", "client_certificate.ca", 'Certificate "none" is not found.'),
        ):
            refused = control.put("/config", document(certificate, {"ca": ca}))
            assert refused.status == 400
            assert f'$.listeners["127.0.0.1:0"].tls.{where}: {text}' in refused.json["detail"]
        wrong = control.put("/config", document("site", {"ca": "clients", "required": "yes"}))
        assert wrong.status == 400 and "client_certificate.required" in wrong.json["detail"]
        assert server.worker_pids() == []

"""NGINX Unit's certificate store on a real server: bundles made at test time uploaded through
the control socket, read back, kept in the state directory across a restart, refused when
bad, deleted unless a listener names them, and uploaded from files by `corral ctl`."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.certificates import DAY, NOW, leaf
from tests.integration.control import Control, ctl, short_dir
from tests.integration.server import Server

DONE = {"success": "Reconfiguration done."}
UPLOADED = {"success": "Certificate chain uploaded."}


def empty_server(state_dir: Path) -> Server:
    server = Server(f"--state-dir={state_dir}", bind=None, wait_ready=False)
    server.wait_log("no application configured: waiting for the control API")
    return server


def tls_document(*names: str) -> dict:
    return {
        "listeners": {
            "127.0.0.1:0": {"pass": "applications/proc_apps", "tls": {"certificate": list(names)}}
        },
        "applications": {"proc_apps": {"module": "proc_apps", "processes": 1}},
    }


def test_bundles_are_checked_kept_private_restored_and_deleted_unless_used():
    rsa, ec = leaf("rsa"), leaf("ec", dns=("ec.test",))
    expired = leaf("ec", not_before=NOW - 90 * DAY, not_after=NOW - DAY)
    other = leaf("ec")
    with short_dir() as directory:
        state_dir = directory / "state"
        with empty_server(state_dir) as server:
            control = Control.of(server)
            assert control.get("/certificates").json == {}
            assert control.put("/certificates/rsa", rsa.bundle()).json == UPLOADED
            assert control.put("/certificates/ec", ec.bundle()).json == UPLOADED
            # expired: kept, as Unit keeps it, with a warning in the answer and the log
            old = control.put("/certificates/old", expired.bundle())
            assert old.status == 200 and old.json["success"] == UPLOADED["success"]
            assert old.json["warning"].startswith("the leaf (CN=example.test) expired on ")
            server.wait_log(r"certificate 'old': the leaf \(CN=example.test\) expired on ")
            # refused: a key that is not the leaf's, a name that has a bundle, no name
            mismatched = control.put(
                "/certificates/bad", rsa.certificate_pem + rsa.chain_pem + other.key_pem
            )
            assert mismatched.status == 400
            assert mismatched.json == {
                "error": "Invalid certificate.",
                "detail": "the private key does not match the first certificate "
                "(CN=example.test), which must be the leaf",
            }
            again = control.put("/certificates/rsa", ec.bundle())
            assert (again.status, again.json["error"]) == (400, "Certificate already exists.")
            unnamed = control.put("/certificates", rsa.bundle())
            assert (unnamed.status, unnamed.json["error"]) == (400, "Invalid certificate name.")
            # read back: Unit's JSON, never a key
            everything = control.get("/certificates")
            assert list(everything.json) == ["rsa", "ec", "old"]
            assert b"PRIVATE" not in everything.raw
            assert control.get("/certificates/rsa/key").json == "RSA (2048 bits)"
            assert control.get("/certificates/ec/key").json == "ECDH"
            chain = control.get("/certificates/rsa/chain").json
            assert [member["subject"]["common_name"] for member in chain] == [
                "example.test",
                "Test Intermediate CA",
                "Test Root CA",
            ]
            assert chain[0]["subject"]["alt_names"] == ["example.test", "*.example.test"]
            assert chain[0]["issuer"]["common_name"] == "Test Intermediate CA"
            assert set(chain[0]["validity"]) == {"since", "until"}
            missing = control.get("/certificates/nope")
            assert (missing.status, missing.json["error"]) == (404, "Certificate doesn't exist.")
            assert control.get("/").json["certificates"] == everything.json
            # kept in the state directory, private
            certs = state_dir / "certs"
            assert stat.S_IMODE(certs.stat().st_mode) == 0o700
            assert sorted(path.name for path in certs.iterdir()) == ["ec", "old", "rsa"]
            for path in certs.iterdir():
                assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert (certs / "rsa").read_bytes() == rsa.bundle()
            # a listener names them; one the store lacks is refused in Unit's words
            lacking = control.put("/config", tls_document("rsa", "nope"))
            assert lacking.status == 400
            assert lacking.json["error"] == "Invalid configuration."
            assert lacking.json["detail"] == (
                '$.listeners["127.0.0.1:0"].tls.certificate: Certificate "nope" is not found.'
            )
            assert control.put("/config", tls_document("rsa", "old")).json == DONE
            used = control.delete("/certificates/rsa")
            assert used.status == 400
            assert used.json["error"] == "Certificate is used in the configuration."
            assert control.delete("/certificates/ec").json == {"success": "Certificate deleted."}
            gone = control.delete("/certificates/ec")
            assert (gone.status, gone.json["error"]) == (404, "Certificate doesn't exist.")
            assert not (certs / "ec").exists()
            before = control.get("/certificates").json
            assert server.stop() == 0
        for secret in (rsa.key_pem, ec.key_pem):  # no key in the log
            assert secret.splitlines()[1].decode() not in server.stderr
        # started again on the same state directory: the store and the document come back
        with Server(f"--state-dir={state_dir}", bind=None, wait_ready=False) as server:
            server.wait_ready()
            control = Control.of(server)
            server.wait_log(r"certificate store: 2 restored from ")
            assert control.get("/certificates").json == before
            tls = control.get("/config/listeners/127.0.0.1:0/tls").json
            assert tls == {"certificate": ["rsa", "old"]}
            still_used = control.delete("/certificates/old")
            assert still_used.json["error"] == "Certificate is used in the configuration."
            assert control.put("/config/listeners/127.0.0.1:0/tls/certificate", "rsa").json == DONE
            assert control.delete("/certificates/old").json == {"success": "Certificate deleted."}
            assert list(control.get("/certificates").json) == ["rsa"]
            assert server.stop() == 0


def test_ctl_uploads_a_bundle_from_its_files():
    issued = leaf("rsa", dns=("files.test",))
    with short_dir() as directory:
        state_dir = directory / "state"
        (directory / "cert.pem").write_bytes(issued.certificate_pem)
        (directory / "chain.pem").write_bytes(issued.chain_pem.rstrip(b"\n"))  # no final EOL
        (directory / "key.pem").write_bytes(issued.key_pem)
        socket = f"unix:{state_dir}/control.sock"
        with empty_server(state_dir) as server:
            files = [str(directory / name) for name in ("cert.pem", "chain.pem")]
            uploaded = ctl(
                "--socket", socket, "upload", "files", *files, "--key", str(directory / "key.pem")
            )
            assert (uploaded.returncode, uploaded.stderr) == (0, "")
            assert '"success": "Certificate chain uploaded."' in uploaded.stdout
            shown = ctl("--socket", socket, "get", "/certificates/files/chain/0/subject")
            assert shown.returncode == 0 and '"files.test"' in shown.stdout
            # the key left out: a CA bundle (for client certificates), and the answer says so
            keyless = ctl("--socket", socket, "upload", "nokey", *files)
            assert keyless.returncode == 0
            assert "no private key: a CA bundle" in keyless.stdout
            assert ctl("--socket", socket, "delete", "/certificates/nokey").returncode == 0
            unreadable = ctl("--socket", socket, "upload", "x", str(directory / "absent.pem"))
            assert unreadable.returncode == 2
            assert "absent.pem: cannot read: No such file or directory" in unreadable.stderr
            deleted = ctl("--socket", socket, "delete", "/certificates/files")
            assert deleted.returncode == 0 and "Certificate deleted." in deleted.stdout
            assert Control.of(server).get("/certificates").json == {}
            assert server.stop() == 0


def test_a_keys_password_is_masked_in_answers_and_kept_when_sent_back(ca, certificate) -> None:
    from cryptography.hazmat.primitives import serialization

    from tests.integration.server import run_cli
    from tests.integration.test_tls import client, https_get

    chain, key = certificate
    private = serialization.load_pem_private_key(key.read_bytes(), None)
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret-pw"),
        )
    )
    flags = ["--certfile", str(chain), "--keyfile", str(key), "--keyfile-password", "s3cret-pw"]
    shown = run_cli("tls_apps:wsgi", *flags, "--check-config")
    assert '"keyfile_password": "********"' in shown.stdout and "s3cret-pw" not in shown.stdout
    with short_dir() as directory:
        server = Server("tls_apps:wsgi", *flags, f"--state-dir={directory / 'state'}")
        with server:
            control = Control.of(server)
            document = control.get("/config").json
            assert document["settings"]["keyfile_password"] == "********"
            # sent back as shown: the same document (the mask as a password would not load
            # the key, and the change would fail), still serving
            assert control.put("/config", document).status == 200
            assert control.get("/config").json["settings"]["keyfile_password"] == "********"
            assert https_get(server, client(ca))[0] == 200
            assert "s3cret-pw" not in server.stderr

"""Renewal without a restart (issue 33, point 3): new certificates served by the running
workers, under a load of new TLS connections, with no request failing and no worker started.

From the store (a listener pointed at a new bundle through the control API) and from files
(rewritten, then a HUP, or seen by the master's watch of them). Each test counts the worker
processes before and after: the same pids serve the new certificate. Sessions resume across
a renewal on every worker; a worker started later (TTIN) serves the new certificate too; a
change of anything else than the certificates starts new workers as a reload does.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.certificates import Issued, authority, leaf
from tests.integration.control import listening_port
from tests.integration.server import Server, read_response, wait_for
from tests.integration.test_tls import store_server

pytestmark = pytest.mark.usefixtures("each_core")
NAME = "example.test"  # the tests' certificates' name (tests.certificates.leaf)


@functools.cache
def trusting() -> ssl.SSLContext:
    """The tests' client context (one: a session resumes with the context that made it)."""
    root, _ = authority()
    return ssl.create_default_context(cadata=root.certificate_pem.decode())


def serial(issued: Issued) -> int:
    return issued.certificate.serial_number


def get(
    port: int,
    context: ssl.SSLContext,
    session: ssl.SSLSession | None = None,
    *,
    clean: bool = False,
) -> dict[str, Any]:
    """One request on a new TLS connection: its status, the certificate's serial, the pid
    that served it, whether the session was resumed, and the session. ``clean``: the client
    says close_notify before it closes, as browsers do (OpenSSL forgets a session from its
    cache when a connection ends without it)."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=NAME, session=session) as tls,
    ):
        tls.sendall(f"GET / HTTP/1.1\r\nHost: {NAME}\r\n\r\n".encode())
        status, _, body = read_response(tls)  # (TLS 1.3: the ticket came with the answer)
        answer = {
            "status": status,
            "serial": int(tls.getpeercert()["serialNumber"], 16),
            "pid": json.loads(body)["pid"],
            "resumed": tls.session_reused,
            "session": tls.session,
        }
        if clean:
            tls.unwrap()
        return answer


class Load:
    """Clients opening a new TLS connection for each request, continuously, in threads:
    each answer's certificate serial, and every failure."""

    def __init__(self, port: int, clients: int = 3) -> None:
        self.port = port
        self.context = trusting()
        self.serials: list[int] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(clients)]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                answer = get(self.port, self.context)
            except (OSError, AssertionError, ValueError) as exc:
                self.failures.append(repr(exc))
                continue
            if answer["status"] != 200:
                self.failures.append(f"status {answer['status']}")
            self.serials.append(answer["serial"])

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        wait_for(lambda: len(self.serials) >= 30, timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def until_served(self, issued: Issued) -> None:
        """Wait until the answers come with ``issued``'s certificate only, and for more."""
        wanted = serial(issued)
        wait_for(lambda: self.serials[-10:] == [wanted] * 10, timeout=30)
        done = len(self.serials)
        wait_for(lambda: len(self.serials) >= done + 30, timeout=30)


def resumes_everywhere(port: int, session: ssl.SSLSession, workers: int) -> dict[int, list[bool]]:
    """Resume ``session`` until each of ``workers`` served a few: whether each resumed."""
    context = trusting()
    by_worker: dict[int, list[bool]] = {}
    for _ in range(300):
        answer = get(port, context, session)
        by_worker.setdefault(answer["pid"], []).append(answer["resumed"])
        if len(by_worker) >= workers and min(map(len, by_worker.values())) >= 3:
            break
    return by_worker


def serving_old(control) -> dict:
    """Two workers of tls_apps serving the store's ``old`` on 127.0.0.1:0: the document."""
    document = {
        "listeners": {"127.0.0.1:0": {"pass": "applications/app", "tls": {"certificate": "old"}}},
        "applications": {"app": {"module": "tls_apps", "callable": "wsgi", "processes": 2}},
    }
    assert control.put("/config", document).status == 200
    return document


def test_a_listener_pointed_at_a_new_bundle_is_served_by_the_running_workers() -> None:
    old, new = leaf("ec"), leaf("ec")
    with store_server(old=old, new=new) as (server, control):
        document = serving_old(control)
        port = listening_port(server, "127.0.0.1:0")
        pids = sorted(server.worker_pids())
        before = get(port, trusting())
        assert before["serial"] == serial(old)
        with Load(port) as load:
            document["listeners"]["127.0.0.1:0"]["tls"]["certificate"] = "new"
            assert control.put("/config", document).status == 200
            # at once: the answer came once every worker serves it
            assert get(port, trusting())["serial"] == serial(new)
            load.until_served(new)
        assert load.failures == []
        assert load.serials[0] == serial(old)
        assert sorted(server.worker_pids()) == pids  # no new worker
        server.wait_log(r"TLS: new certificates on 127\.0\.0\.1:0, served by app's 2 running")
        server.wait_log(r"TLS: certificate 'new' \(example\.test, \*\.example\.test\) valid until")
        # a session of the old certificate resumes on every worker, and so does a new one
        assert_resumed(resumes_everywhere(port, before["session"], 2))
        fresh = get(port, trusting())
        assert not fresh["resumed"]
        assert_resumed(resumes_everywhere(port, fresh["session"], 2))
        # the status follows; the old bundle is no listener's now
        assert list(control.get("/status").json["certificates"]) == ["new"]
        assert control.delete("/certificates/old").status == 200
        assert control.delete("/certificates/new").status == 400


def assert_resumed(by_worker: dict[int, list[bool]]) -> None:
    assert len(by_worker) == 2 and all(all(resumed) for resumed in by_worker.values()), by_worker


@contextmanager
def file_server(tmp_path: Path, issued: Issued, *flags: str) -> Iterator[tuple[Server, Path, Path]]:
    """A server of ``issued``'s certificate from files, 2 workers: (it, the files)."""
    chain, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    write(chain, key, issued)
    with Server(
        "tls_apps:wsgi", "--certfile", str(chain), "--keyfile", str(key), *flags, workers=2
    ) as server:
        yield server, chain, key


def write(chain: Path, key: Path, issued: Issued) -> None:
    key.write_bytes(issued.key_pem)
    chain.write_bytes(issued.certificate_pem + issued.chain_pem)


@pytest.mark.parametrize("how", ["hup", "watch"])
def test_renewed_files_are_served_by_the_running_workers(tmp_path: Path, how: str) -> None:
    old, new = leaf("ec"), leaf("ec")
    with file_server(tmp_path, old) as (server, chain, key):
        pids = sorted(server.worker_pids())
        before = get(server.port, trusting())
        assert before["serial"] == serial(old)
        with Load(server.port) as load:
            write(chain, key, new)
            if how == "hup":
                server.send(signal.SIGHUP)
            load.until_served(new)
        assert load.failures == []
        assert sorted(server.worker_pids()) == pids
        server.wait_log(r"TLS: new certificates on 127\.0\.0\.1:0, served by .* 2 running")
        server.wait_log(rf"TLS: certfile {chain} \(example\.test, .*\) valid until", count=2)
        assert_resumed(resumes_everywhere(server.port, before["session"], 2))
        if how == "watch":  # a certificate file touched, the same bytes: nothing happens
            chain.touch()
            server.wait_log("the same certificates: nothing to do")
            assert sorted(server.worker_pids()) == pids


def test_a_broken_renewal_keeps_the_old_certificate_serving(tmp_path: Path) -> None:
    old, new = leaf("ec"), leaf("ec")
    with file_server(tmp_path, old) as (server, chain, key):
        pids = sorted(server.worker_pids())
        chain.write_bytes(new.certificate_pem + new.chain_pem)  # the new key never comes
        server.wait_log(
            rf"reload failed: keyfile {key}: the private key is not the certificate's "
            r"\(.*\); the running workers keep serving"
        )
        assert get(server.port, trusting())["serial"] == serial(old)
        assert sorted(server.worker_pids()) == pids


def test_a_worker_started_after_a_renewal_serves_the_new_certificate(tmp_path: Path) -> None:
    old, new = leaf("ec"), leaf("ec")
    with file_server(tmp_path, old) as (server, chain, key):
        first = get(server.port, trusting())
        write(chain, key, new)
        server.send(signal.SIGHUP)
        wait_for(lambda: get(server.port, trusting())["serial"] == serial(new), timeout=20)
        pids = set(server.worker_pids())
        server.send(signal.SIGTTIN)  # one worker more, forked from the master as it is now
        wait_for(lambda: len(server.worker_pids()) == 3, timeout=20)
        (added,) = set(server.worker_pids()) - pids
        server.wait_log(rf"ready \(pid {added}")
        # its certificate is the new one, and the session from before resumes on it too
        assert get_from(server.port, added)["serial"] == serial(new)
        assert get_from(server.port, added, first["session"])["resumed"]


def get_from(port: int, pid: int, session: ssl.SSLSession | None = None) -> dict[str, Any]:
    """An answer of worker ``pid`` (connections made until it is the one that accepts)."""
    for _ in range(500):
        answer = get(port, trusting(), session)
        if answer["pid"] == pid:
            return answer
    raise AssertionError(f"worker {pid} accepted none of 500 connections")


def test_a_change_besides_the_certificates_starts_new_workers() -> None:
    old, new = leaf("ec"), leaf("ec")
    with store_server(old=old, new=new) as (server, control):
        document = serving_old(control)
        port = listening_port(server, "127.0.0.1:0")
        pids = set(server.worker_pids())
        document["listeners"]["127.0.0.1:0"]["tls"] = {
            "certificate": "new",
            "session": {"tickets": False},
        }
        assert control.put("/config", document).status == 200
        assert get(port, trusting())["serial"] == serial(new)
        wait_for(lambda: not set(server.worker_pids()) & pids, timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="--user needs a master started as root")
def test_workers_that_cannot_read_the_key_take_a_renewal(sandbox, tmp_path: Path) -> None:
    # the master reads the new key as root and sends the workers the PEM: their user
    # (nobody) opens no file of it
    from tests.integration.test_privileges import USER, serve

    old, new = leaf("ec"), leaf("ec")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    chain, key = private / "fullchain.pem", private / "privkey.pem"
    write(chain, key, old)
    key.chmod(0o600)
    flags = ("--user", USER, "--certfile", str(chain), "--keyfile", str(key))
    with serve(sandbox, *flags, workers=2) as server:
        pids = sorted(server.worker_pids())
        assert get(server.port, trusting())["serial"] == serial(old)
        write(chain, key, new)
        server.send(signal.SIGHUP)
        wait_for(lambda: get(server.port, trusting())["serial"] == serial(new), timeout=20)
        answers = [get(server.port, trusting()) for _ in range(20)]
        assert {answer["serial"] for answer in answers} == {serial(new)}
        assert sorted(server.worker_pids()) == pids
        assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_uid == 0

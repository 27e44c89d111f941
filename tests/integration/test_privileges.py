"""``--user`` / ``--group``: the master binds as root, each worker drops privileges after fork.

The default interpreter of this machine lives under /root (pyenv), which an unprivileged worker
cannot read, so these tests serve from a virtualenv made with Debian's /usr/bin/python3.11 in a
world-readable directory under /tmp, with corral installed into it (not editable) and the
application copied next to it (the `sandbox` fixture, conftest.py and venvs.py). They need a
root master and are skipped otherwise.
"""

from __future__ import annotations

import grp
import http.client
import json
import os
import pwd
import re
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from tests.integration.server import APPS, SRC, Server, http_json, read_response, wait_for
from tests.integration.venvs import Sandbox, make_demo_venv, readable
from tests.integration.venvs import readable_dir as _readable_dir

USER = "nobody"
GROUP = "nogroup"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="--user/--group need a master started as root (CI runs as root)"
)


def serve(sandbox: Sandbox, *args: str, **kwargs) -> Server:
    """The venv's corral serving priv_app; only the copied app dir is on PYTHONPATH."""
    return Server(
        "priv_app",
        *args,
        python=sandbox.python,
        cwd=str(sandbox.apps),
        env={"PYTHONPATH": str(sandbox.apps)},
        **kwargs,
    )


def unix_get_json(path: Path) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _headers, body = read_response(sock)
    assert status == 200
    return json.loads(body)


def proc_ids(pid: int) -> tuple[list[int], list[int], list[int]]:
    """Real, effective, saved and filesystem uids and gids, and the supplementary groups."""
    fields: dict[str, list[int]] = {}
    with open(f"/proc/{pid}/status") as stream:
        for line in stream:
            name, _, value = line.partition(":")
            if name in ("Uid", "Gid", "Groups"):
                fields[name] = [int(part) for part in value.split()]
    return fields["Uid"], fields["Gid"], sorted(set(fields["Groups"]))


@pytest.mark.parametrize(
    ("user", "group"),
    [(USER, GROUP), (USER, None), (str(pwd.getpwnam(USER).pw_uid), None)],
    ids=["user-and-group", "user-only", "numeric-user"],
)
def test_workers_run_as_user_and_group(sandbox, user, group):
    entry = pwd.getpwnam(USER)
    uid = entry.pw_uid
    gid = grp.getgrnam(group).gr_gid if group else entry.pw_gid
    groups = sorted(set(os.getgrouplist(entry.pw_name, gid)))
    assert 0 not in groups
    # A socket in a directory only root may write to: the unprivileged workers could not have
    # created it, so they serve what the root master bound.
    sock_path = _readable_dir(sandbox.root / f"sock-{user}-{group}") / "corral.sock"
    flags = ["--user", user] + (["--group", group] if group else [])
    with serve(sandbox, "-b", f"unix:{sock_path}", *flags, workers=2) as server:
        master_uid, master_gid, _ = proc_ids(server.proc.pid)
        assert master_uid == [0, 0, 0, 0] and master_gid == [0, 0, 0, 0]
        st = sock_path.stat()
        assert stat.S_ISSOCK(st.st_mode) and st.st_uid == 0

        workers = server.worker_pids()
        assert len(workers) == 2
        for pid in workers:  # real, effective, saved and fs ids: no way back to root
            assert proc_ids(pid) == ([uid] * 4, [gid] * 4, groups)

        expected = {"uid": uid, "euid": uid, "gid": gid, "egid": gid, "groups": groups}
        seen = set()
        for report in [http_json(server), unix_get_json(sock_path)]:
            assert report["imported"] == expected  # dropped before the app was imported
            assert report["serving"] == expected
            assert report["pid"] in workers
            assert report["app_file"] == str(sandbox.apps / "priv_app.py")
            assert Path(report["corral_file"]).parent == sandbox.site
            assert Path(report["prefix"]) == sandbox.root / "venv"
            seen.add(report["pid"])
        assert seen <= set(workers)
        assert "Traceback" not in server.stderr
        assert server.stop() == 0


@pytest.mark.parametrize(
    "flags",
    [("--user", "corral-no-such-user"), ("--group", "corral-no-such-group")],
    ids=["user", "group"],
)
def test_unknown_user_or_group_stops_with_one_error_line(sandbox, flags):
    name = flags[1]
    with serve(sandbox, *flags, wait_ready=False) as server:
        try:
            wait_for(lambda: server.proc.poll() is not None or "respawning" in server.stderr, 15)
        finally:
            if server.proc.poll() is None:
                server.kill()
        code = server.proc.returncode
        server.stop()  # joins the log readers, so stderr is complete
        err = server.stderr
        # 2 when validated at configuration time, 3 (the master's "worker can never start")
        # when the worker finds out after fork; never a respawn loop.
        assert code in (2, 3), err
        assert "Traceback" not in err, err
        assert "respawning" not in err, err
        assert err.count(" spawned (pid ") <= 1, err
        mentions = [line for line in err.splitlines() if name in line]
        assert len(mentions) == 1, err
        assert mentions[0].startswith("corral: error: "), err


def test_access_log_in_root_owned_directory(sandbox):
    logs = _readable_dir(sandbox.root / "logs")  # root's, 0755: the worker user can't create in it
    log_file = logs / "access.log"
    with serve(sandbox, "--user", USER, "--access-logfile", str(log_file), wait_ready=False) as s:

        def settled():
            return " ready (pid " in s.stderr or " died: " in s.stderr or s.proc.poll() is not None

        wait_for(settled, timeout=20)
        assert " ready (pid " in s.stderr, s.stderr
        s.wait_ready()
        assert http_json(s)["serving"]["uid"] == pwd.getpwnam(USER).pw_uid
        wait_for(lambda: log_file.exists() and log_file.read_text().strip(), timeout=10)


def test_home_virtualenv_as_the_worker_user(sandbox):
    """The worker activates `home` after it dropped privileges: it reads the virtualenv as
    the worker user, and one it cannot read fails to load with one line."""
    homes = _readable_dir(sandbox.root / "homes")
    home = make_demo_venv(homes / "open", "2.0")
    readable(home)
    closed = make_demo_venv(homes / "closed", "1.0")
    closed.chmod(0o700)  # root's: the master's check passes, the worker cannot read it
    shutil.copy(APPS / "venv_app.py", sandbox.apps / "venv_app.py")
    (sandbox.apps / "venv_app.py").chmod(0o644)
    options = {"python": sandbox.python, "cwd": str(sandbox.apps)}
    env = {"PYTHONPATH": str(sandbox.apps)}
    with Server("venv_app", "--user", USER, "--home", str(home), env=env, **options) as server:
        report = http_json(server)
        assert report["version"] == report["dist_version"] == "2.0"
        assert report["prefix"] == report["virtual_env"] == str(home)
        assert report["base_prefix"] == "/usr"  # the sandbox's interpreter, Debian's
        assert Path(report["msgspec_file"]).is_relative_to(sandbox.root / "venv")
        assert server.stop() == 0
    with Server(
        "venv_app", "--user", USER, "--home", str(closed), env=env, wait_ready=False, **options
    ) as server:
        wait_for(lambda: server.proc.poll() is not None, 20)
        assert server.stop() == 3
        err = server.stderr
        cause = f"home {closed}: cannot read pyvenv.cfg: Permission denied"
        assert len([line for line in err.splitlines() if cause in line]) == 1, err
        assert "Traceback" not in err and "respawning" not in err, err


def test_each_application_runs_as_its_own_user(sandbox):
    """Two applications of one root master (a Unit document): each pool drops to its own user
    and group before importing its application."""
    config = sandbox.root / "two-users.json"
    config.write_text(
        json.dumps(
            {
                "listeners": {
                    "127.0.0.1:0": {"pass": "applications/web"},
                    "127.0.0.2:0": {"pass": "applications/jobs"},
                },
                "applications": {
                    "web": {"module": "priv_app", "user": USER, "group": GROUP},
                    "jobs": {"module": "priv_app", "user": "daemon", "group": "daemon"},
                },
            }
        )
    )
    with Server(
        f"--config={config}",
        bind=None,
        python=sandbox.python,
        cwd=str(sandbox.apps),
        env={"PYTHONPATH": str(sandbox.apps)},
        wait_ready=False,
    ) as server:
        server.expected_workers = 2  # one per application
        server.wait_ready()
        ports = dict(re.findall(r"listening on http://([\d.]+):(\d+)", server.stderr))
        for host, user, group in (("127.0.0.1", USER, GROUP), ("127.0.0.2", "daemon", "daemon")):
            conn = http.client.HTTPConnection(host, int(ports[host]), timeout=10)
            conn.request("GET", "/")
            report = json.loads(conn.getresponse().read())
            conn.close()
            uid, gid = pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
            assert report["imported"]["uid"] == report["serving"]["euid"] == uid, (user, report)
            assert report["imported"]["gid"] == report["serving"]["egid"] == gid, (group, report)
            real, _, _ = proc_ids(report["pid"])
            assert real == [uid] * 4
        assert proc_ids(server.proc.pid)[0] == [0, 0, 0, 0]
        assert "Traceback" not in server.stderr
        assert server.stop() == 0


def test_workers_switched_to_a_user_who_cannot_read_the_interpreter_still_serve():
    # The tests' own interpreter (root's pyenv here, and in CI): after the switch a worker
    # cannot read its standard library, so everything it needs is imported before the fork
    # (a worker that imported ctypes after the switch died and was respawned, forever).
    # Where the interpreter is readable by everyone this passes without testing that.
    root = Path(tempfile.mkdtemp(prefix="corral-unreadable-", dir="/tmp"))
    try:
        root.chmod(0o755)
        shutil.copytree(Path(SRC) / "corral", root / "corral")
        shutil.copy(APPS / "priv_app.py", root / "priv_app.py")
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        with Server(
            "priv_app",
            "--user",
            USER,
            "--group",
            GROUP,
            cwd=str(root),
            env={"PYTHONPATH": str(root)},
        ) as server:
            info = http_json(server, "/")
            assert info["serving"]["uid"] == pwd.getpwnam(USER).pw_uid
            assert "exited" not in server.stderr and "Traceback" not in server.stderr
            assert server.stop() == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_https_workers_serve_with_a_key_only_root_can_read(sandbox, tmp_path):
    # the master reads the key as root and the workers inherit the TLS context: their user
    # never opens the file (issue 33, docs/tls.md)
    import ssl

    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    chain, key = private / "chain.pem", private / "key.pem"
    cert.private_key_pem.write_to_path(str(key))
    key.chmod(0o600)
    chain.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    with serve(sandbox, "--user", USER, "--certfile", str(chain), "--keyfile", str(key)) as server:
        with (
            socket.create_connection((server.host, server.port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            status, _headers, body = read_response(tls)
        report = json.loads(body)
        assert status == 200 and report["serving"]["euid"] == pwd.getpwnam(USER).pw_uid
        assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_uid == 0
        assert server.stop() == 0

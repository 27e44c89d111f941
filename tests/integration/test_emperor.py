"""uWSGI's Emperor (``corral --emperor DIR``): one application per file, kept in step with the
directory on real processes, through the same apply path as the control API.

Each vassal listens on its own loopback address (127.0.0.N) with an ephemeral port, so that
the listeners have distinct document keys.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.integration.control import listening_port, short_dir
from tests.integration.load import Load
from tests.integration.server import Server, http_get, wait_for
from tests.integration.test_applications import At, pids_of, refused


def vassal(directory: Path, name: str, host: str, workers: int = 1) -> None:
    (directory / name).write_text(
        f'app = "chaos_app:application"\nbind = ["{host}:0"]\nworkers = {workers}\n'
    )


def test_files_added_changed_touched_removed_and_broken_change_only_their_application():
    with short_dir() as directory:
        vassal(directory, "a.toml", "127.0.0.1", workers=2)
        (directory / "b.json").write_text(
            '{"app": "chaos_app:application", "bind": ["127.0.0.2:0"]}'
        )
        server = Server(f"--emperor={directory}", bind=None, wait_ready=False)
        with server:
            server.wait_log(r"worker \d+ of b ready")
            wait_for(lambda: len(pids_of(server, "a")) == 2 and len(pids_of(server, "b")) == 1)
            a = At("127.0.0.1", listening_port(server, "127.0.0.1:0"))
            b = At("127.0.0.2", listening_port(server, "127.0.0.2:0"))
            a_pids, b_pids = pids_of(server, "a"), pids_of(server, "b")
            with Load(a, 4, "/") as load:
                load.wait_requests(50)
                # touched, same content: b restarts, a serves on untouched
                os.utime(directory / "b.json", ns=(1, 1))
                server.wait_log("reconfiguring \\(emperor: b.json changed\\)")
                server.wait_log("reload complete: generation 2")
                wait_for(lambda: pids_of(server, "b") and pids_of(server, "b") != b_pids)
                assert http_get(b)[0] == 200
                # added
                vassal(directory, "c.toml", "127.0.0.3")
                server.wait_log("emperor: c.toml added")
                server.wait_log("reload complete: generation 3")
                c = At("127.0.0.3", listening_port(server, "127.0.0.3:0"))
                assert http_get(c)[0] == 200
                # broken, new or changed: one line, nothing changes
                (directory / "d.toml").write_text("app = ")
                server.wait_log("emperor: .*d.toml: invalid TOML.*; it changes nothing")
                (directory / "a.toml").write_text('app = "chaos_app:application"\nworkers = "x"\n')
                server.wait_log("emperor: .*a.toml: .*workers.*; it changes nothing")
                # removed
                (directory / "b.json").unlink()
                server.wait_log("emperor: b.json removed")
                server.wait_log("reload complete: generation 4")
                wait_for(lambda: refused(b))
                load.wait_requests(50)
            assert load.failures == [], load.summary()
            assert pids_of(server, "a") == a_pids
            assert "generation 5" not in server.stderr
            assert server.stderr.count("it changes nothing") == 2
            # with several applications, a worker's exit names its application
            assert re.search(r"worker 0 of b \(pid \d+\) exited: exit code 0", server.stderr)
            assert server.stop() == 0


def test_a_vassal_that_fails_to_load_is_rolled_back_and_forgotten():
    with short_dir() as directory:
        vassal(directory, "a.toml", "127.0.0.1")
        server = Server(f"--emperor={directory}", bind=None, wait_ready=False)
        with server:
            server.wait_log(r"worker \d+ of a ready|worker 0 ready")
            (directory / "b.toml").write_text(
                'app = "no_such_module:app"\nbind = ["127.0.0.2:0"]\n'
            )
            server.wait_log("emperor: b.toml added")
            server.wait_log("reload failed: .*generation 1 keeps serving")
            a = At("127.0.0.1", listening_port(server, "127.0.0.1:0"))
            assert http_get(a)[0] == 200
            # the next change does not bring b back
            vassal(directory, "c.toml", "127.0.0.3")
            server.wait_log("emperor: c.toml added")
            server.wait_log(r"worker \d+ of c ready")
            c = At("127.0.0.3", listening_port(server, "127.0.0.3:0"))
            assert http_get(c)[0] == 200
            assert server.stop() == 0


def test_an_empty_directory_waits_and_bad_command_lines_are_one_line(tmp_path):
    from tests.integration.server import run_cli

    result = run_cli("--emperor", str(tmp_path / "missing"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"corral: error: --emperor: {tmp_path / 'missing'}: not a directory"
    ]
    result = run_cli("--emperor", str(tmp_path), "app:application")
    assert result.returncode == 2 and "give no APP" in result.stderr
    with Server(f"--emperor={tmp_path}", bind=None, wait_ready=False) as server:
        server.wait_log("no application configured")
        vassal(tmp_path, "a.toml", "127.0.0.1")
        server.wait_log(r"worker 0 (of a )?ready")
        assert server.stop() == 0


def test_a_uwsgi_emperor_file_and_ini_vassals():
    # uWSGI's habit: `uwsgi --ini emperor.ini` whose `emperor = DIR` holds the vassals' inis
    with short_dir() as directory:
        vassals = directory / "vassals"
        vassals.mkdir()
        (directory / "emperor.ini").write_text(
            "[uwsgi]\nemperor = %d/vassals\nmaster = true\nenv = A=1\n"
        )
        (vassals / "shop.ini").write_text(
            "[uwsgi]\nmodule = chaos_app:application\nhttp-socket = 127.0.0.1:0\n"
            "processes = 2\nstats = 127.0.0.1:9191\n"
        )
        server = Server(f"--ini={directory / 'emperor.ini'}", bind=None, wait_ready=False)
        with server:
            server.wait_log(r"worker \d+ (of shop )?ready")
            wait_for(lambda: len(pids_of(server, "shop")) == 2)
            shop = At("127.0.0.1", listening_port(server, "127.0.0.1:0"))
            assert http_get(shop)[0] == 200
            # env is a vassal's option: the emperor says so and goes on
            assert "env: not for the emperor" in server.stderr
            # a vassal's unsupported option is one warning in the log, not a failure
            server.wait_log("emperor: .*shop.ini.*stats")
            assert server.stop() == 0

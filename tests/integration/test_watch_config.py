"""``--watch-config``: the config file a deploy tool pushes reloads the server when its bytes
change, however it is written (in place, renamed over with its old time, a Kubernetes
ConfigMap's link swapped); a touch alone, or a file that does not parse, changes nothing that
serves. Real servers; the change is seen in what the new workers answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.server import APPS, Server, wait_for
from tests.integration.supervision import get

CONFIG = 'app = "proc_apps"\nbind = ["127.0.0.1:0"]\nwatch_config = true\nenv = {{ MARK = "{}" }}\n'


def mark(server: Server) -> str:
    return json.loads(get(server, "/info")[2])["environ"]["MARK"]


def reloads(server: Server) -> int:
    return server.stderr.count("reload complete:")


def replace_keeping_time(path: Path, text: str) -> None:
    """What ``rsync -t`` does: a new file renamed over the old, with the old one's times."""
    before = path.stat()
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    os.utime(fresh, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(fresh, path)


def test_a_changed_config_file_reloads_and_a_touch_or_a_broken_file_does_not(tmp_path):
    config = tmp_path / "corral.toml"
    config.write_text(CONFIG.format("one"))
    with Server(f"--config={config}", bind=None) as server:
        assert mark(server) == "one"
        (first,) = server.worker_pids()
        # written in place
        config.write_text(CONFIG.format("two"))
        server.wait_log(r"reload complete: generation 2 ", timeout=10)
        assert f"{config} changed" in server.stderr
        wait_for(lambda: first not in server.worker_pids(), timeout=5)
        assert mark(server) == "two"
        # a new modification time, the same bytes: no change
        os.utime(config)
        time.sleep(2.5)  # showing that nothing happens takes two of the master's looks
        assert reloads(server) == 1, server.stderr
        # renamed over, keeping the old file's time: the bytes changed
        replace_keeping_time(config, CONFIG.format("three"))
        server.wait_log(r"reload complete: generation 3 ", timeout=10)
        wait_for(lambda: mark(server) == "three", timeout=5)
        # half written: one failed reload, the running workers serve on...
        serving = wait_for(lambda: len(pids := server.worker_pids()) == 1 and pids, timeout=5)
        config.write_text('app = "proc_apps"\nbind = ["127.0.0.1:0"\n')
        server.wait_log(r"reload failed", timeout=10)
        time.sleep(1.5)  # ... and it is not read again until it changes
        assert server.stderr.count("reload failed") == 1, server.stderr
        assert mark(server) == "three" and server.worker_pids() == serving
        # ... and its last write is a change again
        config.write_text(CONFIG.format("four"))
        wait_for(lambda: reloads(server) == 3, timeout=10)
        wait_for(lambda: mark(server) == "four", timeout=5)
        assert server.stop() == 0


def test_a_configmap_link_swap_reloads(tmp_path):
    """Kubernetes mounts a ConfigMap as links: ``corral.toml -> ..data/corral.toml`` and
    ``..data -> ..VERSION``; an update writes a new ``..VERSION`` and swaps ``..data``."""
    mount = tmp_path / "config"
    for version, value in (("..v1", "one"), ("..v2", "two")):
        (mount / version).mkdir(parents=True)
        (mount / version / "corral.toml").write_text(CONFIG.format(value))
    (mount / "..data").symlink_to("..v1")
    (mount / "corral.toml").symlink_to("..data/corral.toml")
    with Server(f"--config={mount / 'corral.toml'}", bind=None) as server:
        assert mark(server) == "one"
        (mount / "..data_tmp").symlink_to("..v2")
        os.replace(mount / "..data_tmp", mount / "..data")
        server.wait_log(r"reload complete: generation 2 ", timeout=10)
        wait_for(lambda: mark(server) == "two", timeout=5)
        assert server.stop() == 0


def test_watch_config_without_a_config_file_is_one_line_and_exit_2(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(APPS), *sys.path]))
    done = subprocess.run(
        [sys.executable, "-m", "corral", "proc_apps", "--watch-config", "-b", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "corral: error: watch_config: there is no config file to watch: give one with -c FILE\n"
    )

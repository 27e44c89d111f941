"""``corral ctl top`` in a real terminal: a pty whose output a terminal emulator (pyte) turns
into the screen the test reads, keys written to it as a user types them; and ``--once``
(issue 12, point 6). The servers are real, the view reads only their control API.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pyte

from tests.integration.control import Control, ctl, short_dir
from tests.integration.server import Server, wait_for
from tests.integration.supervision import get

ROOT = Path(__file__).resolve().parents[2]
APP = "stacks_apps"  # /hold?s=SECONDS waits in the application; other paths answer at once
COLUMNS, LINES = 170, 45


def ctl_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TERM": "xterm", "LANG": "C.UTF-8"}


class Terminal:
    """A command on a pty of COLUMNS x LINES, its output rendered by pyte."""

    def __init__(self, *args: str) -> None:
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        self.lock = threading.Lock()
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.master = master
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "corral", "ctl", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=ctl_env(),
            start_new_session=True,
        )
        os.close(slave)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.stream.feed(data)

    def text(self) -> str:
        with self.lock:
            return "\n".join(line.rstrip() for line in self.screen.display)

    def wait(self, pattern: str, timeout: float = 10.0) -> str:
        def shown() -> str | None:
            text = self.text()
            return text if re.search(pattern, text, re.M) else None

        try:
            return wait_for(shown, timeout=timeout)
        except AssertionError:
            raise AssertionError(f"{pattern!r} not on the screen:\n{self.text()}") from None

    def press(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        os.close(self.master)


def worker_row(pid: int) -> str:
    return rf"^\s*{pid} {APP}\s+[0-9]+\s+[0-9]+ ready"


def workers(control: Control, name: str = APP) -> list[dict]:
    return control.get(f"/status/applications/{name}/workers").json


def test_top_shows_each_worker_and_acts_on_the_keys():
    with short_dir() as directory, Server(
        f"{APP}:application", f"--control=unix:{directory}/c.sock", "--latency-histogram",
        "--threads", "2", workers=2,  # threads: the loop beats while a request is held
    ) as server:  # fmt: skip
        control = Control.of(server)
        terminal = Terminal(f"--socket=unix:{directory}/c.sock", "top", "--interval", "0.5")
        try:
            for pid in server.worker_pids():
                terminal.wait(worker_row(pid))
            terminal.wait(rf"^{APP}\s+2\s+")  # the application's line: 2 workers running
            for _ in range(30):
                assert get(server, "/pid")[0] == 200
            # its total, then a rate and latency percentiles once two snapshots counted them
            terminal.wait(rf"^{APP}\s+2\s+[0-9.]+\s+30\s+0\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$")
            held = threading.Thread(target=get, args=(server, "/hold?s=3"))
            held.start()
            terminal.wait(r" GET /hold\?s=3 [0-9.]+s")  # the oldest request in flight, its age
            held.join(10)

            terminal.press("+")
            terminal.wait(rf"workers/more for {APP}: Ok")
            wait_for(lambda: len([w for w in workers(control) if w["state"] == "ready"]) == 3)
            terminal.wait(rf"^{APP}\s+3\s+")
            terminal.press("-")
            terminal.wait(rf"workers/fewer for {APP}: Ok")
            wait_for(lambda: len(workers(control)) == 2, timeout=15)
            terminal.wait(r"scale\s+stacks_apps: 2 worker\(s\)")  # the recent events

            before = {w["pid"] for w in workers(control)}
            terminal.press("r")
            terminal.wait(rf"restart for {APP}: Ok", timeout=20)
            # the answer comes once the new workers serve: the old may still be exiting

            def only_new() -> set[int] | None:
                pids = {w["pid"] for w in workers(control)}
                return pids if not pids & before else None

            after = wait_for(only_new, timeout=15)
            assert after and not after & before
            for pid in after:
                terminal.wait(worker_row(pid))

            victim = sorted(after)[0]
            os.kill(victim, signal.SIGKILL)
            terminal.wait(rf"crash\s+{APP} pid {victim}: died: signal SIGKILL")
            terminal.wait(r"crash: died: signal SIGKILL after [0-9.]+s$")  # a worker's last restart

            terminal.press("s")
            terminal.wait(r"sort: served")
            terminal.press("q")
            assert terminal.proc.wait(10) == 0
        finally:
            terminal.close()
        assert server.stop() == 0


def test_the_application_key_shows_one_application_at_a_time():
    with short_dir() as directory:
        document = {
            "listeners": {
                "127.0.0.1:0": {"pass": "applications/first"},
            },
            "applications": {name: {"module": APP, "processes": 1} for name in ("first", "second")},
        }
        config = Path(directory) / "two.json"
        config.write_text(json.dumps(document))
        with Server(
            f"--config={config}", f"--control=unix:{directory}/c.sock", bind=None,
        ) as server:  # fmt: skip
            control = Control.of(server)
            wait_for(lambda: workers(control, "second") and workers(control, "first"))
            (first,) = [w["pid"] for w in workers(control, "first")]
            (second,) = [w["pid"] for w in workers(control, "second")]
            terminal = Terminal(f"--socket=unix:{directory}/c.sock", "top")
            try:
                terminal.wait(rf"^\s*{first} first ")
                terminal.wait(rf"^\s*{second} second ")
                terminal.press("a")
                text = terminal.wait(r"application: first")
                text = terminal.wait(rf"^\s*{first} first ")
                assert not re.search(rf"^\s*{second} second ", text, re.M), text
                assert not re.search(r"^second ", text, re.M), text
                terminal.press("a")
                text = terminal.wait(r"application: second")
                text = terminal.wait(rf"^\s*{second} second ")
                assert not re.search(rf"^\s*{first} first ", text, re.M), text
                terminal.press("q")
                assert terminal.proc.wait(10) == 0
            finally:
                terminal.close()
            assert server.stop() == 0


def test_once_over_tcp_with_a_token_and_a_wrong_token_is_one_line():
    with Server(
        f"{APP}:application", "--control", "127.0.0.1:0", "--control-token", "s3cret", workers=2
    ) as server:  # fmt: skip
        address = Control.of(server, "s3cret").address.removeprefix("http://")
        result = ctl(f"--socket={address}", "--token=s3cret", "top", "--once")
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout  # plain text: no escape sequences
        for pid in server.worker_pids():
            assert re.search(worker_row(pid), result.stdout, re.M), result.stdout
        wrong = ctl(f"--socket={address}", "--token=nope", "top", "--once")
        assert wrong.returncode == 1 and wrong.stdout == ""
        assert wrong.stderr.startswith("corral ctl: error 401: "), wrong.stderr
        assert wrong.stderr.count("\n") == 1
        # the full-screen view too: its first snapshot is read before the screen changes
        terminal = Terminal(f"--socket={address}", "--token=nope", "top")
        try:
            assert terminal.proc.wait(10) == 1
            terminal.wait(r"^corral ctl: error 401: ")
        finally:
            terminal.close()
        assert server.stop() == 0


def test_once_over_the_unix_socket_prints_the_worker_table():
    with short_dir() as directory, Server(
        f"{APP}:application", f"--control=unix:{directory}/c.sock"
    ) as server:  # fmt: skip
        Control.of(server)
        result = ctl(f"--socket=unix:{directory}/c.sock", "top", "--once")
        assert result.returncode == 0, result.stderr
        (pid,) = server.worker_pids()
        assert re.search(worker_row(pid), result.stdout, re.M), result.stdout
        assert "OLDEST REQUEST" in result.stdout and "RECENT EVENTS" in result.stdout
        bad = ctl(f"--socket=unix:{directory}/c.sock", "top", "--interval", "0")
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1
        assert server.stop() == 0

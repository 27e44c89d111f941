"""corral's ``spawn.start`` hands a pool's socket over on descriptor 3 whatever descriptor it
has in the process that starts the program, 3 included (a dup2 onto itself would keep its
close-on-exec flag, and the program would find no socket)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# run in a fresh interpreter, where the first socket opened gets descriptor 3 when the
# descriptors before it are taken (``taken``: how many are opened first)
_STARTER = """
import os, socket, sys
from corral.external.command import Command
from corral.external.places import Places
from corral.external import spawn

held = [os.open(os.devnull, os.O_RDONLY) for _ in range({taken})]
places = Places("x", "fd")
place = places.at(0)
print("socket fd", places.socket.fileno(), flush=True)
program = (
    "import os, socket; "
    "s = socket.socket(fileno=3); "
    "mine = os.environ['LISTEN_PID'] == str(os.getpid()); "
    "print('fd 3', s.getsockname()[1], os.environ['LISTEN_FDS'], mine)"
)
pid = spawn.start("x", Command(argv=(sys.executable, "-c", program)), place, places.socket)
_, status = os.waitpid(pid, 0)
print("port", place.port, "exit", os.waitstatus_to_exitcode(status), flush=True)
"""


@pytest.mark.parametrize("taken", [0, 3])
def test_the_program_finds_the_socket_on_descriptor_3(taken: int):
    done = subprocess.run(
        [sys.executable, "-c", _STARTER.format(taken=taken)],
        capture_output=True,
        text=True,
        timeout=60,
        close_fds=True,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"socket fd {3 + taken}"
    port = lines[-1].split()[1]
    assert f"fd 3 {port} 1 True" in lines, done.stdout + done.stderr
    assert lines[-1].endswith("exit 0")

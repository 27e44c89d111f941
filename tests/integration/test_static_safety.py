"""No file outside a share's root, ever, and no descriptor left behind (issue 32, points 3 and
4), through real corral processes on each request core: request targets sent as raw bytes
through the real parser and router, a symbolic link swapped in under a live server, random
paths against a root with a secret beside it, and the worker's open descriptors counted
before and after 10,000 requests, errors included.
"""

from __future__ import annotations

import json
import os
import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server import Server, read_all, wait_for
from tests.integration.test_http import Reader, Response, get

pytestmark = pytest.mark.usefixtures("each_core")

SECRET = b"the secret beside the root"
SMALL = b"public and small\n"
LARGE = bytes(range(256)) * 1024  # 256 KiB: above what is kept in memory, sent by sendfile
SEED = 32  # the fuzz's: the same paths every run


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("safety")
    www = root / "www"
    (www / "sub").mkdir(parents=True)
    (root / "secret.txt").write_bytes(SECRET)
    (root / "www-secret.txt").write_bytes(SECRET)  # a sibling whose name starts as the root's
    (www / "a.txt").write_bytes(SMALL)
    (www / "sub" / "b.txt").write_bytes(SMALL)
    (www / "large.bin").write_bytes(LARGE)
    return root


@pytest.fixture(scope="module")
def server(each_core: str, root: Path) -> Iterator[Server]:
    www = root / "www"
    document = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [
            # corral's --static writes this: a chroot at the directory
            {
                "match": {"uri": ["/jail", "/jail/*"]},
                "action": {"share": f"{www}${{uri_after:/jail}}", "chroot": str(www)},
            },
            {
                "match": {"uri": ["/strict", "/strict/*"]},
                "action": {
                    "share": f"{www}${{uri_after:/strict}}",
                    "chroot": str(www),
                    "follow_symlinks": False,
                },
            },
            {"action": {"share": f"{www}$uri"}},  # nginx's root, no chroot
        ],
        # what a path resolved to is trusted 0.2 s: a swapped file is seen soon
        "settings": {"http": {"static": {"cache_valid": 0.2}}},
    }
    path = root / f"safety-{each_core}.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as running:
        yield running
        assert running.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in running.stderr, running.stderr


def exchange(server: Server, raw: bytes) -> tuple[int, bytes]:
    """One raw request on its own connection: its status (0: closed unanswered) and all the
    bytes that came back."""
    with server.connect() as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        data = read_all(sock)
    return (int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0), data


TRAVERSALS = [
    b"/../secret.txt",
    b"/../../secret.txt",
    b"/sub/../../secret.txt",
    b"/./.././secret.txt",
    b"//../secret.txt",
    b"/..%2fsecret.txt",
    b"/%2e%2e/secret.txt",
    b"/%2e%2e%2fsecret.txt",
    b"/.%2e/secret.txt",
    b"/%2e./secret.txt",
    b"/%252e%252e/secret.txt",  # double encoding: a file named %2e%2e, which is not there
    b"/%252e%252e%252fsecret.txt",
    b"/..\\secret.txt",
    b"/..%5csecret.txt",
    b"/%5c..%5csecret.txt",
    b"/%2e%2e%5csecret.txt",
    b"/secret.txt%00",
    b"/a.txt%00/../../secret.txt",
    b"/%00/../secret.txt",
    b"/\x00/../secret.txt",  # a raw NUL: the parser's to refuse
    b"/%c0%ae%c0%ae/secret.txt",  # overlong UTF-8 for '.'
    b"/%c0%ae%c0%ae%c0%afsecret.txt",
    b"/%e0%80%ae%e0%80%ae/secret.txt",
    b"/..;/secret.txt",
    b"/../www-secret.txt",
    b"/..%2fwww-secret.txt",
    b"http://example.com/../secret.txt",  # the absolute form
    b"/sub/..%2f..%2fsecret.txt",
]


@pytest.mark.parametrize("prefix", [b"", b"/jail", b"/strict"])
@pytest.mark.parametrize("target", TRAVERSALS, ids=[t.decode("latin-1") for t in TRAVERSALS])
def test_a_traversal_is_refused_never_served(server: Server, prefix: bytes, target: bytes) -> None:
    if target.startswith(b"http://"):
        target = b"http://example.com" + prefix + target.removeprefix(b"http://example.com")
    else:
        target = prefix + target
    status, data = exchange(server, b"GET " + target + b" HTTP/1.1\r\nHost: example.com\r\n\r\n")
    assert status in (400, 403, 404), data[:200]
    assert SECRET not in data


def test_the_same_targets_serve_what_is_inside(server: Server) -> None:
    """The refusals above are not a server that refuses everything."""
    for target in (b"/a.txt", b"/jail/a.txt", b"/strict/sub/b.txt", b"/sub/../a.txt"):
        status, data = exchange(server, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200 and data.endswith(SMALL), target


def ask(server: Server, path: str) -> Response:
    with server.connect() as sock:
        sock.sendall(get(path, "Connection: close"))
        return Reader(sock).response()


@pytest.mark.parametrize("name", ["swap.txt", "swap.bin"])
def test_a_symlink_swapped_in_under_a_live_server_is_refused(
    server: Server, root: Path, name: str
) -> None:
    """A file replaced by a link to the secret between two requests: within cache_valid the
    shares that forbid it refuse it (the chroot: the link leads out; follow_symlinks false: a
    link at all), and no answer ever carries the secret. Small files are answered from memory,
    large ones opened again for each request: both."""
    www = root / "www"
    body = SMALL if name.endswith(".txt") else LARGE
    (www / name).write_bytes(body)
    try:
        for prefix in ("/jail", "/strict"):
            assert ask(server, f"{prefix}/{name}").body == body
        link = www / f".{name}.link"
        link.symlink_to(root / "secret.txt")
        os.replace(link, www / name)  # atomically: the name is a link from now on

        def refused() -> bool:
            answers = [ask(server, f"{prefix}/{name}") for prefix in ("/jail", "/strict")]
            assert all(SECRET not in answer.body for answer in answers)
            return all(answer.status == 403 for answer in answers)

        wait_for(refused, timeout=5)
        # no chroot: nginx's root follows it
        wait_for(lambda: ask(server, f"/{name}").body == SECRET, timeout=5)
    finally:
        (www / name).unlink()


def test_random_paths_find_nothing_outside(server: Server) -> None:
    """Paths made at random of the pieces traversals are made of, through the parser and
    the router: whatever comes back is never the secret, and a 200 is a file of the root."""
    pieces = [
        "..", ".", "/", "/", "%2e", "%2E", "%2f", "%2F", "%5c", "\\", "%00", "%25", "%c0%ae",
        "%c0%af", ";", "a.txt", "sub", "secret.txt", "www", "www-secret.txt", "jail", "strict",
        "b.txt", "?", "#", "%", "%%", "~", "*",
    ]  # fmt: skip
    generator = random.Random(SEED)
    targets = []
    for _ in range(400):
        path = "".join(generator.choice(pieces) for _ in range(generator.randint(1, 9)))
        targets.append(("/" + path).encode("latin-1"))
    with server.connect() as sock:
        reader = Reader(sock)
        for target in targets:
            sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                answer = reader.response()
            except EOFError:  # refused by the parser (400), the connection closed after
                sock.close()
                sock = server.connect()
                reader = Reader(sock)
                continue
            assert SECRET not in answer.body, target
            assert answer.status in (200, 301, 400, 403, 404), (target, answer)
            if answer.status == 200:
                assert answer.body in (SMALL, LARGE), target
            if answer.get("connection") == "close":
                sock.close()
                sock = server.connect()
                reader = Reader(sock)
        sock.close()


def open_descriptors(pid: int) -> list[str]:
    fds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return sorted(fds)


# the mix of the 10,000: a file from memory and from a descriptor (whole, a range, HEAD), a
# revalidation, and every kind of refusal and error a share gives
MIX = [
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /large.bin HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /large.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=100-299\r\n\r\n",
    b"HEAD /large.bin HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n",
    b"GET /missing.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /jail/../secret.txt HTTP/1.1\r\nHost: x\r\n\r\n",  # /secret.txt: not in www
    b"GET /sub HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /large.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=999999-\r\n\r\n",
    b'GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-Match: "no"\r\n\r\n',
    b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
    b"GET /%2e%2e/secret.txt HTTP/1.1\r\nHost: x\r\n\r\n",
]
STATUSES = [200, 200, 206, 200, 304, 404, 404, 301, 416, 412, 405, 400]


def test_the_workers_descriptors_are_flat_after_10000_requests(server: Server) -> None:
    (worker,) = server.worker_pids()
    warm = [exchange(server, raw)[0] for raw in MIX]  # whatever is made once is made now
    assert warm == STATUSES
    before = open_descriptors(worker)  # each of those connections is closed: none is counted
    done = 0
    batch = 50
    while done < 10_000:
        with server.connect() as sock:
            reader = Reader(sock)
            # pipelined, as many clients of a keep-alive connection send them
            sent = [MIX[(done + i) % len(MIX)] for i in range(batch)]
            sock.sendall(b"".join(sent))
            for raw in sent:
                method = raw.split(b" ", 1)[0].decode()
                answer = reader.response(method)
                assert answer.status == STATUSES[MIX.index(raw)], (raw, answer)
                assert answer.get("connection") is None, answer  # each keeps it open
            done += batch
        if done % 1000 == 0:
            # a client that leaves in the middle of a large file, and one that sends garbage
            with server.connect() as sock:
                sock.sendall(MIX[1] * 4)
                sock.recv(1024)
            assert exchange(server, b"NOT HTTP\r\n\r\n")[0] == 400
    # the server closes its side of each connection; the worker's count goes back
    wait_for(lambda: open_descriptors(worker) == before, timeout=10)

"""No file outside the root, ever (issue 32, point 4): each way out a request or a tree can
try, through routing and the share engine as a request meets them, with openat2 and with the
component walk that stands in for it on older kernels; then random paths against a root with
a secret beside it.

Each case is answered 400 (routing refuses the target), 403 or 404, and never with the
secret's bytes."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.static import opener
from corral.static.files import StaticFiles
from corral.static.opener import NO_SYMLINKS, NO_XDEV, chroot_relative, open_file

from .share_site import Site, tree

SECRET = b"the secret beside the root"

WAYS = [
    pytest.param(None, id="openat2"),
    pytest.param(False, id="walk"),
]


@pytest.fixture(params=WAYS)
def way(request: pytest.FixtureRequest) -> bool | None:
    if request.param is None and not opener.has_openat2():
        pytest.skip("this kernel has no openat2: the walk cases cover it")
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def site_root(tmp_path: Path) -> Path:
    """``root/www`` (shared) with ``root/secret`` and ``root/www-secret/...`` beside it."""
    tree(
        tmp_path,
        {
            "secret": SECRET,
            "www-secret/key": SECRET,
            "www/index.html": "home",
            "www/a/b.txt": "inside",
            "www/inner-link.txt": "->a/b.txt",
            "www/relative-out": "->../secret",
            "www/absolute-out": "->" + str(tmp_path / "secret"),
            "www/dir-out": "->../www-secret",
            "www/absolute-in": "->" + str(tmp_path / "www/a/b.txt"),
        },
    )
    return tmp_path


def site(root: Path, way: bool | None, **options: object) -> Site:
    files = StaticFiles(valid=0, openat2=way)
    return Site([{"action": {"share": f"{root}/www$uri", **options}}], files)


def never_the_secret(reply_body: bytes) -> None:
    assert SECRET not in reply_body


@pytest.mark.parametrize(
    "target",
    [
        "/../secret",
        "/a/../../secret",
        "/%2e%2e/secret",
        "/%2E%2E/secret",
        "/a/%2e%2e/%2e%2e/secret",
        "/.%2e/secret",
        "/%2e%2e%2fsecret",
        "/a%2f..%2f..%2fsecret",
        "/..%2fsecret",
        "/%252e%252e/secret",  # double encoding: a name with '%2e' in it
        "/%252e%252e%252fsecret",
        "/..\\secret",  # a backslash is a name's byte on Linux
        "/a\\..\\..\\secret",
        "/%5c..%5csecret",
        "/%00/../secret",
        "/secret%00",
        "/a/b.txt%00.png",
        "/%c0%ae%c0%ae/secret",  # overlong UTF-8 for '.'
        "/%c0%ae%c0%ae%c0%afsecret",
        "/%e0%80%ae%e0%80%ae/secret",
        "/..;/secret",
        "//../secret",
        "/./../secret",
        "/a/./../../secret",
        "/../www-secret/key",
        "/%2e%2e/www-secret/key",
        "/-secret/key",  # "{root}/www" + "-secret/key" is never built: $uri starts with '/'
    ],
)
def test_traversal_targets(site_root: Path, way: bool | None, target: str) -> None:
    for options in ({}, {"chroot": f"{site_root}/www"}, {"follow_symlinks": False}):
        reply = site(site_root, way, **options).get(target)
        assert reply.status in (400, 403, 404), (target, options, reply)
        never_the_secret(reply.body)


@pytest.mark.parametrize(
    ("target", "chroot", "no_links", "expected"),
    [
        # symlinks inside the root are followed unless the share forbids them
        ("/inner-link.txt", False, False, 200),
        ("/inner-link.txt", True, False, 200),
        ("/inner-link.txt", False, True, 403),
        # out of the root: the chroot refuses, as does follow_symlinks: false
        ("/relative-out", True, False, 403),
        ("/relative-out", False, True, 403),
        ("/absolute-out", True, False, 403),
        ("/absolute-out", False, True, 403),
        ("/dir-out/key", True, False, 403),
        ("/dir-out/key", False, True, 403),
        # an absolute symlink is refused under a chroot even pointing in (RESOLVE_BENEATH)
        ("/absolute-in", True, False, 403),
    ],
)
def test_symlinks(
    site_root: Path, way: bool | None, target: str, chroot: bool, no_links: bool, expected: int
) -> None:
    options: dict[str, object] = {}
    if chroot:
        options["chroot"] = f"{site_root}/www"
    if no_links:
        options["follow_symlinks"] = False
    reply = site(site_root, way, **options).get(target)
    assert reply.status == expected, reply
    never_the_secret(reply.body)
    if expected == 200:
        assert reply.body == b"inside"


def test_without_restriction_a_symlink_out_is_followed(site_root: Path, way: bool | None) -> None:
    # Unit's default: the share's author may link anywhere (the reason chroot exists)
    assert site(site_root, way).get("/relative-out").body == SECRET


def test_a_path_outside_the_chroot_is_refused(site_root: Path, way: bool | None) -> None:
    files = StaticFiles(valid=0, openat2=way)
    elsewhere = Site(
        [{"action": {"share": f"{site_root}$uri", "chroot": f"{site_root}/www"}}], files
    )
    assert elsewhere.get("/secret").status == 403
    assert elsewhere.get("/www/a/b.txt").body == b"inside"
    # the chroot's own name as a prefix of another directory's is not inside it
    sibling = Site([{"action": {"share": f"{site_root}/www$uri", "chroot": f"{site_root}/ww"}}])
    assert sibling.get("/a/b.txt").status == 403


def test_variables_cannot_climb(site_root: Path, way: bool | None) -> None:
    files = StaticFiles(valid=0, openat2=way)
    by_host = Site([{"action": {"share": f"{site_root}/www/$host$uri"}}], files)
    for host in ("..", "../www-secret", "a/../..", "%2e%2e"):
        reply = by_host.get("/secret", host=host)
        assert reply.status in (403, 404) and SECRET not in reply.body, host
    by_argument = Site([{"action": {"share": f"{site_root}/www/${{arg_f}}"}}], files)
    for value in ("../secret", "a/../../secret", "%2e%2e/secret", "..", "a%00"):
        reply = by_argument.get(f"/?f={value}")
        assert reply.status in (403, 404) and SECRET not in reply.body, value
    by_chroot = Site(
        [{"action": {"share": f"{site_root}/www/$host/x", "chroot": f"{site_root}/www/$host"}}],
        files,
    )
    # "..." is ".." once routing takes the Host's trailing dot off
    assert by_chroot.get("/", host="...").status == 403


def test_a_file_replaced_by_a_symlink_between_two_requests(
    site_root: Path, way: bool | None
) -> None:
    # trusted for a while, then resolved again: the swap is never served as the secret
    files = StaticFiles(valid=0.2, openat2=way)
    served = Site([{"action": {"share": f"{site_root}/www$uri", "follow_symlinks": False}}], files)
    assert served.get("/a/b.txt").body == b"inside"
    (site_root / "www/a/b.txt").unlink()
    (site_root / "www/a/b.txt").symlink_to(site_root / "secret")
    within = served.get("/a/b.txt")
    assert within.body in (b"inside", b"") and SECRET not in within.body
    time.sleep(0.25)
    assert served.get("/a/b.txt").status == 403
    # large files are opened again for each request: refused at once, cache or not
    (site_root / "www/big.bin").write_bytes(b"b" * 100_000)
    (site_root / "big-secret").write_bytes(SECRET * 4000)
    cached = StaticFiles(valid=60, openat2=way)
    big = Site([{"action": {"share": f"{site_root}/www$uri", "follow_symlinks": False}}], cached)
    assert big.get("/big.bin").body == b"b" * 100_000
    (site_root / "www/big.bin").unlink()
    (site_root / "www/big.bin").symlink_to(site_root / "big-secret")
    reply = big.get("/big.bin")
    assert reply.status in (403, 404, 500) and SECRET not in reply.body


def test_a_directory_replaced_by_a_symlink(site_root: Path, way: bool | None) -> None:
    served = site(site_root, way, chroot=f"{site_root}/www")
    assert served.get("/a/b.txt").body == b"inside"
    os.rename(site_root / "www/a", site_root / "www/a-old")
    (site_root / "www/a").symlink_to(site_root)
    reply = served.get("/a/secret")
    assert reply.status == 403 and SECRET not in reply.body


@pytest.fixture
def mounted(site_root: Path) -> Path:
    """A tmpfs mounted inside the root, holding a secret of its own."""
    point = site_root / "www/mnt"
    point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root (mount said: {done.stderr.decode().strip()})")
    (point / "secret").write_bytes(SECRET)
    yield point
    subprocess.run(["umount", "-l", str(point)], check=True)


def test_traverse_mounts(site_root: Path, mounted: Path, way: bool | None) -> None:
    open_mounts = site(site_root, way)
    assert open_mounts.get("/mnt/secret").body == SECRET
    closed = site(site_root, way, traverse_mounts=False)
    reply = closed.get("/mnt/secret")
    assert reply.status == 403 and SECRET not in reply.body
    assert closed.get("/a/b.txt").body == b"inside"
    with_chroot = site(site_root, way, traverse_mounts=False, chroot=f"{site_root}/www")
    assert with_chroot.get("/mnt/secret").status == 403


def test_opener_errors(site_root: Path, way: bool | None) -> None:
    www = f"{site_root}/www".encode()
    with pytest.raises(OSError) as refused:
        open_file(www + b"/relative-out", www, 0, openat2=way)
    assert refused.value.errno == 18  # EXDEV
    with pytest.raises(OSError) as looped:
        open_file(www + b"/inner-link.txt", None, NO_SYMLINKS, openat2=way)
    assert looped.value.errno == 40  # ELOOP
    with pytest.raises(OSError) as missing:
        open_file(www + b"/a/nope", www, NO_XDEV, openat2=way)
    assert missing.value.errno == 2
    with pytest.raises(OSError) as not_dir:
        open_file(www + b"/index.html/x", www, NO_SYMLINKS, openat2=way)
    assert not_dir.value.errno == 20  # ENOTDIR
    os.symlink("loop-b", site_root / "www/loop-a")
    os.symlink("loop-a", site_root / "www/loop-b")
    with pytest.raises(OSError) as loop:
        open_file(www + b"/loop-a", www, 0, openat2=way)
    assert loop.value.errno == 40
    # a relative symlink that climbs and comes back in is followed under a chroot
    os.symlink("../../www/a/b.txt", site_root / "www/a/around")
    fd = open_file(www + b"/a/around", site_root.as_posix().encode(), 0, openat2=way)
    os.close(fd)
    fd = open_file(www + b"/a//./b.txt", www + b"//", NO_SYMLINKS | NO_XDEV, openat2=way)
    try:
        assert os.read(fd, 100) == b"inside"
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("chroot", "path", "rest"),
    [
        (b"/www", b"/www/a", b"a"),
        (b"/www/", b"/www//a/b", b"a/b"),
        (b"//www", b"/www/a", b"a"),
        (b"/www", b"/www", None),
        (b"/www", b"/www/", None),
        (b"/www", b"/wwwx/a", None),
        (b"/www", b"/ww", None),
        (b"/www", b"www/a", None),
        (b"www", b"www/a", b"a"),
    ],
)
def test_chroot_relative(chroot: bytes, path: bytes, rest: bytes | None) -> None:
    assert chroot_relative(chroot, path) == rest


# -- random paths


_PIECES = st.sampled_from(
    [
        "..",
        ".",
        "%2e",
        "%2E",
        "%2f",
        "%2F",
        "%5c",
        "\\",
        "%00",
        "%25",
        "%c0%ae",
        "%c0%af",
        "%e0%80%ae",
        "/",
        "//",
        "secret",
        "www",
        "www-secret",
        "key",
        "a",
        "b.txt",
        "inner-link.txt",
        "relative-out",
        "absolute-out",
        "dir-out",
        ";",
        "?",
        "#",
        "%",
        "~",
        "*",
    ]
)

_ESCAPED_BYTES = st.binary(min_size=1, max_size=3).map(
    lambda raw: "".join(f"%{b:02x}" for b in raw)
)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(st.one_of(_PIECES, _ESCAPED_BYTES), min_size=1, max_size=12),
    way=st.sampled_from([None, False]),
)
def test_random_paths_find_nothing(site_root: Path, pieces: list[str], way: bool | None) -> None:
    if way is None and not opener.has_openat2():
        way = False
    target = "/" + "".join(pieces)
    for options in (
        {"chroot": f"{site_root}/www"},
        {"follow_symlinks": False},
        {"chroot": f"{site_root}/www", "follow_symlinks": False, "traverse_mounts": False},
    ):
        reply = site(site_root, way, **options).get(target.encode("latin-1"))
        assert SECRET not in reply.body, (target, options)
        assert reply.status in (200, 301, 400, 403, 404), (target, options, reply)


def test_a_relative_share_with_restrictions(site_root: Path, way: bool | None) -> None:
    # resolved from the working directory, each component checked as an absolute one is
    os.chdir(site_root)
    files = StaticFiles(valid=0, openat2=way)
    relative = Site([{"action": {"share": "www$uri", "follow_symlinks": False}}], files)
    assert relative.get("/a/b.txt").body == b"inside"
    assert relative.get("/inner-link.txt").status == 403
    chrooted = Site([{"action": {"share": "www$uri", "chroot": "www"}}], files)
    assert chrooted.get("/inner-link.txt").body == b"inside"
    assert chrooted.get("/relative-out").status == 403

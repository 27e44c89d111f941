"""Static files through real corral processes on each request core (issue 32, points 2 and 3):
NGINX Unit's ``share`` action in a document, each of its keys, and what nginx adds, read off
the wire as a client gets them.

One document serves a site in a temporary directory: a route per share key in front of a
share of the whole site, and an application (proc_apps: ``Hello, world!``) that a share's
fallback passes to. Every answer's head is read field by field (their order too), with its
framing: Content-Length right for HEAD, none on 304, the body on a keep-alive connection
that goes on serving.
"""

from __future__ import annotations

import email.utils
import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

import brotli
import pytest

from tests.integration.server import Server
from tests.integration.test_http import Reader, Response, get

pytestmark = pytest.mark.usefixtures("each_core")

SMALL = b"a small file, answered from memory\n"
BIG = os.urandom(1024 * 1024)  # above what is kept in memory: sent by sendfile
SCRIPT = b"".join(b"console.log('line %d of a script');\n" % i for i in range(300))
SECRET = b"the secret beside the root"
PAGE = b"".join(b"<p>paragraph %d of a page that compresses</p>\n" % i for i in range(400))
HELLO = b"Hello, world!"  # proc_apps's answer to a path it does not know


def site_files(root: Path) -> Path:
    """The site: ``root/www`` is shared, ``root/secret.txt`` is beside it."""
    www = root / "www"
    for directory in ("docs", "images", "empty"):
        (www / directory).mkdir(parents=True)
    (root / "secret.txt").write_bytes(SECRET)
    (www / "a.txt").write_bytes(SMALL)
    (www / "big.bin").write_bytes(BIG)
    (www / "app.js").write_bytes(SCRIPT)
    (www / "app.js.gz").write_bytes(gzip.compress(SCRIPT))
    (www / "app.js.br").write_bytes(brotli.compress(SCRIPT))
    (www / "docs" / "README.html").write_bytes(b"<h1>docs</h1>\n")
    (www / "images" / "a.png").write_bytes(b"\x89PNG not really")
    (www / "images" / "a.svg").write_bytes(b"<svg/>")
    (www / "app.3f2a9c81.css").write_bytes(b"body{}")
    (www / "plain.css").write_bytes(b"p{}")
    (www / "server.log").write_bytes(b"a log line\n")
    (www / "page.html").write_bytes(PAGE)  # 18 KB: from memory
    (www / "large.html").write_bytes(PAGE * 20)  # 365 KB: from the file
    (www / "link.txt").symlink_to("a.txt")
    (www / "out.txt").symlink_to("../secret.txt")
    return www


def document(www: Path) -> dict:
    def share(prefix: str, **keys: object) -> dict:
        return {
            "match": {"uri": [prefix, f"{prefix}/*"]},
            "action": {"share": f"{www}${{uri_after:{prefix}}}", **keys},
        }

    return {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [
            {"match": {"uri": "/app/*"}, "action": {"pass": "applications/app"}},
            share("/cached", expires="24h"),
            share("/hashed", expires="1h", immutable="hashed"),
            share("/headers", response_headers={"X-Robots-Tag": "noindex", "Accept-Ranges": None}),
            share("/typed", types=["image/*", "!image/svg+xml"]),
            share("/indexed", index="README.html"),
            share("/jail", chroot=str(www)),
            share("/nofollow", follow_symlinks=False),
            share("/try", fallback={"pass": "applications/app"}),
            # /dev/shm is a mount of its own below /dev on Linux (a tmpfs)
            {
                "match": {"uri": "/dev-strict/*"},
                "action": {"share": "/dev${uri_after:/dev-strict}", "traverse_mounts": False},
            },
            {"match": {"uri": "/dev-any/*"}, "action": {"share": "/dev${uri_after:/dev-any}"}},
            {"action": {"share": f"{www}$uri"}},
        ],
        "applications": {"app": {"module": "proc_apps"}},
        "settings": {"http": {"static": {"mime_types": {"text/x-log": [".log"]}}}},
    }


@pytest.fixture(scope="module")
def www(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return site_files(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def server(each_core: str, www: Path) -> Iterator[Server]:
    path = www.parent / f"static-{each_core}.json"
    path.write_text(json.dumps(document(www)))
    with Server(f"--config={path}", bind=None) as running:
        yield running
        assert running.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in running.stderr, running.stderr
        assert "warning" not in running.stderr.lower(), running.stderr


@pytest.fixture(scope="module")
def compressing(each_core: str, www: Path) -> Iterator[Server]:
    """The same site with compression configured for text."""
    config = document(www)
    config["settings"]["http"]["compression"] = {
        "types": ["text/*"],
        "compressors": [{"encoding": "gzip", "min_length": 256}],
    }
    path = www.parent / f"compressing-{each_core}.json"
    path.write_text(json.dumps(config))
    with Server(f"--config={path}", bind=None) as running:
        yield running
        assert running.proc.poll() is None, "the server died during the tests"
        assert "Traceback" not in running.stderr, running.stderr


def ask(server: Server, path: str, *lines: str, method: str = "GET", body: bytes = b"") -> Response:
    """One request on a keep-alive connection, which must still serve after the answer."""
    with server.connect() as sock:
        reader = Reader(sock)
        sock.sendall(get(path, *lines, method=method) + body)
        response = reader.response(method)
        sock.sendall(get("/a.txt"))
        assert reader.response().body == SMALL, "the connection did not go on"
        return response


def names(response: Response) -> list[str]:
    return [name for name, _ in response.headers]


# -- what a file's answer is ---------------------------------------------------------------


def test_a_file_its_head_and_its_fields_in_order(server: Server, www: Path) -> None:
    got = ask(server, "/a.txt")
    assert got.status == 200 and got.body == SMALL
    assert names(got) == [
        "Date",
        "Server",
        "Content-Type",
        "ETag",
        "Last-Modified",
        "Accept-Ranges",
        "Content-Length",
    ]
    assert got.get("content-type") == "text/plain" and got.get("accept-ranges") == "bytes"
    assert got.get("content-length") == str(len(SMALL))
    stat = os.stat(www / "a.txt")
    assert got.get("last-modified") == email.utils.formatdate(int(stat.st_mtime), usegmt=True)
    assert got.get("etag").startswith('"') and not got.get("etag").startswith("W/")
    head = ask(server, "/a.txt", method="HEAD")
    assert (head.status, head.body) == (200, b"")
    assert head.headers[1:] == got.headers[1:]  # its Content-Length is the GET's


def test_revalidation_304_and_preconditions_412(server: Server) -> None:
    first = ask(server, "/a.txt")
    etag, modified = first.get("etag"), first.get("last-modified")
    for condition in (f"If-None-Match: {etag}", f'If-None-Match: "x", {etag}', "If-None-Match: *"):
        got = ask(server, "/a.txt", condition)
        assert got.status == 304 and got.body == b"", condition
        assert names(got) == ["Date", "Server", "ETag", "Last-Modified"]  # no Content-Length
    assert ask(server, "/a.txt", f"If-Modified-Since: {modified}").status == 304
    # RFC 9110 13.2.2: If-None-Match decides when both are there
    assert (
        ask(server, "/a.txt", 'If-None-Match: "x"', f"If-Modified-Since: {modified}").status == 200
    )
    assert ask(server, "/a.txt", "If-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT").status == 200
    got = ask(server, "/a.txt", 'If-Match: "other"')
    assert got.status == 412 and got.get("content-length") == str(len(got.body))
    assert ask(server, "/a.txt", f"If-Match: {etag}").status == 200
    assert ask(server, "/a.txt", "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:01 GMT").status == 412
    head = ask(server, "/a.txt", f"If-None-Match: {etag}", method="HEAD")
    assert head.status == 304 and head.get("content-length") is None


def test_ranges_206_and_416(server: Server) -> None:
    size = len(SMALL)
    for spec, (start, stop) in (
        ("2-5", (2, 5)),
        ("-4", (size - 4, size - 1)),
        ("30-", (30, size - 1)),
    ):
        got = ask(server, "/a.txt", f"Range: bytes={spec}")
        assert got.status == 206, spec
        assert got.get("content-range") == f"bytes {start}-{stop}/{size}"
        assert got.body == SMALL[start : stop + 1]
        assert got.get("content-length") == str(stop - start + 1)
    etag = ask(server, "/a.txt").get("etag")
    assert ask(server, "/a.txt", "Range: bytes=0-0", f"If-Range: {etag}").status == 206
    full = ask(server, "/a.txt", "Range: bytes=0-0", 'If-Range: "changed"')
    assert full.status == 200 and full.body == SMALL
    got = ask(server, "/a.txt", "Range: bytes=1000-2000")
    assert got.status == 416 and got.get("content-range") == f"bytes */{size}"
    assert ask(server, "/a.txt", "Range: bytes=0-1", method="HEAD").status == 200
    # from the file, by sendfile: a range of the large one
    got = ask(server, "/big.bin", "Range: bytes=1000-200999")
    assert got.status == 206 and got.body == BIG[1000:201000]


def test_a_directory_without_its_slash_is_301_and_with_it_its_index(server: Server) -> None:
    got = ask(server, "/docs?page=2")
    assert got.status == 301 and got.get("location") == "/docs/?page=2"
    assert got.get("content-length") == "0" and got.body == b""
    assert ask(server, "/indexed/docs/").body == b"<h1>docs</h1>\n"
    assert ask(server, "/indexed/docs").get("location") == "/indexed/docs/"
    assert ask(server, "/docs/").status == 404  # no index.html there
    assert ask(server, "/empty/").status == 404


def test_a_megabyte_by_sendfile_arrives_whole(server: Server) -> None:
    got = ask(server, "/big.bin")
    assert got.status == 200 and got.get("content-length") == str(len(BIG))
    assert got.body == BIG
    head = ask(server, "/big.bin", method="HEAD")
    assert head.get("content-length") == str(len(BIG)) and head.body == b""


@pytest.mark.parametrize(
    ("accept", "coding"),
    [
        ("br", "br"),
        ("gzip", "gzip"),
        ("gzip, br", "br"),  # the smaller sibling, when the client weighs them alike
        ("gzip;q=1, br;q=0.5", "gzip"),
        ("identity", None),
        ("br;q=0, gzip;q=0", None),
        (None, None),
    ],
)
def test_a_precompressed_sibling_by_accept_encoding(server: Server, accept, coding) -> None:
    lines = [] if accept is None else [f"Accept-Encoding: {accept}"]
    got = ask(server, "/app.js", *lines)
    assert got.status == 200 and got.get("vary") == "Accept-Encoding"
    assert got.get("content-encoding") == coding
    assert got.get("content-type") == "text/javascript"
    if coding == "br":
        assert brotli.decompress(got.body) == SCRIPT
    elif coding == "gzip":
        assert gzip.decompress(got.body) == SCRIPT
    else:
        assert got.body == SCRIPT
    head = ask(server, "/app.js", *lines, method="HEAD")
    assert head.get("content-length") == str(len(got.body)) and head.body == b""
    assert head.get("content-encoding") == coding
    revalidated = ask(server, "/app.js", *lines, f"If-None-Match: {got.get('etag')}")
    assert revalidated.status == 304 and revalidated.get("vary") == "Accept-Encoding"


# -- each key of a share -------------------------------------------------------------------


def test_expires_sets_cache_control_and_expires(server: Server) -> None:
    got = ask(server, "/cached/a.txt")
    assert got.get("cache-control") == "max-age=86400"
    date = email.utils.parsedate_to_datetime(got.get("date"))
    expires = email.utils.parsedate_to_datetime(got.get("expires"))
    assert (expires - date).total_seconds() == 86400
    assert ask(server, "/cached/a.txt", method="HEAD").get("cache-control") == "max-age=86400"
    not_modified = ask(server, "/cached/a.txt", f"If-None-Match: {got.get('etag')}")
    assert not_modified.status == 304 and not_modified.get("cache-control") == "max-age=86400"


def test_immutable_for_hashed_names(server: Server) -> None:
    hashed = ask(server, "/hashed/app.3f2a9c81.css")
    assert hashed.get("cache-control") == "max-age=31536000, immutable"
    assert hashed.get("content-type") == "text/css"
    assert ask(server, "/hashed/plain.css").get("cache-control") == "max-age=3600"


def test_response_headers_added_and_removed(server: Server) -> None:
    got = ask(server, "/headers/a.txt")
    assert got.get("x-robots-tag") == "noindex" and got.get("accept-ranges") is None
    assert got.body == SMALL
    assert ask(server, "/headers/nothing").get("x-robots-tag") is None  # a 404 is not the file's


def test_types_refuse_what_they_do_not_list(server: Server) -> None:
    assert ask(server, "/typed/images/a.png").status == 200
    refused = ask(server, "/typed/images/a.svg")
    assert refused.status == 403 and b"Error 403" in refused.body
    assert ask(server, "/typed/a.txt").status == 403


def test_chroot_and_follow_symlinks_refuse_what_leads_out(server: Server) -> None:
    assert ask(server, "/out.txt").body == SECRET  # no chroot: a link is followed anywhere
    jailed = ask(server, "/jail/out.txt")
    assert jailed.status == 403 and SECRET not in jailed.body
    assert ask(server, "/jail/link.txt").body == SMALL  # a link inside the chroot is fine
    assert ask(server, "/nofollow/link.txt").status == 403
    assert ask(server, "/nofollow/a.txt").body == SMALL


def test_traverse_mounts_false_refuses_a_mount_below_the_share(server: Server) -> None:
    if os.stat("/dev").st_dev == os.stat("/dev/shm").st_dev:
        pytest.skip("/dev/shm is not a mount of its own on this machine")
    name = f"corral-static-test-{os.getpid()}.txt"
    path = Path("/dev/shm") / name
    path.write_bytes(SMALL)
    try:
        assert ask(server, f"/dev-any/shm/{name}").body == SMALL
        assert ask(server, f"/dev-strict/shm/{name}").status == 403
    finally:
        path.unlink()


def test_a_share_fallback_passes_to_the_application(server: Server) -> None:
    assert ask(server, "/try/a.txt").body == SMALL
    got = ask(server, "/try/not/there")
    assert (got.status, got.body) == (200, HELLO)
    assert ask(server, "/try/a.txt", method="POST").body == HELLO  # another method: fallback
    assert ask(server, "/app/x").body == HELLO


def test_no_file_is_404_and_another_method_405(server: Server) -> None:
    missing = ask(server, "/nothing.txt")
    assert missing.status == 404 and missing.get("content-type") == "text/html"
    assert b"Error 404" in missing.body
    assert ask(server, "/nothing.txt", method="HEAD").get("content-length") == str(
        len(missing.body)
    )
    refused = ask(server, "/a.txt", "Content-Length: 5", method="POST", body=b"hello")
    assert refused.status == 405 and refused.get("allow") == "GET, HEAD"


def test_settings_mime_types_name_a_type(server: Server) -> None:
    assert ask(server, "/server.log").get("content-type") == "text/x-log"


# -- with compression configured -----------------------------------------------------------


def test_a_file_without_a_sibling_is_compressed_on_the_fly(compressing: Server) -> None:
    plain = ask(compressing, "/page.html")
    assert plain.get("content-encoding") is None and plain.get("vary") == "Accept-Encoding"
    got = ask(compressing, "/page.html", "Accept-Encoding: gzip")
    assert got.get("content-encoding") == "gzip" and got.get("vary") == "Accept-Encoding"
    assert gzip.decompress(got.body) == PAGE and got.get("content-length") == str(len(got.body))
    assert got.get("etag") == "W/" + plain.get("etag")  # another representation: weak
    assert got.get("accept-ranges") is None
    head = ask(compressing, "/page.html", "Accept-Encoding: gzip", method="HEAD")
    assert head.get("vary") == "Accept-Encoding" and head.body == b""
    # the weak tag a cache holds revalidates it (If-None-Match compares weakly); the 304 is
    # the file's own, without Content-Type, as nginx's is (the body step cannot tell its type)
    weak = got.get("etag")
    revalidated = ask(compressing, "/page.html", "Accept-Encoding: gzip", f"If-None-Match: {weak}")
    assert revalidated.status == 304 and revalidated.get("etag") == plain.get("etag")


def test_a_large_file_is_compressed_piece_by_piece_and_a_range_is_not(compressing) -> None:
    got = ask(compressing, "/large.html", "Accept-Encoding: gzip")
    assert got.get("content-encoding") == "gzip" and got.get("transfer-encoding") == "chunked"
    assert gzip.decompress(got.body) == PAGE * 20
    part = ask(compressing, "/large.html", "Accept-Encoding: gzip", "Range: bytes=10-19")
    assert part.status == 206 and part.body == (PAGE * 20)[10:20]
    assert part.get("content-encoding") is None


def test_a_precompressed_sibling_is_sent_as_it_is(compressing: Server, www: Path) -> None:
    got = ask(compressing, "/app.js", "Accept-Encoding: gzip")
    assert got.get("content-encoding") == "gzip" and got.all("vary") == ["Accept-Encoding"]
    assert got.body == (www / "app.js.gz").read_bytes()  # not compressed again
    assert (
        ask(compressing, "/images/a.png", "Accept-Encoding: gzip").get("content-encoding") is None
    )

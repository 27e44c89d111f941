"""The share engine on real files: Unit's share (paths, index, types, fallback, 301), nginx's
validators, conditional requests, ranges, precompressed siblings, expires, immutable and
response_headers, the cache and the descriptors. No sockets: `share_site.Site` routes and
serves as the share action will; the answers' bytes on a wire are the integration tests'."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from corral.http.fields import http_date
from corral.static.files import StaticFiles

from .share_site import Site, open_descriptors, tree

TEXT = b"0123456789" * 10  # 100 bytes


@pytest.fixture
def www(tmp_path: Path) -> Path:
    return tree(
        tmp_path / "www",
        {
            "a.txt": TEXT,
            "style.css": "body{}",
            "dir/index.html": "<p>index</p>",
            "dir/sub/x.js": "x()",
            "empty/.keep": "",
            "README": "read me",
            "noext": "bytes",
            "UPPER.TXT": "upper",
        },
    )


def share(www: Path, **options: object) -> Site:
    return Site([{"action": {"share": f"{www}$uri", **options}}])


def test_a_file_with_its_validators(www: Path) -> None:
    reply = share(www).get("/a.txt")
    assert reply.status == 200
    assert reply.body == TEXT
    info = os.stat(www / "a.txt")
    assert reply.fields["content-type"] == "text/plain"
    assert reply.fields["etag"] == f'"{info.st_mtime_ns:x}-{info.st_size:x}-{info.st_ino:x}"'
    assert reply.fields["last-modified"] == http_date(int(info.st_mtime))
    assert reply.fields["accept-ranges"] == "bytes"
    assert "vary" not in reply.fields and "cache-control" not in reply.fields
    assert [name for name, _ in reply.all] == [
        "Content-Type",
        "ETag",
        "Last-Modified",
        "Accept-Ranges",
    ]


def test_head_has_the_length_and_no_body(www: Path) -> None:
    reply = share(www).get("/a.txt", method="HEAD")
    assert (reply.status, reply.body, reply.length) == (200, b"", 100)
    assert reply.fields["etag"]


def test_other_methods_take_the_fallback_else_405(www: Path) -> None:
    reply = share(www).get("/a.txt", method="POST")
    assert reply.status == 405 and reply.fields["allow"] == "GET, HEAD"
    routed = share(www, fallback={"return": 204}).get("/a.txt", method="DELETE")
    assert routed.status == 204


def test_types_by_extension_name_and_document(www: Path) -> None:
    site = Site(
        [{"action": {"share": f"{www}$uri"}}],
        StaticFiles({"text/x-readme": ["README"], "application/x-up": ".Txt"}, valid=0),
    )
    assert site.get("/style.css").fields["content-type"] == "text/css"
    assert site.get("/README").fields["content-type"] == "text/x-readme"
    assert site.get("/UPPER.TXT").fields["content-type"] == "application/x-up"
    assert site.get("/a.txt").fields["content-type"] == "application/x-up"
    # a name the table does not know has no type, as in Unit
    assert "content-type" not in site.get("/noext").fields


@pytest.mark.parametrize(
    ("types", "target", "status"),
    [
        (["text/css"], "/style.css", 200),
        (["text/css"], "/a.txt", 403),
        (["text/*"], "/a.txt", 200),
        (["!text/plain"], "/a.txt", 403),
        (["!text/plain"], "/style.css", 200),
        (["~^text/(css|plain)$"], "/a.txt", 200),
        (["~^image/"], "/a.txt", 403),
        (["!"], "/noext", 403),  # "" is the unknown type
        (["text/css"], "/missing.css", 404),
        (["text/css"], "/missing.txt", 403),  # types first, as Unit checks before opening
        # Unit does not apply types to an index file
        (["image/png"], "/dir/", 200),
    ],
)
def test_types(www: Path, types: list[str], target: str, status: int) -> None:
    assert share(www, types=types).get(target).status == status


def test_index_and_directories(www: Path) -> None:
    site = share(www)
    assert site.get("/dir/").body == b"<p>index</p>"
    assert site.get("/dir/").fields["content-type"] == "text/html"
    # a directory without its slash: 301 to it, query kept, the path encoded again
    reply = site.get("/dir")
    assert (reply.status, reply.fields["location"]) == (301, "/dir/")
    assert site.get("/dir?a=1&b=%20").fields["location"] == "/dir/?a=1&b=%20"
    assert site.get("/dir/sub").fields["location"] == "/dir/sub/"
    (www / "sp ace\r\n").mkdir()
    assert site.get("/sp%20ace%0D%0A").fields["location"] == "/sp%20ace%0D%0A/"
    # a directory with its slash but no index: 404; a named index
    assert site.get("/empty/").status == 404
    assert share(www, index="x.js").get("/dir/sub/").body == b"x()"


def test_paths_in_order_then_the_fallback(www: Path, tmp_path: Path) -> None:
    other = tree(tmp_path / "other", {"only-here.txt": "other", "a.txt": "not this one"})
    site = Site(
        [
            {
                "action": {
                    "share": [f"{www}$uri", f"{other}$uri"],
                    "fallback": {"return": 299},
                }
            }
        ]
    )
    assert site.get("/a.txt").body == TEXT
    assert site.get("/only-here.txt").body == b"other"
    assert site.get("/none").status == 299
    # the status of the last path without a fallback
    plain = Site([{"action": {"share": [f"{www}$uri", f"{other}$uri"]}}])
    assert plain.get("/none").status == 404


def test_not_a_regular_file(www: Path) -> None:
    os.mkfifo(www / "fifo")
    assert share(www).get("/fifo").status == 404  # opened without blocking, then refused


def test_a_share_of_one_file_and_a_relative_share(www: Path) -> None:
    assert Site([{"action": {"share": f"{www}/a.txt"}}]).get("/anything").body == TEXT
    os.chdir(www.parent)
    assert Site([{"action": {"share": "www$uri"}}]).get("/style.css").body == b"body{}"


def test_host_and_other_variables(www: Path, tmp_path: Path) -> None:
    tree(tmp_path / "sites", {"example.org/a.txt": "org", "example.com/a.txt": "com"})
    site = Site([{"action": {"share": f"{tmp_path}/sites/$host$uri"}}])
    assert site.get("/a.txt", host="Example.ORG").body == b"org"
    assert site.get("/a.txt", host="example.com:8080").body == b"com"
    assert site.get("/a.txt", host="example.net").status == 404
    argument = Site([{"action": {"share": f"{www}/${{arg_f}}"}}])
    assert argument.get("/?f=style.css").body == b"body{}"


# -- conditional requests (RFC 9110 §13)


def validators(site: Site, target: str = "/a.txt") -> tuple[bytes, bytes]:
    reply = site.get(target)
    return reply.fields["etag"].encode(), reply.fields["last-modified"].encode()


def test_if_none_match(www: Path) -> None:
    site = share(www)
    etag, _ = validators(site)
    for value in (etag, b"W/" + etag, b'"other", ' + etag, b"*", b'"x",W/' + etag):
        reply = site.get("/a.txt", [(b"If-None-Match", value)])
        assert (reply.status, reply.body) == (304, b""), value
        assert reply.fields["etag"] == etag.decode()
        assert "content-type" not in reply.fields
    assert site.get("/a.txt", [(b"if-none-match", b'"other"')]).status == 200
    assert site.get("/a.txt", [(b"If-None-Match", etag[:-2] + b'"')]).status == 200
    # HEAD too
    assert site.get("/a.txt", [(b"If-None-Match", etag)], method="HEAD").status == 304


def test_if_modified_since(www: Path) -> None:
    site = share(www)
    _, modified = validators(site)
    mtime = int(os.stat(www / "a.txt").st_mtime)
    assert site.get("/a.txt", [(b"If-Modified-Since", modified)]).status == 304
    later = http_date(mtime + 10).encode()
    assert site.get("/a.txt", [(b"If-Modified-Since", later)]).status == 304
    earlier = http_date(mtime - 1).encode()
    assert site.get("/a.txt", [(b"If-Modified-Since", earlier)]).status == 200
    # RFC 850 and asctime dates are HTTP-dates too; anything else is ignored
    stamp = time.gmtime(mtime + 5)
    rfc850 = time.strftime("%A, %d-%b-%y %H:%M:%S GMT", stamp).encode()
    asctime = time.strftime("%a %b %e %H:%M:%S %Y", stamp).encode()
    assert site.get("/a.txt", [(b"If-Modified-Since", rfc850)]).status == 304
    assert site.get("/a.txt", [(b"If-Modified-Since", asctime)]).status == 304
    for junk in (b"yesterday", b"", b"Mon, 99 Foo 2020 00:00:00 GMT", modified + b", " + modified):
        assert site.get("/a.txt", [(b"If-Modified-Since", junk)]).status == 200, junk


def test_if_none_match_wins_over_if_modified_since(www: Path) -> None:
    site = share(www)
    etag, modified = validators(site)
    # a tag that does not match: 200 although the date says not modified
    reply = site.get("/a.txt", [(b"If-None-Match", b'"old"'), (b"If-Modified-Since", modified)])
    assert reply.status == 200
    old = http_date(0).encode()
    reply = site.get("/a.txt", [(b"If-Modified-Since", old), (b"If-None-Match", etag)])
    assert reply.status == 304


def test_if_match_and_if_unmodified_since(www: Path) -> None:
    site = share(www)
    etag, modified = validators(site)
    assert site.get("/a.txt", [(b"If-Match", etag)]).status == 200
    assert site.get("/a.txt", [(b"If-Match", b"*")]).status == 200
    assert site.get("/a.txt", [(b"If-Match", b'"nope"')]).status == 412
    assert site.get("/a.txt", [(b"If-Match", b"W/" + etag)]).status == 412  # strong comparison
    assert site.get("/a.txt", [(b"If-Unmodified-Since", modified)]).status == 200
    assert site.get("/a.txt", [(b"If-Unmodified-Since", http_date(0).encode())]).status == 412
    # If-Match first: a matching tag makes the date irrelevant
    both = [(b"If-Match", etag), (b"If-Unmodified-Since", http_date(0).encode())]
    assert site.get("/a.txt", both).status == 200


# -- ranges (RFC 9110 §14)


@pytest.mark.parametrize(
    ("value", "status", "body", "content_range"),
    [
        (b"bytes=0-9", 206, TEXT[:10], "bytes 0-9/100"),
        (b"bytes=95-", 206, TEXT[95:], "bytes 95-99/100"),
        (b"bytes=-3", 206, TEXT[-3:], "bytes 97-99/100"),
        (b"bytes=-300", 206, TEXT, "bytes 0-99/100"),
        (b"bytes=90-1000", 206, TEXT[90:], "bytes 90-99/100"),
        (b"BYTES = 1-1", 206, TEXT[1:2], "bytes 1-1/100"),
        (b"bytes=99-99", 206, TEXT[99:], "bytes 99-99/100"),
        (b"bytes=0-99999999999999999999999", 206, TEXT, "bytes 0-99/100"),
        (b"bytes=100-", 416, b"", "bytes */100"),
        (b"bytes=100-200", 416, b"", "bytes */100"),
        (b"bytes=-0", 416, b"", "bytes */100"),
        (b"bytes=99999999999999999999999-", 416, b"", "bytes */100"),
        # ignored: the whole file
        (b"bytes=5-1", 200, TEXT, None),
        (b"bytes=0-1,5-6", 200, TEXT, None),  # several ranges: the whole file
        (b"items=0-1", 200, TEXT, None),
        (b"bytes=a-b", 200, TEXT, None),
        (b"bytes=-", 200, TEXT, None),
        (b"bytes 0-1", 200, TEXT, None),
    ],
)
def test_ranges(
    www: Path, value: bytes, status: int, body: bytes, content_range: str | None
) -> None:
    reply = share(www).get("/a.txt", [(b"Range", value)])
    assert (reply.status, reply.body) == (status, body)
    assert reply.fields.get("content-range") == content_range
    if status == 206:
        assert reply.length == len(body)


def test_range_is_for_get_only_and_after_the_validators(www: Path) -> None:
    site = share(www)
    etag, _ = validators(site)
    assert site.get("/a.txt", [(b"Range", b"bytes=0-1")], method="HEAD").status == 200
    both = [(b"Range", b"bytes=0-1"), (b"If-None-Match", etag)]
    assert site.get("/a.txt", both).status == 304


def test_if_range(www: Path) -> None:
    site = share(www)
    etag, modified = validators(site)
    wanted = (b"Range", b"bytes=0-1")
    assert site.get("/a.txt", [wanted, (b"If-Range", etag)]).status == 206
    assert site.get("/a.txt", [wanted, (b"If-Range", modified)]).status == 206
    assert site.get("/a.txt", [wanted, (b"If-Range", b'"stale"')]).status == 200
    assert site.get("/a.txt", [wanted, (b"If-Range", b"W/" + etag)]).status == 200
    assert site.get("/a.txt", [wanted, (b"If-Range", http_date(0).encode())]).status == 200


def test_an_empty_file(www: Path) -> None:
    site = share(www)
    reply = site.get("/empty/.keep")
    assert (reply.status, reply.body, reply.length) == (200, b"", 0)
    assert site.get("/empty/.keep", [(b"Range", b"bytes=0-")]).status == 416
    assert site.get("/empty/.keep", [(b"Range", b"bytes=-1")]).status == 416


# -- large files: the descriptor, for sendfile


def test_a_large_file_is_a_descriptor_range(www: Path) -> None:
    big = os.urandom(300_000)
    (www / "big.bin").write_bytes(big)
    files = StaticFiles(valid=60)
    site = share(www, types=["application/octet-stream"])
    site.files = files
    before = open_descriptors()
    reply = site.get("/big.bin")
    assert (reply.status, reply.length, reply.body) == (200, 300_000, big)
    part = site.get("/big.bin", [(b"Range", b"bytes=1000-1999")])
    assert (part.status, part.body) == (206, big[1000:2000])
    assert open_descriptors() == before
    # a file answered from its descriptor is opened again and checked each time: a change
    # is never sent under the old fields, even while the path is trusted
    changed = os.urandom(300_001)
    (www / "big.bin").write_bytes(changed)
    reply = site.get("/big.bin")
    assert (reply.length, reply.body) == (300_001, changed)


def test_the_answer_descriptor(www: Path) -> None:
    (www / "big.bin").write_bytes(b"x" * 100_000)
    site = share(www)
    request_site = site.router.resolve
    assert request_site  # the Site helper reads it; here, the answer itself
    from corral.routing import RouteRequest

    request = RouteRequest("GET", b"/big.bin", [(b"Host", b"h")])
    answer = site.files.serve(site.router.resolve("routes", request), request)  # type: ignore[arg-type]
    assert answer.fd >= 0 and (answer.offset, answer.count, answer.length) == (0, 100_000, 100_000)
    assert os.fstat(answer.fd).st_size == 100_000
    answer.close()
    assert answer.fd == -1
    answer.close()  # twice is harmless


# -- precompressed siblings


@pytest.fixture
def compressed(www: Path) -> Path:
    tree(
        www,
        {
            "app.js": "x" * 1000,
            "app.js.gz": "g" * 40,
            "app.js.br": "b" * 30,
            "app.js.zst": "z" * 35,
            "only-gz.css": "c" * 500,
            "only-gz.css.gz": "g" * 20,
        },
    )
    return www


@pytest.mark.parametrize(
    ("accept", "coding"),
    [
        (b"gzip, deflate, br, zstd", "br"),  # ties: the smallest file
        (b"gzip, deflate", "gzip"),
        (b"gzip;q=0.5, zstd;q=0.6", "zstd"),
        (b"br;q=0, *", "zstd"),
        (b"identity", None),
        (b"compress", None),
        (b"*;q=0", None),  # nothing acceptable: the file as it is, as nginx does
        (None, None),
    ],
)
def test_siblings_by_accept_encoding(
    compressed: Path, accept: bytes | None, coding: str | None
) -> None:
    headers = [] if accept is None else [(b"Accept-Encoding", accept)]
    reply = share(compressed).get("/app.js", headers)
    assert reply.status == 200
    assert reply.fields.get("content-encoding") == coding
    assert reply.fields["vary"] == "Accept-Encoding"
    assert reply.fields["content-type"] == "text/javascript"
    expected = {None: b"x" * 1000, "br": b"b" * 30, "zstd": b"z" * 35, "gzip": b"g" * 40}
    assert reply.body == expected[coding]


def test_each_sibling_has_its_own_validators(compressed: Path) -> None:
    site = share(compressed)
    plain = site.get("/app.js")
    gzipped = site.get("/app.js", [(b"Accept-Encoding", b"gzip")])
    assert plain.fields["etag"] != gzipped.fields["etag"]
    # a tag of the gzip answer revalidates the gzip answer only
    tag = gzipped.fields["etag"].encode()
    again = site.get("/app.js", [(b"Accept-Encoding", b"gzip"), (b"If-None-Match", tag)])
    assert again.status == 304 and again.fields["vary"] == "Accept-Encoding"
    assert site.get("/app.js", [(b"If-None-Match", tag)]).status == 200
    # ranges are of the coded bytes
    part = site.get("/app.js", [(b"Accept-Encoding", b"gzip"), (b"Range", b"bytes=0-4")])
    assert (part.status, part.body, part.fields["content-encoding"]) == (206, b"ggggg", "gzip")


def test_no_vary_without_siblings_and_siblings_only_regular(compressed: Path) -> None:
    site = share(compressed)
    assert "vary" not in site.get("/style.css", [(b"Accept-Encoding", b"gzip")]).fields
    (compressed / "style.css.br").mkdir()
    assert "vary" not in site.get("/style.css", [(b"Accept-Encoding", b"br")]).fields
    gz = site.get("/only-gz.css", [(b"Accept-Encoding", b"br, gzip")])
    assert gz.fields["content-encoding"] == "gzip" and gz.fields["content-type"] == "text/css"


# -- the share's fields: expires, immutable, response_headers


@pytest.mark.parametrize(
    ("expires", "control", "stamp"),
    [
        ("24h", "max-age=86400", 86400),
        ("1h 30m", "max-age=5400", 5400),
        (60, "max-age=60", 60),
        ("7d", "max-age=604800", 604800),
        ("-1", "no-cache", -1),
        (0, "max-age=0", 0),
        ("max", "max-age=315360000", None),
        ("epoch", "no-cache", None),
    ],
)
def test_expires(www: Path, expires: object, control: str, stamp: int | None) -> None:
    before = int(time.time())
    reply = share(www, expires=expires).get("/a.txt")
    after = int(time.time())
    assert reply.fields["cache-control"] == control
    if expires == "max":
        assert reply.fields["expires"] == "Thu, 31 Dec 2037 23:55:55 GMT"
    elif expires == "epoch":
        assert reply.fields["expires"] == "Thu, 01 Jan 1970 00:00:01 GMT"
    else:
        assert stamp is not None
        assert reply.fields["expires"] in {
            http_date(second + stamp) for second in range(before, after + 1)
        }
    # a 304 carries them too
    tag = reply.fields["etag"].encode()
    revalidated = share(www, expires=expires).get("/a.txt", [(b"If-None-Match", tag)])
    assert revalidated.fields["cache-control"] == control


def test_expires_off_is_nothing(www: Path) -> None:
    assert "cache-control" not in share(www, expires="off").get("/a.txt").fields


def test_immutable(www: Path) -> None:
    tree(www, {"app.3f2a9c81b7de.css": "hashed", "chunk-3f2a9c81.js": "hashed"})
    hashed = share(www, immutable="hashed", expires="1h")
    year = "max-age=31536000, immutable"
    assert hashed.get("/app.3f2a9c81b7de.css").fields["cache-control"] == year
    assert "expires" not in hashed.get("/app.3f2a9c81b7de.css").fields
    assert hashed.get("/chunk-3f2a9c81.js").fields["cache-control"] == year
    assert hashed.get("/style.css").fields["cache-control"] == "max-age=3600"
    assert share(www, immutable=True).get("/style.css").fields["cache-control"] == year
    assert "cache-control" not in share(www, immutable=False).get("/style.css").fields


def test_response_headers(www: Path) -> None:
    site = share(
        www,
        expires="1h",
        response_headers={
            "X-Frame-Options": "DENY",
            "cache-control": "public, max-age=60",
            "Last-Modified": None,
            "X-Price": "5$dollar",
        },
    )
    reply = site.get("/a.txt")
    assert reply.fields["x-frame-options"] == "DENY"
    assert reply.fields["cache-control"] == "public, max-age=60"  # replaces expires' own
    assert [v for n, v in reply.all if n.lower() == "cache-control"] == ["public, max-age=60"]
    assert "last-modified" not in reply.fields
    assert reply.fields["x-price"] == "5$"
    assert reply.fields["expires"]  # expires' other field stays
    assert site.get("/dir").fields["x-frame-options"] == "DENY"  # the 301 too


# -- the cache


def test_within_validity_the_cache_answers_then_sees_the_change(www: Path) -> None:
    site = share(www)
    site.files = StaticFiles(valid=0.2)
    first = site.get("/a.txt")
    (www / "a.txt").write_bytes(b"changed")
    # trusted for `valid` seconds: the old bytes under the old validators, never mixed
    cached = site.get("/a.txt")
    assert (cached.body, cached.fields["etag"]) == (first.body, first.fields["etag"])
    time.sleep(0.25)
    fresh = site.get("/a.txt")
    assert fresh.body == b"changed" and fresh.fields["etag"] != first.fields["etag"]
    # a file that appears and disappears
    assert site.get("/new.txt").status == 404
    (www / "new.txt").write_bytes(b"new")
    time.sleep(0.25)
    assert site.get("/new.txt").body == b"new"
    (www / "new.txt").unlink()
    time.sleep(0.25)
    assert site.get("/new.txt").status == 404


def test_valid_zero_resolves_every_request(www: Path) -> None:
    site = share(www)
    assert site.get("/a.txt").body == TEXT
    (www / "a.txt").write_bytes(b"now")
    assert site.get("/a.txt").body == b"now"


def test_the_cache_is_bounded(www: Path) -> None:
    files = StaticFiles(valid=60, entries=8, memory=250)
    site = share(www)
    site.files = files
    for i in range(50):
        (www / f"f{i}.txt").write_bytes(b"y" * 100)
        assert site.get(f"/f{i}.txt").body == b"y" * 100
        assert site.get(f"/missing{i}").status == 404
        assert files._count <= 8 and files._held <= 250
    assert files._count == len(files._plain) + len(files._restricted)
    files.close()
    assert files._count == 0 and files._held == 0


def test_no_descriptor_leaks_after_10000_requests(www: Path) -> None:
    (www / "big.bin").write_bytes(b"z" * 100_000)
    os.symlink(www / "a.txt", www / "link.txt")
    site = share(www, follow_symlinks=False, fallback={"return": 418})
    site.files = StaticFiles(valid=0.01)  # resolved again every few requests
    targets = [
        ("/a.txt", []),
        ("/big.bin", []),
        ("/big.bin", [(b"Range", b"bytes=5-10")]),
        ("/big.bin", [(b"Range", b"bytes=999999-")]),
        ("/missing", []),
        ("/link.txt", []),
        ("/dir", []),
        ("/dir/", []),
        ("/a.txt", [(b"If-None-Match", b"*")]),
        ("/fifo", []),
    ]
    os.mkfifo(www / "fifo")
    before = open_descriptors()
    statuses = set()
    for i in range(10_000):
        target, headers = targets[i % len(targets)]
        statuses.add(site.get(target, headers).status)
    assert statuses == {200, 206, 301, 304, 416, 418}
    assert open_descriptors() == before


def test_a_redirect_needs_a_target_that_decodes(www: Path) -> None:
    # a constant share never reads the path, until a directory's 301 must
    site = Site([{"action": {"share": f"{www}/dir"}}])
    assert site.get("/x?q").fields["location"] == "/x/?q"
    assert site.get("/%zz").status == 400

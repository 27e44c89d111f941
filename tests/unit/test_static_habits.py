"""Static files from the command line and the other servers' settings, as share routes.

What a mount becomes is checked twice: the route steps as JSON (what ``--check-config`` shows),
and what corral's own router makes of them for real requests (which file path each share
names, in which order the shares are tried, what is left for the application), so a step that
looks right but routes wrongly fails here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from corral.config import ConfigError
from corral.config.sources import load, parse_command_line
from corral.config.static_routes import Mount, StaticError, parse_mounts, static_routes
from corral.routing import (
    NOT_FOUND,
    RouteError,
    RouteRequest,
    Share,
    ToApplication,
    compile_routes,
)

EXPIRES_PENDING = (
    "a share's `expires` key comes with the file engine (issue 32's `static` part); until "
    "then the routes compiler refuses it"
)


def share_has_expires() -> bool:
    """Whether the routes compiler takes a share's `expires` (Granian's mounts always have
    one: its default is a day)."""
    try:
        compile_routes([{"action": {"share": "/", "expires": 60}}])
    except RouteError:
        return False
    return True


def request(target: str, method: str = "GET") -> RouteRequest:
    fields = [(b"Host", b"example.com")]
    return RouteRequest(method, target.encode("latin-1"), fields, ("192.0.2.10", 1), None, "http")


def tried(routes: Any, target: str, method: str = "GET") -> list[Any]:
    """What a request meets when no share has its file: each share's (path, chroot, index,
    expires-less) in order, then the action that answers (an application, a 404)."""
    router = compile_routes(routes)
    action = router.resolve("routes", request(target, method))
    seen: list[Any] = []
    while isinstance(action, Share):
        seen.append((action.paths[0], action.chroot, action.index))
        action = router.resolve_fallback(action, request(target, method))
    return [*seen, action]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for name in ("static", "public", "media", "app/static"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "favicon.ico").write_bytes(b"\0")
    return tmp_path


def mounts(site: Path, *specs: str) -> list[Mount]:
    return parse_mounts([spec.replace("@", str(site)) for spec in specs])


# -- ${uri_after:PREFIX} -----------------------------------------------------------------------

URI_AFTER = [
    ("/srv${uri_after:/static}", "/static/css/a.css", "/srv/css/a.css"),
    ("/srv${uri_after:/static/}", "/static/a.css", "/srv/a.css"),  # its trailing / is ignored
    ("/srv${uri_after:/static}", "/static", "/srv"),
    ("/srv${uri_after:/static}", "/static/", "/srv/"),
    ("/srv${uri_after:/static}", "/staticx/a.css", "/srv/staticx/a.css"),  # not a boundary
    ("/srv${uri_after:/static}", "/other", "/srv/other"),
    ("/srv${uri_after:/static}", "/static/%2e%2e/etc/passwd", "/srv/etc/passwd"),
    ("/srv${uri_after:/static}", "/static/a%20b", "/srv/a b"),  # $uri is decoded
    ("/srv${uri_after:/}", "/a/b", "/srv/a/b"),
    ("/srv${uri_after:/a/b}", "/a/b/c", "/srv/c"),
]


@pytest.mark.parametrize(("template", "target", "path"), URI_AFTER)
def test_uri_after_is_the_path_under_its_prefix(template: str, target: str, path: str) -> None:
    share = compile_routes([{"action": {"share": template}}]).resolve("routes", request(target))
    assert isinstance(share, Share) and share.paths == (path,)


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("/srv$uri_after", "$uri_after needs its prefix: ${uri_after:/PREFIX}"),
        ("/srv${uri_after:static}", "the prefix is a path starting with '/'"),
        ("/srv${uri_afterwards}", "unknown variable $uri_afterwards"),
    ],
)
def test_uri_after_errors_are_one_line(template: str, error: str) -> None:
    with pytest.raises(RouteError) as info:
        compile_routes([{"action": {"share": template}}])
    assert str(info.value).startswith("$.routes[0].action.share: ")
    assert error in str(info.value) and "\n" not in str(info.value)


# -- the routes of the mounts ------------------------------------------------------------------


def test_a_mount_is_a_share_of_its_directory_under_its_url(site: Path) -> None:
    routes = static_routes(mounts(site, "/static=@/public"), "app")
    assert routes == [
        {
            "match": {"uri": ["/static", "/static/*"]},
            "action": {"share": f"{site}/public${{uri_after:/static}}", "chroot": f"{site}/public"},
        },
        {"action": {"pass": "applications/app"}},
    ]
    root = f"{site}/public"
    assert tried(routes, "/static/css/a.css") == [
        (f"{root}/css/a.css", root, "index.html"),
        NOT_FOUND,
    ]
    assert tried(routes, "/static/") == [(f"{root}/", root, "index.html"), NOT_FOUND]
    assert tried(routes, "/staticx/a.css") == [ToApplication("app")]
    assert tried(routes, "/") == [ToApplication("app")]
    assert tried(routes, "/static/a.css", "POST") == [
        (f"{root}/a.css", root, "index.html"),
        NOT_FOUND,
    ]


def test_a_directory_named_as_its_url_is_nginx_root_pure_unit(site: Path) -> None:
    routes = static_routes(mounts(site, "/static=@/app/static"), "app")
    share = routes[0]["action"]
    assert share == {"share": f"{site}/app$uri", "chroot": f"{site}/app/static"}
    path = f"{site}/app/static/a.css"
    assert tried(routes, "/static/a.css") == [(path, f"{site}/app/static", "index.html"), NOT_FOUND]


def test_the_whole_site_tries_the_file_then_the_application(site: Path) -> None:
    routes = static_routes(mounts(site, "/=@/public"), "app")
    assert routes[0] == {
        "match": {"method": ["GET", "HEAD"]},
        "action": {
            "share": f"{site}/public$uri",
            "chroot": f"{site}/public",
            "fallback": {"pass": "applications/app"},
        },
    }
    root = f"{site}/public"
    assert tried(routes, "/robots.txt") == [
        (f"{root}/robots.txt", root, "index.html"),
        ToApplication("app"),
    ]
    assert tried(routes, "/login", "POST") == [ToApplication("app")]


def test_the_longest_url_decides_and_a_file_is_served_for_its_url_only(site: Path) -> None:
    routes = static_routes(
        mounts(
            site,
            "/=@/public",
            "/static=@/static",
            "/static/media=@/media",
            "/favicon.ico=@/favicon.ico",
        ),
        "app",
    )
    assert [step.get("match", {}).get("uri") for step in routes] == [
        "/favicon.ico",
        ["/static/media", "/static/media/*"],
        ["/static", "/static/*"],
        None,
        None,
    ]
    assert tried(routes, "/favicon.ico") == [(f"{site}/favicon.ico", None, "index.html"), NOT_FOUND]
    assert tried(routes, "/static/media/x.png")[0][0] == f"{site}/media/x.png"
    assert tried(routes, "/static/x.png")[0][0] == f"{site}/static/x.png"
    assert tried(routes, "/favicon.ico/x")[0][0] == f"{site}/public/favicon.ico/x"


def test_with_fallback_every_covering_mount_is_tried_in_order_then_the_application(
    site: Path,
) -> None:
    specs = ("/=@/public", "/static=@/static", "/static=@/app/static", "/static/media=@/media")
    routes = static_routes(mounts(site, *specs), "app", fallback=True)
    assert [path for path, *_ in tried(routes, "/static/a.css")[:-1]] == [
        f"{site}/public/static/a.css",
        f"{site}/static/a.css",
        f"{site}/app/static/a.css",
    ]
    assert tried(routes, "/static/a.css")[-1] == ToApplication("app")
    assert len(tried(routes, "/static/media/a.png")) == 5
    assert tried(routes, "/static/a.css", "POST") == [ToApplication("app")]
    assert tried(routes, "/static/a.css", "HEAD")[-1] == ToApplication("app")


def test_each_index_name_is_tried_in_order(site: Path) -> None:
    routes = static_routes(
        mounts(site, "/docs=@/public"), "app", index=["index.htm", "default.html"]
    )
    root = f"{site}/public"
    assert tried(routes, "/docs/") == [
        (f"{root}/", root, "index.htm"),
        (f"{root}/", root, "default.html"),
        NOT_FOUND,
    ]


def test_expires_is_on_every_share_of_a_step(site: Path) -> None:
    routes = static_routes(
        mounts(site, "/=@/public", "/s=@/static"), "app", expires="24h", fallback=True
    )
    shares = []
    for step in routes[:-1]:
        action = step["action"]
        while "share" in action:
            shares.append(action)
            action = action.get("fallback", {})
    assert len(shares) == 3 and all(share["expires"] == "24h" for share in shares)


def test_expires_by_uri_are_steps_before_the_mount_limited_to_it(site: Path) -> None:
    rules = [(r"\.css$", 3600), (r"^/static/img/", 600)]
    routes = static_routes(
        mounts(site, "/=@/public", "/static=@/static"), "app", expires_uri=rules, fallback=True
    )
    patterns = [step.get("match", {}).get("uri") for step in routes]
    assert patterns[0] == r"~^(?=/static(?:/|$))[\s\S]*?(?:\.css$)"
    assert patterns[2] == ["/static", "/static/*"]
    assert patterns[3:5] == [r"~(?:\.css$)", r"~(?:^/static/img/)"]

    def expires_of(path: str) -> Any:
        for step in routes:
            uri = step.get("match", {}).get("uri")
            if isinstance(uri, str) and re.search(uri[1:], path):
                return step["action"].get("expires")
            if isinstance(uri, list) and (path == uri[0] or path.startswith(uri[0] + "/")):
                return step["action"].get("expires")
            if uri is None and "share" in step["action"]:
                return step["action"].get("expires")
        return "application"

    assert expires_of("/static/a.css") == 3600
    assert expires_of("/static/img/a.png") == 600  # the regex sees the whole path
    assert expires_of("/static/a.png") is None
    assert expires_of("/a.css") == 3600
    assert expires_of("/staticx/a.css") == 3600  # under "/", not under /static


def test_dollars_in_a_path_stay_literal(tmp_path: Path) -> None:
    odd = tmp_path / "a$uri"
    odd.mkdir()
    routes = static_routes(parse_mounts([f"/s={odd}"]), "app")
    assert tried(routes, "/s/x")[0][:2] == (f"{odd}/x", str(odd))


def test_a_url_mounted_twice_without_fallback_is_an_error(site: Path) -> None:
    with pytest.raises(StaticError, match='"/static" is mounted twice'):
        static_routes(mounts(site, "/static=@/static", "/static/=@/public"), "app")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("static=@/static", "\"static\": the URL is a path starting with '/'"),
        ("/static", 'expected "URL=DIR" (such as "/static=./static"), got "/static"'),
        ("/static=", "\"/static\": give the directory after '='"),
        ("/static=@/nope", '/nope": no such directory'),
    ],
)
def test_a_mount_that_does_not_fit_is_one_line(site: Path, spec: str, error: str) -> None:
    with pytest.raises(StaticError) as info:
        mounts(site, spec)
    assert error in str(info.value)


# -- the command line ----------------------------------------------------------------------------


def test_static_flags_make_the_listeners_pass_to_the_routes(site: Path) -> None:
    doc = load(
        [
            "--static",
            f"/static={site}/static",
            "--static-index",
            "index.htm",
            "-b",
            ":8001",
            "-b",
            "unix:/tmp/x.sock",
            "myapp:app",
        ]
    )
    assert {listener.pass_ for listener in doc.listeners.values()} == {"routes"}
    assert doc.routes == [
        {
            "match": {"uri": ["/static", "/static/*"]},
            "action": {"share": f"{site}$uri", "chroot": f"{site}/static", "index": "index.htm"},
        },
        {"action": {"pass": "applications/myapp"}},
    ]


def test_relative_directories_are_taken_from_where_corral_starts(site: Path) -> None:
    cwd = os.getcwd()
    os.chdir(site)
    try:
        doc = load(["--static", "/s=public", "--chdir", "/", "myapp:app"])
    finally:
        os.chdir(cwd)
    assert doc.routes[0]["action"]["chroot"] == f"{site}/public"


def test_a_uwsgi_socket_is_not_routed_and_says_so(site: Path) -> None:
    lines: list[str] = []
    argv = ["--static", f"/s={site}/static", "--uwsgi-socket", ":9001", "-b", ":8001", "m:app"]
    doc = parse_command_line(argv, environ={}, cwd=str(site)).document(warn=lines.append)
    passes = {key: listener.pass_ for key, listener in doc.listeners.items()}
    assert passes == {"0.0.0.0:8001": "routes", "0.0.0.0:9001": "applications/m"}
    assert lines[0] == (
        "0.0.0.0:9001: a uwsgi socket passes every request to the application: the static "
        "files are served on the HTTP listeners only (bind)"
    )


def test_without_static_flags_nothing_is_routed() -> None:
    doc = load(["myapp:app"])
    assert [listener.pass_ for listener in doc.listeners.values()] == ["applications/myapp"]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--static", "/s=@/nope", "m:app"], '--static: "@/nope": no such directory'),
        (
            ["--static-index", "index.htm", "m:app"],
            "--static-index: applies to the static mounts: give them (--static URL=DIR)",
        ),
        (
            ["--static-fallback", "m:app"],
            "--static-fallback: applies to the static mounts: give them (--static URL=DIR)",
        ),
        (
            ["--static", "/s=@/static", "--static", "/s=@/public", "m:app"],
            '--static: "/s" is mounted twice',
        ),
        (
            ["--static-index", "../x", "--static", "/s=@/static", "m:app"],
            "--static-index: expected a file name (without '/'), got \"../x\"",
        ),
        (
            ["--static-expires-uri", "nospace", "--static", "/s=@/static", "m:app"],
            '--static-expires-uri: expected "REGEX TIME", got "nospace"',
        ),
        (
            ["--static-expires-uri", "([ 60", "--static", "/s=@/static", "m:app"],
            '--static-expires-uri: "([": not a regular expression',
        ),
    ],
)
def test_static_flag_errors_are_one_line(site: Path, argv: list[str], error: str) -> None:
    argv = [arg.replace("@", str(site)) for arg in argv]
    with pytest.raises(ConfigError) as info:
        parse_command_line(argv, environ={}, cwd=str(site)).document(warn=lambda line: None)
    assert str(info.value).startswith(error.replace("@", str(site)))
    assert "\n" not in str(info.value)


def test_a_flat_file_takes_a_table_of_mounts(site: Path) -> None:
    config = site / "corral.toml"
    config.write_text(
        f'app = "myapp:app"\n[static_map]\n"/static" = "{site}/static"\n"/" = "{site}/public"\n'
    )
    doc = load(["-c", str(config)])
    assert [step.get("match", {}).get("uri") for step in doc.routes] == [
        ["/static", "/static/*"],
        None,
        None,
    ]


# -- uWSGI's ini -------------------------------------------------------------------------------


def ini(site: Path, *lines: str) -> Path:
    path = site / "app.ini"
    path.write_text("\n".join(["[uwsgi]", "http = :8931", "module = myapp:app", *lines]) + "\n")
    return path


def test_uwsgi_mounts_are_tried_in_uwsgis_order_then_the_application(site: Path) -> None:
    path = ini(
        site,
        "static-map2 = /static=%d",
        "static-map = /static=%dapp/static",
        "check-static = %dpublic",
        "static-index = index.html",
    )
    doc = load(["--ini", str(path)])
    assert [listener.pass_ for listener in doc.listeners.values()] == ["routes"]
    assert [path for path, *_ in tried(doc.routes, "/static/a.css")[:-1]] == [
        f"{site}/public/static/a.css",  # check-static first,
        f"{site}/app/static/a.css",  # then static-map,
        f"{site}/static/a.css",  # then static-map2, which keeps the mount point
    ]
    assert tried(doc.routes, "/static/a.css")[-1] == ToApplication("myapp")
    assert tried(doc.routes, "/about") == [
        (f"{site}/public/about", f"{site}/public", "index.html"),
        ToApplication("myapp"),
    ]
    assert tried(doc.routes, "/static/a.css", "POST") == [ToApplication("myapp")]


def test_uwsgi_static_map_of_a_file_serves_it_for_its_url(site: Path) -> None:
    doc = load(["--ini", str(ini(site, "static-map = /favicon.ico=%dfavicon.ico"))])
    assert tried(doc.routes, "/favicon.ico")[0][0] == f"{site}/favicon.ico"
    assert tried(doc.routes, "/favicon.ico/x") == [ToApplication("myapp")]


def test_uwsgi_mounts_that_are_not_there_are_left_out_with_a_warning(site: Path) -> None:
    lines: list[str] = []
    path = ini(site, "static-map = /s=%dnope", "check-static = /nowhere", "static-index = a.html")
    doc = parse_command_line(["--ini", str(path)], environ={}).document(warn=lines.append)
    assert lines == [
        f'{path}:4: static-map: "{site}/nope": no such directory: left out',
        f'{path}:5: check-static: "/nowhere": no such directory: left out',
        f"{path}:6: static-index: has no effect without static-map or check-static",
    ]
    assert [listener.pass_ for listener in doc.listeners.values()] == ["applications/myapp"]


def test_uwsgi_static_map_without_a_mount_point_is_one_line(site: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(["--ini", str(ini(site, "static-map = %dstatic"))])
    assert str(info.value) == (
        f'{site}/app.ini:4: static-map: expected MOUNTPOINT=DIR, got "{site}/static"'
    )


def test_uwsgi_static_expires_uri_is_read_as_regex_and_seconds(site: Path) -> None:
    from corral.config.uwsgi import read_ini

    given = read_ini(
        str(ini(site, "static-map = /s=%dstatic", r"static-expires-uri = \.css$ 3600"))
    )
    assert given.given["static_expires_uri"].value == [r"\.css$ 3600"]
    assert given.given["static_fallback"].value is True


# -- Granian's flags -----------------------------------------------------------------------------


def test_granian_mounts_pair_with_routes_and_a_miss_is_404(site: Path) -> None:
    argv = [
        "--static-path-mount", f"{site}/static", "--static-path-route", "/assets",
        "--static-path-mount", f"{site}/media", "--static-path-route", "/media",
        "--static-path-expires", "0", "--static-path-dir-to-file", "index.htm", "m:app",
    ]  # fmt: skip
    doc = load(argv)
    assert tried(doc.routes, "/assets/a.css") == [
        (f"{site}/static/a.css", f"{site}/static", "index.htm"),
        NOT_FOUND,
    ]
    assert tried(doc.routes, "/media/x.png")[0][0] == f"{site}/media/x.png"
    assert tried(doc.routes, "/other") == [ToApplication("m")]
    assert all("expires" not in step["action"] for step in doc.routes)  # 0: no header


def test_granian_one_mount_is_under_static_for_a_day() -> None:
    from corral.config.granian import _static

    assert _static({"--static-path-mount": ["/srv/s"]}) == [
        ("static_map", ["/static=/srv/s"], "--static-path-mount"),
        ("static_expires", 86400, "--static-path-expires"),
    ]
    assert _static({"--static-path-mount": ["/srv/s"], "--static-path-expires": "1h"})[1] == (
        "static_expires",
        3600,
        "--static-path-expires",
    )


@pytest.mark.xfail(not share_has_expires(), reason=EXPIRES_PENDING, strict=True)
def test_granian_one_mount_runs_with_its_default_expires(site: Path) -> None:
    doc = load(["--static-path-mount", f"{site}/static", "m:app"])
    assert doc.routes[0]["action"]["expires"] == 86400


def test_granian_mounts_without_as_many_routes_are_one_line(site: Path) -> None:
    argv = ["--static-path-mount", f"{site}/static", "--static-path-mount", f"{site}/media"]
    with pytest.raises(ConfigError) as info:
        load([*argv, "m:app"])
    assert str(info.value) == (
        "--static-path-mount: give one --static-path-route per mount (Granian's rule): "
        "2 mount(s), 0 route(s)"
    )


def test_an_emperors_vassal_serves_its_static_files_from_its_own_table(site: Path) -> None:
    import logging

    from corral.config import Document
    from corral.master.emperor import Emperor

    vassals = site / "vassals"
    vassals.mkdir()
    (vassals / "blog.ini").write_text(
        f"[uwsgi]\nhttp = 127.0.0.1:8101\nmodule = blog:app\nstatic-map = /static={site}/static\n"
    )
    (vassals / "shop.ini").write_text("[uwsgi]\nhttp = 127.0.0.1:8102\nmodule = shop:app\n")
    emperor = Emperor(str(vassals), Document(), logging.getLogger("test"))
    emperor.look()
    doc = emperor.document()
    passes = {key: listener.pass_ for key, listener in doc.listeners.items()}
    assert passes == {"127.0.0.1:8101": "routes/blog", "127.0.0.1:8102": "applications/shop"}
    assert list(doc.routes) == ["blog"]
    router = compile_routes(doc.routes, applications=["blog", "shop"])
    action = router.resolve("routes/blog", request("/static/a.css"))
    assert isinstance(action, Share) and action.paths == (f"{site}/static/a.css",)
    assert router.resolve_fallback(action, request("/static/a.css")) == ToApplication("blog")
    assert router.resolve("routes/blog", request("/")) == ToApplication("blog")

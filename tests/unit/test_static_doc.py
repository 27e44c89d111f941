"""docs/static.md and migrating.md's "From nginx" stay true to what corral reads.

Every example block is read as corral reads it: a JSON block is validated as a document (a
lone action, or routes without a listener, get the listener that passes to them), the ini
block is read as a uWSGI file, the TOML block as a flat config file, each ``corral ...`` line
is parsed as the command line; the route ``--check-config`` is said to print is the one the
flag makes. What the files are answered with is the file engine's (its integration tests).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from corral.config import ConfigError, parse_command_line, validate_document
from corral.config.sources import load, read_config
from corral.config.uwsgi import read_ini
from corral.routing import RouteError, Share, compile_routes
from tests.unit.test_static_habits import request as route_request

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "docs" / "static.md"
MIGRATING = ROOT / "docs" / "migrating.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)

# keys of a share that arrive with the file engine (issue 32), and how to tell they have
PENDING = {
    "expires": {"share": "/", "expires": 60},
    "immutable": {"share": "/", "immutable": True},
    "response_headers": {"share": "/", "response_headers": {"X-A": "b"}},
}


def known(key: str) -> bool:
    try:
        compile_routes([{"action": PENDING[key]}])
    except RouteError:
        return False
    return True


def blocks(page: Path, language: str, after: str = "") -> list[str]:
    text = page.read_text(encoding="utf-8")
    text = text[text.index(after) :] if after else text
    if after.startswith("## "):  # that section only
        following = text.find("\n## ", 1)
        text = text if following < 0 else text[:following]
    return [body for lang, body in BLOCK.findall(text) if lang == language]


def as_document(block: dict[str, Any]) -> dict[str, Any]:
    """A lone action or routes without listeners, made a document that uses them."""
    if "action" in block:
        block = {"routes": [block]}
    if "routes" in block and "listeners" not in block:
        block = {"listeners": {"127.0.0.1:0": {"pass": "routes"}}, **block}
    return block


def pending_keys(block: str) -> list[str]:
    return [key for key in PENDING if f'"{key}"' in block and not known(key)]


JSON_BLOCKS = [
    *(("static.md", body) for body in blocks(STATIC, "json")),
    *(("migrating.md", body) for body in blocks(MIGRATING, "json", "## From nginx")),
]


@pytest.mark.parametrize(
    ("page", "block"), JSON_BLOCKS, ids=[f"{page}:{n}" for n, (page, _) in enumerate(JSON_BLOCKS)]
)
def test_every_json_example_is_a_valid_document(
    request: pytest.FixtureRequest, page: str, block: str
) -> None:
    waiting = pending_keys(block)
    if waiting:
        reason = f"{', '.join(waiting)}: a share key of the file engine, not in the compiler yet"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason, raises=ConfigError))
    validate_document(as_document(json.loads(block)))


def test_there_are_examples_of_every_share_key() -> None:
    text = "".join(body for _, body in JSON_BLOCKS)
    for key in ("share", "index", "fallback", "types", "chroot", "follow_symlinks"):
        assert f'"{key}"' in text, key
    for key in ("traverse_mounts", "expires", "immutable", "response_headers", "mime_types"):
        assert f'"{key}"' in text, key
    assert "${uri_after:/" in text
    assert len(blocks(MIGRATING, "json", "## From nginx")) == 1


def test_the_nginx_block_of_the_tutorials_is_the_route_shown() -> None:
    nginx = blocks(MIGRATING, "nginx", "## From nginx")[0]
    assert "location /static {\n    root /srv/app;\n    expires 24h;\n}" in nginx
    route = json.loads(blocks(MIGRATING, "json", "## From nginx")[0])["routes"][0]
    assert route == {
        "match": {"uri": "/static*"},
        "action": {"share": "/srv/app$uri", "expires": "24h"},
    }
    # what it serves (the engine's expires aside): nginx's root, and its prefix match
    rule = {"match": route["match"], "action": {"share": route["action"]["share"]}}
    router = compile_routes([rule])
    for target in ("/static/css/a.css", "/staticx"):
        share = router.resolve("routes", route_request(target))
        assert isinstance(share, Share) and share.paths == (f"/srv/app{target}",)


def test_the_ini_example_reads_as_uwsgi_would(tmp_path: Path) -> None:
    site = tmp_path / "mysite"
    for name in ("staticfiles", "media", "public"):
        (site / name).mkdir(parents=True)
    text = blocks(STATIC, "ini")[0].replace("/srv/mysite", str(site))
    (path := tmp_path / "mysite.ini").write_text(text)
    ini = read_ini(str(path))
    assert ini.warnings == []
    assert ini.given["static_map"].value == [
        f"/={site}/public",  # check-static first, as uWSGI tries it
        f"/static={site}/staticfiles",
        f"/media={site}/media",
    ]
    assert ini.given["static_fallback"].value is True
    assert ini.given["static_index"].value == ["index.html"]
    assert ini.given["static_expires_uri"].value == [r"\.css$ 86400", r"\.js$ 86400"]


def test_the_toml_example_reads(tmp_path: Path) -> None:
    (path := tmp_path / "corral.toml").write_text(blocks(STATIC, "toml")[0])
    given = read_config(str(path))
    assert isinstance(given, dict)
    assert given["static_map"].value == {"/static": "./staticfiles", "/media": "/srv/media"}


def commands(page: Path) -> list[list[str]]:
    found = []
    for body in blocks(page, "sh"):
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line)
            if words and words[0] == "corral":
                found.append(words[1:])
    return found


@pytest.mark.parametrize("args", commands(STATIC), ids=" ".join)
def test_every_command_parses(args: list[str]) -> None:
    parse_command_line(args, environ={}, cwd="/")


def test_check_config_prints_the_route_shown(tmp_path: Path) -> None:
    shown = next(b for b in blocks(STATIC, "json") if "applications/mysite.wsgi" in b)
    (tmp_path / "app" / "static").mkdir(parents=True)
    doc = load(["mysite.wsgi", "--static", f"/static={tmp_path}/app/static"])
    expected = json.loads(shown.replace("/srv/app", f"{tmp_path}/app"))
    assert doc.routes == expected["routes"]
    assert {key: v.pass_ for key, v in doc.listeners.items()} == {"127.0.0.1:8000": "routes"}

"""NGINX Unit's php applications without php-fpm (corral/php/, config/php_keys.py): the keys
checked with their JSON paths, the script each request runs (Unit's rules, never out of the
root), the php-fpm pool written from the document."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.config import ConfigError, parse_command_line
from corral.config.document import validate_document
from corral.php.apps import php_applications
from corral.php.fpm import fpm_pool
from corral.php.site import Site


def php_doc(app: dict, **more: object) -> dict:
    return {
        "listeners": {"127.0.0.1:8080": {"pass": "applications/php"}},
        "applications": {"php": {"type": "php", **app}},
        **more,
    }


@pytest.mark.parametrize(
    ("app", "message"),
    [
        ({}, '$.applications.php: missing required key "root" (or "targets")'),
        ({"root": "/w", "module": "m"}, "$.applications.php.module: a key of Python applications"),
        ({"root": "/w", "script": "../x.php"}, "$.applications.php.script: expected a path under"),
        ({"root": "/w", "index": "a/../../b.php"}, "$.applications.php.index: expected a path"),
        ({"root": "/w", "targets": {"a": {"root": "/w"}}}, "$.applications.php.root: not allowed"),
        ({"targets": {}}, "$.applications.php.targets: expected at least one target"),
        ({"targets": {"a": {"script": "x.php"}}}, "$.applications.php.targets.a: missing required"),
        ({"targets": {"a": {"root": "/w", "module": "m"}}}, '.targets.a: "module" and "callable"'),
        ({"root": "/w", "options": {"admin": {"x": 1}}}, "$.applications.php.options.admin:"),
        ({"root": "/w", "options": {"user": {"x": 'a"b'}}}, "$.applications.php.options.user:"),
        ({"root": "/w", "options": {"fil": "x"}}, "$.applications.php.options.fil: unknown key"),
        ({"root": "/w", "type": "php 8.2", "isolation": {}}, 'NGINX Unit\'s "isolation" is not'),
    ],
)
def test_php_keys_are_checked_with_their_path(app: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_document(php_doc(app))
    assert message in str(info.value)


def test_php_keys_on_a_python_application_are_refused() -> None:
    with pytest.raises(ConfigError, match=r'\$.applications.py.root: a key of "php"'):
        validate_document({"applications": {"py": {"module": "m", "root": "/w"}}})
    with pytest.raises(ConfigError, match=r'\.targets.t: missing required key "module"'):
        validate_document({"applications": {"py": {"targets": {"t": {"root": "/w"}}}}})


def test_a_php_document_is_a_value_that_dumps_and_loads_back() -> None:
    import msgspec

    from corral.config.document import Document

    doc = validate_document(
        php_doc(
            {
                "type": "php 8.2",
                "targets": {"a": {"root": "/w", "script": "a.php"}, "b": {"root": "/v"}},
                "options": {"file": "/etc/php.ini", "admin": {"memory_limit": "64M"}},
            }
        )
    )
    assert msgspec.json.decode(msgspec.json.encode(doc), type=Document) == doc
    assert validate_document(msgspec.to_builtins(doc)) == doc


@pytest.fixture
def root(tmp_path: Path) -> Path:
    www = tmp_path / "www"
    (www / "sub").mkdir(parents=True)
    for name in ("index.php", "info.php", "sub/index.php", "sub/page.php", "style.css"):
        (www / name).write_text("<?php")
    (www / "dir.php").mkdir()
    (tmp_path / "secret.php").write_text("<?php")
    (www / "out.php").symlink_to(tmp_path / "secret.php")
    (www / "outdir").symlink_to(tmp_path)
    (www / "in.php").symlink_to("info.php")  # relative: an absolute one is refused, as by shares
    return www


@pytest.mark.parametrize(
    ("path", "script_name", "path_info"),
    [
        ("/", "/index.php", ""),
        ("/info.php", "/info.php", ""),
        ("/sub/", "/sub/index.php", ""),
        ("/sub/page.php", "/sub/page.php", ""),
        ("/info.php/a/b", "/info.php", "/a/b"),
        ("/sub/page.php/x.php/y", "/sub/page.php", "/x.php/y"),
        ("/in.php", "/in.php", ""),  # a symlink that stays under the root
    ],
)
def test_a_script_under_the_root_is_chosen_by_path(
    root: Path, path: str, script_name: str, path_info: str
) -> None:
    choice = Site(str(root)).choose(path)
    assert choice.status == 0
    assert choice.script_name == script_name.encode()
    assert choice.filename == str(root).encode() + script_name.encode()
    assert choice.path_info == path_info


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/missing.php", 404),
        ("/style.css", 404),  # not a script: php runs none but .php files
        ("/missing", 404),
        ("/dir.php", 404),  # a directory named .php
        ("/out.php", 403),  # a symlink out of the root
        ("/outdir/secret.php", 403),
        ("/info.php\x00.css", 404),
    ],
)
def test_what_is_not_a_script_under_the_root_is_refused(root: Path, path: str, status: int) -> None:
    assert Site(str(root)).choose(path).status == status


def test_a_directory_without_its_slash_is_redirected_with_its_query(root: Path) -> None:
    choice = Site(str(root)).choose("/sub", "a=1")
    assert (choice.status, choice.location) == (301, "/sub/?a=1")


def test_index_and_script(root: Path) -> None:
    assert Site(str(root), index="info.php").choose("/sub/").status == 404
    assert Site(str(root), index="info.php").choose("/").script_name == b"/info.php"
    fixed = Site(str(root), script="sub/page.php")
    for path in ("/", "/anything/at/all", "/style.css"):
        choice = fixed.choose(path)
        assert (choice.script_name, choice.path_info) == (b"/sub/page.php", path)
    assert Site(str(root), script="out.php").choose("/").status == 403


def test_the_pool_php_fpm_runs_from_unit_keys() -> None:
    doc = validate_document(
        php_doc(
            {
                "root": "/srv/www",
                "processes": {"max": 8, "spare": 2},
                "user": "nobody",
                "group": "nogroup",
                "limits": {"requests": 500, "timeout": 30},
                "environment": {"APP_ENV": "prod"},
                "options": {
                    "file": "/etc/php/custom.ini",
                    "admin": {"memory_limit": "64M"},
                    "user": {"display_errors": "0"},
                },
            }
        )
    )
    at = "/run/corral/php/0.0.sock"
    pool = fpm_pool("php", doc.applications["php"], listen=at, binary="/usr/sbin/php-fpm8.2")
    assert (pool.listen, pool.config_path) == (at, "/run/corral/php/0.0.conf")
    assert pool.command == (
        "/usr/sbin/php-fpm8.2",
        "--nodaemonize",
        "--force-stderr",
        "--fpm-config",
        pool.config_path,
        "-c",
        "/etc/php/custom.ini",
    )
    lines = pool.config.splitlines()
    for line in (
        f"listen = {pool.listen}",
        "user = nobody",
        "listen.owner = nobody",
        "group = nogroup",
        "listen.group = nogroup",
        "pm = dynamic",
        "pm.max_children = 8",
        "pm.min_spare_servers = 2",
        "chdir = /srv/www",
        'env[APP_ENV] = "prod"',
        'php_admin_value[memory_limit] = "64M"',
        'php_value[display_errors] = "0"',
        "clear_env = yes",
        "pm.max_requests = 500",
        "request_terminate_timeout = 30s",
    ):
        assert line in lines
    assert "--allow-to-run-as-root" not in pool.command  # a user is given


def test_pm_static_and_ondemand_and_root() -> None:
    static = validate_document(php_doc({"root": "/w", "processes": 3})).applications["php"]
    pool = fpm_pool("php", static, listen="/x.sock", as_root=True)
    assert "pm = static" in pool.config and "pm.max_children = 3" in pool.config
    assert pool.command[-1] == "--allow-to-run-as-root"  # as corral's own workers would
    assert (
        "--allow-to-run-as-root" not in fpm_pool("php", static, listen="/x.sock", as_root=False)[0]
    )
    lazy = validate_document(php_doc({"root": "/w", "processes": {"max": 4, "idle_timeout": 9}}))
    config = fpm_pool("php", lazy.applications["php"], listen="/x.sock").config
    assert "pm = ondemand" in config and "pm.process_idle_timeout = 9s" in config


def test_the_pool_is_named_after_its_application_when_php_fpm_can_take_the_name() -> None:
    app = validate_document(php_doc({"root": "/w"})).applications["php"]
    assert "\n[shop.v2]\n" in fpm_pool("shop.v2", app, listen="/x.sock").config
    for name in ("global", "a b", "x]y", "n" * 33):  # [global] is php-fpm's own section
        config = fpm_pool(name, app, listen="/x.sock").config
        sections = [line for line in config.splitlines() if line.startswith("[")]
        assert sections[0] == "[global]" and sections[1] != f"[{name}]", sections


def test_an_environment_value_php_fpm_cannot_take_is_named() -> None:
    doc = validate_document(php_doc({"root": "/w", "environment": {"A": 'x"y'}}))
    with pytest.raises(ValueError, match=r"\$.applications.php.environment.A: php-fpm cannot"):
        fpm_pool("php", doc.applications["php"], listen="/x.sock")


def test_what_the_workers_know_of_each_php_application(tmp_path: Path) -> None:
    doc = validate_document(
        {
            "listeners": {"127.0.0.1:8080": {"pass": "routes"}},
            "routes": [{"action": {"pass": "applications/php/b"}}],
            "applications": {
                "php": {
                    "type": "php",
                    "processes": 4,
                    "targets": {"a": {"root": "/w"}, "b": {"root": "/v", "script": "s.php"}},
                },
                "py": {"module": "m", "processes": 2},
            },
            "settings": {"fastcgi_connections": 8, "fastcgi_read_timeout": 7},
        }
    )
    [php] = php_applications(doc).values()
    assert php.address is None  # the board's, at each request
    assert php.at("unix:/a.sock").address == "unix:/a.sock"
    assert php.at("unix:/a.sock") is php.at("unix:/a.sock")  # its connections kept there
    assert [site.root for site in php.sites] == ["/w", "/v"]
    assert php.sites[1].script == b"/s.php"
    assert php.limit == 2 and php.keep  # its 4 children shared by the 2 workers reaching it
    assert php.read_timeout == 7.0
    assert os.path.isabs(php.sites[0].root)


def test_a_php_application_is_served_by_the_php_kind() -> None:
    """php-fpm, started by the master's supervision: nothing said unserved, whatever the
    version the type names (php-fpm's is the installed one)."""
    from corral.config.unserved import unserved
    from corral.external.kinds import KINDS, kind_of

    for kind in ("php", "php 8.2"):
        doc = validate_document(php_doc({"root": "/w", "type": kind, "processes": 3}))
        app = doc.applications["php"]
        assert unserved(doc) == []
        assert kind_of(app) is KINDS["php"]
        assert kind_of(app).speaks == "fastcgi" and kind_of(app).processes(app) == 1


@pytest.mark.parametrize("flag", ["--fastcgi-connect-timeout", "--fastcgi-read-timeout"])
def test_a_fastcgi_timeout_of_zero_is_refused_in_one_line(flag: str) -> None:
    # 0 would answer every php request 504 at once: no setting says 0 is "no limit" here
    with pytest.raises(ConfigError, match=rf"{flag}: expected number > 0"):
        parse_command_line(["examples.hello", flag, "0"])

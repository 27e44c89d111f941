"""Static files the way people switching write them (issue 32, points 2, 3 and 5), served by
real corral processes on each request core: ``--static URL=DIR`` on the command line, a uWSGI
ini's ``static-map``, Granian's static flags, the nginx ``location /static`` of the tutorials
as docs/migrating.md writes it, a document of shares alone, ``cache_valid`` seeing a change,
and a real Django project whose admin has its CSS after ``collectstatic``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.server import Server, wait_for
from tests.integration.test_http import Reader, Response, get

pytestmark = pytest.mark.usefixtures("each_core")

ROOT = Path(__file__).resolve().parents[2]
CSS = b"body { color: #123; }\n"
HELLO = b"Hello, world!"  # proc_apps's answer to a path it does not know


def ask(server: Server, path: str, *lines: str, method: str = "GET") -> Response:
    with server.connect() as sock:
        sock.sendall(get(path, *lines, method=method))
        return Reader(sock).response(method)


def static_dir(parent: Path, name: str = "static") -> Path:
    directory = parent / name
    (directory / "css").mkdir(parents=True)
    (directory / "css" / "site.css").write_bytes(CSS)
    (directory / "index.html").write_bytes(b"<h1>index</h1>\n")
    return directory


def test_static_url_dir_serves_its_files_and_leaves_the_rest_to_the_application(
    tmp_path: Path,
) -> None:
    static = static_dir(tmp_path)
    with Server("proc_apps", "--static", f"/static={static}", "--static-expires", "1h") as server:
        got = ask(server, "/static/css/site.css")
        assert (got.status, got.body) == (200, CSS)
        assert got.get("content-type") == "text/css" and got.get("cache-control") == "max-age=3600"
        assert ask(server, "/static/").body == b"<h1>index</h1>\n"
        missing = ask(server, "/static/css/missing.css")
        assert missing.status == 404  # a mount's miss is its own, as nginx and Granian answer
        assert ask(server, "/").body == HELLO  # everything else is the application's
        assert ask(server, "/staticx").body == HELLO  # whole segments
        # the path is resolved before routing: /proc_apps.py, the application's, never a file
        assert ask(server, "/static/../proc_apps.py").body == HELLO
        assert ask(server, "/static/%2e%2e/%2e%2e/proc_apps.py").status == 400  # above the root
        assert server.stop() == 0


def test_static_root_serves_what_it_has_and_passes_the_rest(tmp_path: Path) -> None:
    static = static_dir(tmp_path, "public")
    with Server("proc_apps", "--static", f"/={static}") as server:
        assert ask(server, "/css/site.css").body == CSS
        assert ask(server, "/not/a/file").body == HELLO  # nginx's try_files $uri @app
        assert ask(server, "/css/site.css", method="POST").body == HELLO
        assert server.stop() == 0


def test_a_uwsgi_ini_static_map_sends_its_misses_to_the_application(tmp_path: Path) -> None:
    static = static_dir(tmp_path)
    ini = tmp_path / "site.ini"
    ini.write_text(
        "[uwsgi]\nmodule = proc_apps\nhttp-socket = 127.0.0.1:0\n"
        f"static-map = /static={static}\nstatic-expires-uri = \\.css$ 86400\n"
    )
    with Server(f"--ini={ini}", bind=None) as server:
        got = ask(server, "/static/css/site.css")
        assert got.body == CSS and got.get("cache-control") == "max-age=86400"
        assert ask(server, "/static/index.html").get("cache-control") is None
        miss = ask(server, "/static/css/missing.css")
        assert (miss.status, miss.body) == (200, HELLO)  # uWSGI's static-map: the application
        assert "warning" not in server.stderr.lower(), server.stderr
        assert server.stop() == 0


def test_granians_static_flags_serve_a_day_of_cache(tmp_path: Path) -> None:
    static = static_dir(tmp_path, "assets")
    with Server(
        "asgi_apps:app", "--interface", "asgi", "--static-path-mount", str(static)
    ) as server:
        got = ask(server, "/static/css/site.css")
        assert got.body == CSS and got.get("cache-control") == "max-age=86400"
        assert ask(server, "/static/css/missing.css").status == 404  # Granian's answer
        assert json.loads(ask(server, "/scope").body)["path"] == "/scope"  # the application
        assert server.stop() == 0


def nginx_tutorial_document() -> dict:
    """The document docs/migrating.md gives for the tutorials' ``location /static { root
    /srv/app; expires 24h; }``, as written there."""
    page = (ROOT / "docs" / "migrating.md").read_text()
    after = page[page.index("location /static {") :]
    block = re.search(r"```json\n(.*?)```", after, re.S)
    assert block is not None
    return json.loads(block.group(1))


def test_the_nginx_location_of_the_tutorials_runs_as_migrating_md_writes_it(
    tmp_path: Path,
) -> None:
    document = nginx_tutorial_document()
    # only where it runs changes: the listener's port, /srv/app, the application's module
    (address,) = document["listeners"]
    document["listeners"] = {"127.0.0.1:0": document["listeners"].pop(address)}
    route = document["routes"][0]
    site = tmp_path / "srv" / "app"
    static_dir(site)
    route["action"]["share"] = route["action"]["share"].replace("/srv/app", str(site))
    document["applications"]["app"]["module"] = "proc_apps"
    path = tmp_path / "app.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server:
        got = ask(server, "/static/css/site.css")
        assert got.body == CSS and got.get("cache-control") == "max-age=86400"
        assert got.get("expires") is not None
        assert ask(server, "/").body == HELLO  # proxy_pass: the application
        assert server.stop() == 0


def test_a_document_of_shares_alone_serves_files(tmp_path: Path) -> None:
    site = static_dir(tmp_path, "site")
    document = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [
            {"match": {"uri": "/health"}, "action": {"return": 204}},
            {"action": {"share": f"{site}$uri", "chroot": str(site)}},
        ],
    }
    path = tmp_path / "site.json"
    path.write_text(json.dumps(document))
    with Server(f"--config={path}", bind=None) as server:
        server.wait_log(r"serving the routes with 1 worker\(s\) \(no application\)")
        assert ask(server, "/css/site.css").body == CSS
        assert ask(server, "/").body == b"<h1>index</h1>\n"
        health = ask(server, "/health")
        assert health.status == 204 and health.get("content-length") is None
        assert ask(server, "/nothing").status == 404
        assert "reached the pool of a document without an application" not in server.stderr
        assert server.stop() == 0


@pytest.mark.parametrize("valid", [0, 0.5])
def test_cache_valid_sees_a_change(tmp_path: Path, valid: float) -> None:
    site = static_dir(tmp_path, "site")
    document = {
        "listeners": {"127.0.0.1:0": {"pass": "routes"}},
        "routes": [{"action": {"share": f"{site}$uri"}}],
        "settings": {"http": {"static": {"cache_valid": valid}}},
    }
    path = tmp_path / "site.json"
    path.write_text(json.dumps(document))
    changed = b"body { color: #456; margin: 0; }\n"
    with Server(f"--config={path}", bind=None) as server:
        before = ask(server, "/css/site.css")
        assert before.body == CSS
        (site / "css" / "site.css").write_bytes(changed)
        if valid == 0:  # every request looks again
            after = ask(server, "/css/site.css")
        else:  # within cache_valid: the answer it knew, then the new one
            after = wait_for(
                lambda: (got := ask(server, "/css/site.css")).body == changed and got, timeout=5
            )
        assert after.body == changed and after.get("etag") != before.get("etag")
        assert after.get("content-length") == str(len(changed))
        assert server.stop() == 0


def test_a_django_project_serves_its_admin_css_after_collectstatic(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(
        [sys.executable, "-m", "django", "startproject", "mysite", str(project)], check=True
    )
    with (project / "mysite" / "settings.py").open("a") as settings:
        settings.write(
            '\nDEBUG = False\nALLOWED_HOSTS = ["*"]\nSTATIC_ROOT = BASE_DIR / "staticfiles"\n'
        )
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=project,
        check=True,
        capture_output=True,
    )
    with Server(
        "mysite.wsgi",
        "--static",
        "/static=./staticfiles",
        "--static-expires",
        "1h",
        cwd=str(project),
    ) as server:
        login = ask(server, "/admin/login/")
        assert login.status == 200
        stylesheets = re.findall(rb'href="(/static/[^"]+\.css)"', login.body)
        assert b"/static/admin/css/base.css" in stylesheets, login.body[:500]
        for href in stylesheets:
            css = ask(server, href.decode())
            assert css.status == 200 and css.get("content-type") == "text/css", href
            assert (
                css.body
                == (project / "staticfiles" / href.decode()[len("/static/") :]).read_bytes()
            )
        assert ask(server, "/").status == 404  # Django's own 404: DEBUG is off, no URL there
        assert server.stop() == 0

"""uWSGI ini files as a config source (corral.config.uwsgi): uWSGI's reading rules, the mapping
of its options onto corral's document, and one warning line per option corral does not act on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from msgspec import UNSET

from corral.config import ConfigError, load, parse_command_line
from corral.config.uwsgi import ACCEPTED, MAPPED, UNSUPPORTED, read_ini, uwsgi_address
from corral.config.values import Processes


def write(tmp_path: Path, text: str, name: str = "site.ini") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def doc_of(path: Path | str, *flags: str, flag: str = "--ini"):
    """The document, failing on any warning (each test says which it expects)."""
    seen: list[str] = []
    doc = parse_command_line([flag, str(path), *flags]).document(warn=seen.append)
    assert seen == []
    return doc


def app_of(doc):
    (application,) = doc.applications.values()
    return application


def error_of(path: Path | str, *flags: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(["--ini", str(path), *flags])
    assert "\n" not in str(info.value)
    return str(info.value)


def warnings_of(path: Path | str, *flags: str) -> list[str]:
    seen: list[str] = []
    parse_command_line(["--ini", str(path), *flags]).document(warn=seen.append)
    return seen


# -- the classic Django-on-nginx file ---------------------------------------------------------


def test_the_classic_django_file(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    path = write(
        tmp_path,
        f"""\
# mysite_uwsgi.ini file
[uwsgi]

# Django-related settings
# the base directory (full path)
chdir           = {tmp_path}
# Django's wsgi file
module          = mysite.wsgi
# the virtualenv (full path)
home            = {venv}
env             = DJANGO_SETTINGS_MODULE=mysite.settings
env             = LANG=C.UTF-8

# process-related settings
master          = true
processes       = 10
idle            = 60
socket          = {tmp_path}/mysite.sock
chmod-socket    = 664
uid             = nobody
gid             = nogroup
harakiri        = 20
max-requests    = 5000
logto           = {tmp_path}/%n.log
buffer-size     = 32768
post-buffering  = 8192
vacuum          = true
""",
        name="mysite_uwsgi.ini",
    )
    doc = doc_of(path)
    assert {key: listener.protocol for key, listener in doc.listeners.items()} == {
        f"unix:{tmp_path}/mysite.sock": "uwsgi"
    }
    app = app_of(doc)
    assert (app.module, app.callable, app.working_directory) == ("mysite.wsgi", None, str(tmp_path))
    assert app.home == str(venv)
    assert app.environment == {"DJANGO_SETTINGS_MODULE": "mysite.settings", "LANG": "C.UTF-8"}
    assert app.processes == Processes(max=10, spare=0, idle_timeout=60.0)
    assert (app.user, app.group, app.max_requests) == ("nobody", "nogroup", 5000)
    settings = doc.settings
    assert settings.unix_socket_mode == 0o664 and settings.timeout == 20.0
    assert settings.limit_request_head == 32768 and settings.body_buffer_size == 8192
    assert settings.error_logfile == f"{tmp_path}/mysite_uwsgi.log"
    assert doc.access_log.path == f"{tmp_path}/mysite_uwsgi.log"  # uWSGI logs requests there


def test_the_same_file_through_c_and_the_single_dash_spelling(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\nhttp-socket = 127.0.0.1:9090\n")
    docs = [doc_of(path, flag=flag) for flag in ("--ini", "-ini", "-c", "--config")]
    assert all(doc == docs[0] for doc in docs)
    assert list(docs[0].listeners) == ["127.0.0.1:9090"]
    assert docs[0].listeners["127.0.0.1:9090"].protocol is UNSET  # HTTP


def test_flags_override_the_file(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\nprocesses = 4\nsocket = :3031\n")
    doc = doc_of(path, "-w", "2", "--uwsgi-socket", "127.0.0.1:4000")
    assert app_of(doc).processes == 2
    assert list(doc.listeners) == ["127.0.0.1:4000"]


def test_ini_and_c_together_is_an_error(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\n")
    assert "one config file" in error_of(path, "-c", str(path))


# -- reading: sections, comments, booleans, repetition -----------------------------------------


def test_sections_and_the_default(tmp_path):
    path = write(tmp_path, "[other]\nmodule = b\n[uwsgi]\nmodule = a\n[other]\nthreads = 3\n")
    assert app_of(doc_of(path)).module == "a"
    other = doc_of(f"{path}:other")
    assert (app_of(other).module, app_of(other).threads) == ("b", 3)  # both [other] blocks
    assert error_of(f"{path}:nope") == f"{path}: no [nope] section"
    assert (
        error_of(tmp_path / "none.ini")
        == f"{tmp_path}/none.ini: cannot read: No such file or directory"
    )
    include = write(tmp_path, "[uwsgi]\nmodule = app\nini = other.ini:x\n", "inc.ini")
    assert (
        error_of(include)
        == f"{include}:3: ini: cannot read {tmp_path}/other.ini: No such file or directory"
    )


def test_comments_whitespace_and_values_kept_whole(tmp_path):
    path = write(
        tmp_path,
        "; a comment\n[uwsgi]\n  # another\n\tmodule=app   \nenv =  A = b ; not a comment\n",
    )
    assert app_of(doc_of(path)).environment == {"A ": " b ; not a comment"}


@pytest.mark.parametrize(
    ("line", "preload"),
    [("lazy-apps", False), ("lazy-apps = true", False), ("lazy-apps = no", True),
     ("lazy-apps = OFF", True), ("lazy-apps = 0", True), ("lazy-apps = yes", False)],
)  # fmt: skip
def test_booleans(tmp_path, line, preload):
    path = write(tmp_path, f"[uwsgi]\nmodule = app\n{line}\n")
    assert app_of(doc_of(path)).preload is preload


def test_a_bad_boolean_names_the_line(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\n\ndisable-logging = maybe\n")
    assert error_of(path) == f'{path}:4: disable-logging: expected true or false, got "maybe"'


def test_list_options_accumulate_and_scalars_take_the_last(tmp_path):
    path = write(
        tmp_path,
        "[uwsgi]\nmodule = app\nprocesses = 2\nsocket = /tmp/a.sock\nprocesses = 5\n"
        "socket = 127.0.0.1:3031\npythonpath = /x\npython-path = /y\ntouch-reload = /t1\n"
        "touch-reload = /t2\nhttp = :8080\nhttp-socket = 127.0.0.1:8081\n",
    )
    doc = doc_of(path)
    app = app_of(doc)
    assert app.processes == 5 and app.path == ["/x", "/y"]
    assert doc.settings.touch_reload == ["/t1", "/t2"]
    protocols = {key: listener.protocol for key, listener in doc.listeners.items()}
    assert protocols == {
        "0.0.0.0:8080": UNSET,  # HTTP
        "127.0.0.1:8081": UNSET,
        "unix:/tmp/a.sock": "uwsgi",
        "127.0.0.1:3031": "uwsgi",
    }


def test_protocol_http_makes_sockets_http(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\nsocket = 127.0.0.1:3031\nprotocol = http\n")
    assert {key: listener.protocol for key, listener in doc_of(path).listeners.items()} == {
        "127.0.0.1:3031": UNSET
    }


@pytest.mark.parametrize(
    ("given", "address"),
    [(":3031", "0.0.0.0:3031"), ("127.0.0.1:3031", "127.0.0.1:3031"),
     ("/run/app.sock", "unix:/run/app.sock"), ("app.sock", "unix:app.sock"),
     ("[::1]:3031", "[::1]:3031"), ("localhost:3031", "127.0.0.1:3031")],
)  # fmt: skip
def test_uwsgi_addresses(given, address):
    from corral.config import parse_bind

    assert str(parse_bind(uwsgi_address(given))) == address


def test_abstract_sockets_are_refused(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\nsocket = @app\n")
    assert error_of(path) == f'{path}:3: socket: "@app": abstract unix sockets are not supported'


def test_chmod_socket_alone_is_666(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\nsocket = /tmp/x.sock\nchmod-socket\n")
    assert doc_of(path).settings.unix_socket_mode == 0o666
    path = write(tmp_path, "[uwsgi]\nmodule = app\nchmod-socket = rw\n")
    assert "expected an octal mode such as 660" in error_of(path)


# -- magic variables, placeholders, environment, files, includes -------------------------------


def test_magic_variables(tmp_path):
    base = tmp_path / "etc" / "vassals"
    base.mkdir(parents=True)
    path = write(
        base,
        "[uwsgi]\nmodule = app\nchdir = %d\nenv = P=%p\nenv = S=%s\nenv = N=%n\nenv = E=%e\n"
        "env = C=%c\nenv = X=%x\nenv = ONE=%1\nenv = PCT=100%%\nenv = U=%u\nenv = ODD=%q\n",
        name="blog.ini",
    )
    app = app_of(doc_of(path))
    assert app.working_directory == f"{base}/"
    parts = [part for part in str(base).split("/") if part]
    assert app.environment == {
        "P": str(path), "S": "blog.ini", "N": "blog", "E": ".ini", "C": "vassals",
        "X": f"{path}:uwsgi", "ONE": parts[1], "PCT": "100%", "U": str(os.getuid()),
        "ODD": "%q",
    }  # fmt: skip


def test_placeholders_refer_to_any_option_first_definition_wins(tmp_path):
    path = write(
        tmp_path,
        "[uwsgi]\nmodule = %(project).wsgi\nchdir = %(base)/%(project)\nproject = blog\n"
        "base = /srv\nproject = ignored\nset-placeholder = port=3031\nsocket = :%(port)\n"
        "env = SOCK=%(socket)\n",
    )
    doc = doc_of(path)
    app = app_of(doc)
    assert (app.module, app.working_directory) == ("blog.wsgi", "/srv/blog")
    assert list(doc.listeners) == ["0.0.0.0:3031"]
    assert app.environment == {"SOCK": ":3031"}


@pytest.mark.parametrize(
    ("line", "message"),
    [("chdir = %(nope)", 'no option "nope" to refer to'),
     ("a = %(b)\nb = %(a)\nchdir = %(a)", "refers to itself"),
     ("n = 1\nchdir = %(n + 1)", "placeholder arithmetic is not supported")],
)  # fmt: skip
def test_placeholder_errors(tmp_path, line, message):
    path = write(tmp_path, f"[uwsgi]\nmodule = app\n{line}\n")
    assert message in error_of(path)


def test_environment_and_file_contents(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_TEST_BASE", "/srv")
    monkeypatch.setenv("CORRAL_TEST_EMPTY", "")
    monkeypatch.delenv("CORRAL_TEST_UNSET", raising=False)
    (tmp_path / "name.txt").write_text("blog\n")
    path = write(
        tmp_path,
        f"[uwsgi]\nmodule = app\nenv = A=$(CORRAL_TEST_BASE)/x\nenv = B=$(CORRAL_TEST_UNSET)\n"
        "env = C=$(CORRAL_TEST_EMPTY:-dflt)\nenv = D=$(CORRAL_TEST_EMPTY-dflt)\n"
        f"env = E=$(CORRAL_TEST_UNSET-dflt)\nenv = F=@({tmp_path}/name.txt)\n",
    )
    assert app_of(doc_of(path)).environment == {
        "A": "/srv/x", "B": "", "C": "dflt", "D": "", "E": "dflt", "F": "blog"
    }  # fmt: skip
    path = write(tmp_path, "[uwsgi]\nmodule = app\nenv = X=@(exec://id)\n")
    assert "only a file path is read" in error_of(path)


def test_includes_in_place(tmp_path):
    write(tmp_path, "[uwsgi]\nprocesses = 3\nthreads = 2\n[extra]\nmax-requests = 9\n", "base.ini")
    path = write(
        tmp_path,
        "[uwsgi]\nmodule = app\nthreads = 8\nini = base.ini\nini = :more\nprocesses = 6\n"
        "[more]\nini = base.ini:extra\n",
    )
    app = app_of(doc_of(path))
    assert (app.processes, app.threads, app.max_requests) == (6, 2, 9)
    write(tmp_path, "[uwsgi]\nini = loop.ini\n", "loop.ini")
    assert "a cycle" in error_of(tmp_path / "loop.ini")


def test_config_logic_is_refused(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\nif-env = VIRTUAL_ENV\nhome = %(_)\nendif =\n")
    assert error_of(path) == (
        f"{path}:3: if-env: uWSGI's config logic (if-*, for, endif...) is not supported: write "
        "the options it would apply"
    )


# -- the application ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "module", "callable_", "factory"),
    [("module = pkg.wsgi", "pkg.wsgi", None, False),
     ("module = pkg.wsgi:app", "pkg.wsgi", "app", False),
     ("module = pkg.wsgi\ncallable = app", "pkg.wsgi", "app", False),
     ("callable = app\nwsgi = pkg.wsgi", "pkg.wsgi", "app", False),
     ("module = django.core.handlers.wsgi:WSGIHandler()", "django.core.handlers.wsgi",
      "WSGIHandler", True),
     ("module = pkg:Factory( )", "pkg", "Factory", True)],
)  # fmt: skip
def test_module_forms(tmp_path, lines, module, callable_, factory):
    app = app_of(doc_of(write(tmp_path, f"[uwsgi]\n{lines}\n")))
    assert (app.module, app.callable, app.factory) == (module, callable_, factory)


def test_a_factory_with_arguments_is_passed_on_as_app(tmp_path):
    """`module:factory(args)` is APP's own syntax (Gunicorn's): the ini hands it on unchanged,
    and APP's parser calls the factory with those literal arguments."""
    path = write(tmp_path, "[uwsgi]\nmodule = pkg:create_app('prod')\n")
    app = app_of(doc_of(path))
    assert (app.module, app.callable) == ("pkg", "create_app")
    assert (app.factory.args, app.factory.kwargs) == (["prod"], {})


def test_wsgi_file(tmp_path):
    app = app_of(
        doc_of(write(tmp_path, "[uwsgi]\nwsgi-file = /srv/site/wsgi.py\ncallable = app\n"))
    )
    assert (app.module, app.callable, app.path) == ("wsgi", "app", ["/srv/site"])
    path = write(tmp_path, "[uwsgi]\nwsgi-file = /srv/site/django.wsgi\n")
    assert "must be NAME.py" in error_of(path)


def test_no_module_with_a_callable_is_an_error(tmp_path):
    assert "needs module or wsgi-file" in error_of(write(tmp_path, "[uwsgi]\ncallable = app\n"))


# -- processes, logs, the rest of the mapping ----------------------------------------------------


def test_idle_and_cheaper_make_a_dynamic_pool(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\nprocesses = 8\ncheaper = 2\n")
    assert app_of(doc_of(path)).processes == Processes(max=8, spare=2, idle_timeout=15.0)
    path = write(tmp_path, "[uwsgi]\nmodule = app\nprocesses = 2\ncheaper = 2\n")
    assert "expected fewer than processes (2), got 2" in error_of(path)


def test_request_log_follows_logto_unless_disabled(tmp_path):
    doc = doc_of(write(tmp_path, "[uwsgi]\nmodule = app\n"))
    assert doc.access_log.path == "-" and doc.settings.error_logfile == "-"
    doc = doc_of(write(tmp_path, "[uwsgi]\nmodule = app\nlogto = /tmp/x.log\ndisable-logging\n"))
    assert doc.access_log.path is None and doc.settings.error_logfile == "/tmp/x.log"
    doc = doc_of(write(tmp_path, "[uwsgi]\nmodule = app\n"), "--access-logfile", "/tmp/a.log")
    assert doc.access_log.path == "/tmp/a.log"


def test_every_mapped_scalar(tmp_path):
    path = write(
        tmp_path,
        "[uwsgi]\nmodule = app\nthreads = 4\nharakiri = 25\nmax-requests = 7\n"
        "reload-on-rss = 300\nmax-worker-lifetime = 3600\nworker-reload-mercy = 12\n"
        "limit-post = 1048576\npidfile = /tmp/app.pid\nlisten = 512\npy-autoreload = 1\n"
        "touch-reload = /tmp/touch\nbuffer-size = 65535\npost-buffering = 4096\n",
    )
    doc = doc_of(path)
    app, settings = app_of(doc), doc.settings
    assert (app.threads, app.max_requests, app.max_worker_memory) == (4, 7, 300)
    assert (app.max_worker_lifetime, settings.timeout, settings.graceful_timeout) == (
        3600.0,
        25.0,
        12.0,
    )
    assert (settings.limit_request_body, settings.pid, settings.backlog) == (
        1048576,
        "/tmp/app.pid",
        512,
    )
    assert settings.reload is True and settings.touch_reload == ["/tmp/touch"]
    assert (settings.limit_request_head, settings.body_buffer_size) == (65535, 4096)


def test_a_bad_number_names_the_line(tmp_path):
    path = write(tmp_path, "[uwsgi]\nmodule = app\nprocesses = four\n")
    assert error_of(path) == f'{path}:3: processes: expected a whole number, got "four"'
    path = write(tmp_path, "[uwsgi]\nmodule = app\nthreads = 0\n")
    assert error_of(path) == f"{path}:3: threads: expected int >= 1, got 0"


def test_every_documented_option_is_in_one_table_only():
    assert not (set(MAPPED) & set(ACCEPTED)) and not (set(MAPPED) & set(UNSUPPORTED))
    assert not (set(ACCEPTED) & set(UNSUPPORTED))
    for key in ("http", "http-socket", "http11-socket", "socket", "uwsgi-socket", "chmod-socket",
                "module", "wsgi-file", "callable", "chdir", "pythonpath", "env", "virtualenv",
                "home", "processes", "workers", "threads", "harakiri", "max-requests",
                "reload-on-rss", "idle", "touch-reload", "buffer-size", "post-buffering",
                "limit-post", "uid", "gid", "pidfile", "logto", "disable-logging", "lazy-apps",
                "listen", "emperor"):  # fmt: skip
        assert key in MAPPED, key
    for key in ("master", "enable-threads", "die-on-term", "vacuum"):
        assert key in ACCEPTED, key


# -- warnings: one line per option corral does not act on ---------------------------------------


def test_unsupported_and_unknown_options_warn_once_each(tmp_path):
    path = write(
        tmp_path,
        "[uwsgi]\nmodule = app\nstats = 127.0.0.1:9191\nstats = :9192\nproceses = 4\n"
        "project = blog\nchdir = /srv/%(project)\nunused = 1\nmaster = true\nplugins = python3\n"
        "enable-threads\nvacuum = true\ndie-on-term = true\n",
    )
    assert warnings_of(path) == [
        f"{path}:3: stats: not supported: the control API's /status and /metrics "
        "(--control unix:PATH)",
        f'{path}:5: proceses: unknown uWSGI option, ignored (did you mean "processes"?)',
        f"{path}:8: unused: unknown uWSGI option, ignored",
    ]


@pytest.mark.parametrize(
    ("line", "says"),
    [("master = false", "corral always runs a master process"),
     ("die-on-term = false", "TERM stops corral gracefully"),
     ("plugins = python3,php", "no plugin is loaded"),
     ("daemonize = /var/log/app.log", "corral stays in the foreground")],
)  # fmt: skip
def test_values_corral_cannot_honour_warn(tmp_path, line, says):
    found = warnings_of(write(tmp_path, f"[uwsgi]\nmodule = app\n{line}\n"))
    assert len(found) == 1 and says in found[0] and found[0].startswith(f"{tmp_path}/site.ini:3:")


def test_emperor_is_kept_for_emperor_mode_and_not_beside_an_application(tmp_path):
    path = write(tmp_path, "[uwsgi]\nemperor = %d/vassals\nmaster = true\n")
    ini = read_ini(str(path))
    assert ini.emperor == f"{tmp_path}//vassals"
    assert ini.warnings == []
    path = write(tmp_path, "[uwsgi]\nmodule = app\nemperor = /etc/uwsgi/vassals\n")
    assert error_of(path).endswith(
        "an emperor's file serves its vassals, not an application of its own: move the "
        "application to a vassal file"
    )


# -- https (issue 33) -----------------------------------------------------------------------


def test_https_is_an_https_listener_with_the_tls_settings(tmp_path):
    path = write(
        tmp_path,
        "[uwsgi]\nmodule = app\nhttps = 127.0.0.1:8443,site.pem,site.key,ECDHE+AESGCM,!ca.pem\n",
    )
    doc = doc_of(path)
    assert list(doc.listeners) == ["127.0.0.1:8443"]
    settings = doc.settings
    assert (settings.certfile, settings.keyfile) == ("site.pem", "site.key")
    assert (settings.ciphers, settings.ca_certs, settings.cert_reqs) == (
        "ECDHE+AESGCM",
        "ca.pem",
        1,
    )
    path = write(tmp_path, "[uwsgi]\nmodule = app\nhttps-socket = :8443,c.pem,k.pem,,ca.pem\n")
    doc = doc_of(path)
    assert (doc.settings.ca_certs, doc.settings.cert_reqs, doc.settings.ciphers) == (
        "ca.pem",
        2,
        None,
    )


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("https = :8443,c.pem\n", "expected ADDRESS,CERT,KEY[,CIPHERS[,CLIENT_CA]]"),
        ("https = :8443,c.pem,k.pem\nhttp = :8080\nhttp-to-https = :8081\n",
         "site.ini:5: http-to-https: beside plain http listeners: corral's https_redirect "
         "redirects every plain listener"),
        ("http-to-https = :8081\n", "redirects to HTTPS: give certfile and keyfile"),
    ],
)  # fmt: skip
def test_https_mistakes_are_one_line(tmp_path, lines, message):
    path = write(tmp_path, "[uwsgi]\nmodule = app\n" + lines)
    assert message in error_of(path)


def test_http_beside_https_is_plain_and_http_to_https_redirects(tmp_path):
    path = write(
        tmp_path,
        "[uwsgi]\nmodule = app\nhttp = 127.0.0.1:8080\nhttps = 127.0.0.1:8443,c.pem,k.pem\n",
    )
    doc = doc_of(path)
    assert {key: listener.tls for key, listener in doc.listeners.items()} == {
        "127.0.0.1:8443": UNSET,  # the settings' certificate
        "127.0.0.1:8080": False,
    }
    assert doc.listeners["127.0.0.1:8080"].pass_ == "applications/app"
    path = write(
        tmp_path,
        "[uwsgi]\nmodule = app\nhttps = 127.0.0.1:8443,c.pem,k.pem\n"
        "http-to-https = 127.0.0.1:8080\n",
    )
    doc = doc_of(path)
    redirect = doc.listeners["127.0.0.1:8080"]
    assert (redirect.tls, redirect.pass_) == (False, "routes/https_redirect")
    first, rest = doc.routes["https_redirect"]
    assert first["match"] == {"method": ["GET", "HEAD"]}
    assert first["action"] == {"return": 301, "location": "https://$host:8443$request_uri"}
    assert rest["action"] == {"return": 308, "location": "https://$host:8443$request_uri"}

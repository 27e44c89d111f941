"""corral.apps.loader.asgi_kind and choose_interface: an ASGI application is told from a WSGI
one when it is loaded, and the ``interface`` setting decides with it (the integration tests
serve them: test_conformance.py, test_asgi.py). What a failed import shows: the application's
frames only, its chained exceptions too (the one-line failures are test_cli_server.py's), and
the one wording every part of corral names a failed application with."""

from __future__ import annotations

import functools
import json
import re
import sys
import textwrap

import pytest

from corral.apps.loader import (
    AppLoadError,
    application_traceback,
    asgi_kind,
    choose_interface,
    describe_load_failure,
    load_app,
    load_failure,
)
from corral.config.document import EntryPoint


async def coroutine(scope, receive, send):
    pass


class AsyncCall:
    async def __call__(self, scope, receive, send):
        pass


class Asgi2:
    def __init__(self, scope):
        self.scope = scope

    async def __call__(self, receive, send):
        pass


def wsgi(environ, start_response):
    return []


class WsgiClass:
    """PEP 3333's class form: the class is called, the instance iterated."""

    def __init__(self, environ, start_response):
        pass

    def __iter__(self):
        return iter([])


class WsgiCallable:
    def __call__(self, environ, start_response):
        return []


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        (coroutine, "a coroutine function"),
        (functools.partial(coroutine), "a coroutine function"),
        (AsyncCall().__call__, "a coroutine function"),
        (AsyncCall(), "an object whose __call__ is async def"),
        (Asgi2, "a class whose __call__ is async def"),
        (wsgi, None),
        (WsgiClass, None),
        (WsgiCallable(), None),
        (WsgiCallable, None),
        (functools.partial(wsgi), None),
    ],
)
def test_asgi_kind(target, kind):
    assert asgi_kind(target) == kind


@pytest.mark.parametrize(
    ("interface", "protocol", "target", "chosen"),
    [
        ("auto", "wsgi", coroutine, "asgi"),
        ("auto", "wsgi", AsyncCall(), "asgi"),
        ("auto", "wsgi", Asgi2, "asgi"),
        ("auto", "wsgi", wsgi, "wsgi"),
        ("auto", "asgi", wsgi, "asgi"),  # -k uvicorn.workers.UvicornWorker
        ("wsgi", "wsgi", coroutine, "wsgi"),
        ("wsgi", "asgi", coroutine, "wsgi"),  # an explicit interface wins
        ("asgi", "wsgi", WsgiCallable(), "asgi"),
    ],
)
def test_choose_interface(interface, protocol, target, chosen):
    assert choose_interface(interface, protocol, target) == chosen


CHAINED = """\
try:
    import corral_test_not_installed
except ImportError as exc:
    raise RuntimeError("needs corral_test_not_installed") from exc
"""


def test_a_chained_import_failure_shows_each_exception_with_the_application_s_frames(
    tmp_path, monkeypatch
):
    (tmp_path / "chained_app.py").write_text(CHAINED)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError) as raised:
        load_app("chained_app", None)
    sys.modules.pop("chained_app", None)
    path = tmp_path / "chained_app.py"
    assert application_traceback(raised.value) == textwrap.dedent(f"""\
        Traceback (most recent call last):
          File "{path}", line 2, in <module>
            import corral_test_not_installed
        ModuleNotFoundError: No module named 'corral_test_not_installed'

        The above exception was the direct cause of the following exception:

        Traceback (most recent call last):
          File "{path}", line 4, in <module>
            raise RuntimeError("needs corral_test_not_installed") from exc
        RuntimeError: needs corral_test_not_installed""")
    assert describe_load_failure(raised.value) == (
        f'RuntimeError: needs corral_test_not_installed (File "{path}", line 4, in <module>)'
    )


BAD_JSON = """\
import json

SETTINGS = json.loads("{'port': 80}")
"""


def test_the_one_line_names_the_application_s_own_line_not_the_library_it_called(
    tmp_path, monkeypatch
):
    """The import raises inside json/decoder.py: the line points at the application's call,
    the traceback still shows where it ended up."""
    (tmp_path / "bad_json_app.py").write_text(BAD_JSON)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError) as raised:
        load_app("bad_json_app", None)
    sys.modules.pop("bad_json_app", None)
    path = tmp_path / "bad_json_app.py"
    what = "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes"
    assert describe_load_failure(raised.value) == (
        f'{what}: line 1 column 2 (char 1) (File "{path}", line 3, in <module>)'
    )
    shown = application_traceback(raised.value)
    assert shown is not None and f"{json.decoder.__file__}" in shown


def test_with_no_frame_outside_the_libraries_the_last_frame_is_named(tmp_path, monkeypatch):
    """An application installed as a package (its module in a site-packages directory, as in
    a --home virtualenv): its last frame is named rather than none."""
    packages = tmp_path / "lib" / "site-packages"
    packages.mkdir(parents=True)
    (packages / "installed_bad_json_app.py").write_text(BAD_JSON)
    monkeypatch.syspath_prepend(str(packages))
    with pytest.raises(ValueError) as raised:
        load_app("installed_bad_json_app", None)
    sys.modules.pop("installed_bad_json_app", None)
    decoder = json.decoder.__file__
    said = describe_load_failure(raised.value)
    assert re.search(rf'\(File "{re.escape(decoder)}", line \d+, in raw_decode\)$', said), said


def test_a_module_that_is_not_there_is_one_line_without_a_traceback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AppLoadError) as raised:
        load_app("corral_test_blogg.wsgi", None)
    assert str(raised.value) == (
        f"No module named 'corral_test_blogg' (not in the working directory {tmp_path} nor on "
        "sys.path)"
    )
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert application_traceback(raised.value) is None


def entry(module: str, target: str = "") -> EntryPoint:
    return EntryPoint(target, module, None, "")


@pytest.mark.parametrize(
    ("name", "entry_points", "said"),
    [
        ("blog.wsgi", [entry("blog.wsgi")], "application blog.wsgi failed to load"),  # the CLI's
        ("blog", [entry("blog.wsgi")], "application blog (blog.wsgi) failed to load"),  # Unit's
        ("site", [entry("a", "x"), entry("b", "y"), entry("a", "z")], "application site (a, b)"),
        ("a", [entry("a", "x"), entry("b", "y")], "application a (b) failed to load"),
    ],
)
def test_a_failed_application_is_named_as_the_document_names_it_with_its_modules(
    name, entry_points, said
):
    assert load_failure(name, entry_points, "boom").startswith(f"{said}")
    assert load_failure(name, entry_points, "boom").endswith(" failed to load: boom")
    assert load_failure(name, entry_points).endswith(" failed to load:")  # heads a traceback

"""corral.hooks without a server: loading real files, Gunicorn's post_request forms, call()
bookkeeping and logging, and the request view. The processes are in
tests/integration/test_hooks.py."""

from __future__ import annotations

import logging
import sys
import textwrap
from pathlib import Path

import pytest

from corral.hooks import HookError, Hooks, RequestView
from corral.http.head import RequestHead


def load(tmp_path: Path, source: str) -> Hooks:
    path = tmp_path / "hooks.py"
    path.write_text(textwrap.dedent(source))
    hooks = Hooks()
    hooks.load(str(path))
    return hooks


def test_only_gunicorn_hook_names_are_taken(tmp_path):
    hooks = load(
        tmp_path,
        """
        bind = "0.0.0.0:8000"
        workers = 4
        def helper(): pass
        def on_starting(server): pass
        """,
    )
    assert set(hooks.functions) == {"on_starting"}
    assert "corral_hooks" in sys.modules  # as dataclasses and pickle need


@pytest.mark.parametrize(
    ("definition", "passed"),
    [
        (
            "def post_request(worker, req, env, resp): seen.append([worker, req, env, resp])",
            ["w", "r", "e", "s"],
        ),
        (
            "def post_request(worker, req, environ): seen.append([worker, req, environ])",
            ["w", "r", "e"],
        ),
        ("def post_request(worker, req): seen.append([worker, req])", ["w", "r"]),
        ("def post_request(*args): seen.append(list(args))", ["w", "r", "e", "s"]),
    ],
)
def test_post_request_takes_gunicorns_shorter_forms(tmp_path, definition, passed):
    hooks = load(tmp_path, f"seen = []\n{definition}\n")
    hooks.functions["post_request"]("w", "r", "e", "s")
    assert sys.modules["corral_hooks"].seen == [passed]


def test_a_hook_with_too_few_parameters_is_refused(tmp_path):
    with pytest.raises(HookError, match=r"post_request must accept 4 arguments"):
        load(tmp_path, "def post_request(worker): pass\n")
    with pytest.raises(HookError, match=r"on_exit must accept 1 argument\(s\) \(server\)"):
        load(tmp_path, "def on_exit(): pass\n")


def test_call_logs_what_a_hook_raises_and_goes_on(tmp_path, caplog):
    hooks = load(
        tmp_path,
        """
        def nworkers_changed(server, new_value, old_value):
            raise ValueError(f"{new_value} after {old_value}")
        """,
    )
    logging.getLogger("corral").propagate = True  # to caplog
    try:
        with caplog.at_level(logging.ERROR, logger="corral"):
            hooks.call("nworkers_changed", 2)
            hooks.call("nworkers_changed", 3)
            hooks.call("on_exit")  # not defined: nothing
    finally:
        logging.getLogger("corral").propagate = False
    assert [r.getMessage() for r in caplog.records] == [
        "hook nworkers_changed failed: ValueError: 2 after None",
        "hook nworkers_changed failed: ValueError: 3 after 2",
    ]
    assert all(r.exc_info for r in caplog.records)


@pytest.mark.parametrize(
    ("target", "path", "query", "fragment"),
    [
        (b"/a/b?x=1&y=2", "/a/b", "x=1&y=2", ""),
        (b"/a%20b?q#frag", "/a%20b", "q", "frag"),
        (b"//double/slash?q", "//double/slash", "q", ""),
        (b"http://example.com/abs?z=9", "/abs", "z=9", ""),
        (b"*", "*", "", ""),
    ],
)
def test_the_request_view_splits_the_target_as_gunicorn(target, path, query, fragment):
    head = RequestHead(
        "GET", target, "1.0", [(b"Host", b"h"), (b"x-Mixed", b"V")], False, None, False, False
    )
    req = RequestView(head, ("127.0.0.1", 5))
    assert (req.path, req.query, req.fragment) == (path, query, fragment)
    assert req.uri == target.decode()
    assert req.version == (1, 0)
    assert req.headers == [("HOST", "h"), ("X-MIXED", "V")]
    assert (req.remote_addr, req.scheme) == (("127.0.0.1", 5), "http")

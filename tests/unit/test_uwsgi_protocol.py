"""The uwsgi binary protocol's parser (corral.http.uwsgi), sans I/O, and its environ.

The corpus (tests/corpus/uwsgi, written by make_uwsgi_corpus.py) is replayed as the HTTP one
is: each packet whole, split in two at every byte and one byte at a time, through the sink the
HTTP parser reports to. Random packets and random bytes check that nothing but an HttpError
ever leaves `feed`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.apps.wsgi.environ import connection_environ, uwsgi_environ
from corral.http.errors import HttpError
from corral.http.head import Limits
from corral.http.uwsgi import UwsgiHead, UwsgiParser, packet
from tests.unit.test_corpus import MODES, Recorder, feeds, generated_and_on_disk

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
UWSGI = CORPUS / "uwsgi"


def cases(kind: str) -> list[str]:
    return sorted(path.stem for path in (UWSGI / kind).glob("*.uwsgi"))


def load(kind: str, name: str) -> tuple[bytes, dict]:
    data = (UWSGI / kind / f"{name}.uwsgi").read_bytes()
    return data, json.loads((UWSGI / kind / f"{name}.json").read_text("ascii"))


def replay(pieces: list[bytes], limits: Limits) -> tuple[Recorder, HttpError | None, bool]:
    recorder = Recorder()
    parser = UwsgiParser(recorder, limits)
    try:
        for piece in pieces:
            parser.feed(piece)
    except HttpError as error:
        return recorder, error, parser.ended
    return recorder, None, parser.ended


def described(recorder: Recorder) -> dict:
    """The one request the events report, in the corpus's JSON shape; checks their order."""
    kinds = [event[0] for event in recorder.events]
    assert kinds[0] == "request" and kinds[-1] == "end", kinds
    assert set(kinds[1:-1]) <= {"body"}, kinds
    head: UwsgiHead = recorder.events[0][1]
    assert head.version == "1.0" and head.keep_alive is False  # framed for HTTP/1.0, closed
    assert not head.chunked and not head.expect_continue
    return {
        "method": head.method,
        "target": head.target.decode("latin-1"),
        "protocol": head.protocol,
        "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in head.headers],
        "content_length": head.content_length,
        "body": b"".join(event[1] for event in recorder.events[1:-1]).decode("latin-1"),
        "scheme": head.scheme,
        "client": head.client,
        "vars": head.vars,
    }


def test_corpus_files_are_what_the_generator_writes():
    files, on_disk = generated_and_on_disk(CORPUS / "make_uwsgi_corpus.py", UWSGI)
    assert sorted(on_disk) == sorted(files), "run python tests/corpus/make_uwsgi_corpus.py"
    assert [name for name, data in files.items() if on_disk[name] != data] == []


def test_corpus_covers_every_status():
    assert len(cases("valid")) >= 15 and len(cases("invalid")) >= 20
    statuses = {load("invalid", name)[1]["status"] for name in cases("invalid")}
    assert statuses == {400, 413, 414, 431}


def test_replay_detects_a_wrong_expectation():
    data, spec = load("valid", "nginx_get")
    recorder, error, _ = replay([data], Limits())
    assert error is None and described(recorder) == spec["request"]
    changed = data.replace(b"GET", b"PUT")
    recorder, error, _ = replay([changed], Limits())
    assert error is None and described(recorder) != spec["request"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", cases("valid"))
def test_valid(name: str, mode: str):
    data, spec = load("valid", name)
    limits = Limits(**spec.get("limits", {}))
    failures = []
    for label, pieces in feeds(data, mode):
        recorder, error, ended = replay(pieces, limits)
        if error is not None:
            failures.append(f"{label}: {error.status} {error}")
        elif not ended:
            failures.append(f"{label}: not ended")
        elif (got := described(recorder)) != spec["request"]:
            failures.append(f"{label}: parsed {got}")
    assert not failures, f"{len(failures)} failing feeds, first: {failures[0]}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", cases("invalid"))
def test_invalid(name: str, mode: str):
    data, spec = load("invalid", name)
    limits = Limits(**spec.get("limits", {}))
    failures = []
    for label, pieces in feeds(data, mode):
        recorder, error, _ = replay(pieces, limits)
        if error is None:
            failures.append(f"{label}: no error; events {recorder.events}")
        elif error.status != spec["status"]:
            failures.append(f"{label}: status {error.status} ({error})")
        elif recorder.events:
            failures.append(f"{label}: reported {recorder.events} before the error")
    assert not failures, f"{len(failures)} failing, first: {failures[0]} ({spec['why']})"


def test_nothing_is_read_after_the_request():
    recorder = Recorder()
    parser = UwsgiParser(recorder, Limits())
    parser.feed(packet({"REQUEST_METHOD": "GET"}))
    assert parser.ended and [e[0] for e in recorder.events] == ["request", "end"]
    parser.feed(b"\xff\xff\xff\xff garbage")  # never parsed: no error, no event
    assert len(recorder.events) == 2


def test_the_head_is_counted_for_the_header_timeout():
    """`head_bytes` tells the connection a request was begun (408) rather than never sent."""
    parser = UwsgiParser(Recorder(), Limits())
    assert parser.head_bytes == 0
    parser.feed(b"\x00\x10")
    assert parser.head_bytes == 2


# -- random input: an HttpError or a request, nothing else --------------------------------------

_NAMES = st.sampled_from(
    ["REQUEST_METHOD", "REQUEST_URI", "PATH_INFO", "QUERY_STRING", "CONTENT_LENGTH", "HTTPS",
     "UWSGI_SCHEME", "REMOTE_ADDR", "SERVER_PROTOCOL", "HTTP_HOST", "HTTP_COOKIE", "HTTP_X"]
)  # fmt: skip
_VARS = st.lists(st.tuples(_NAMES | st.binary(max_size=8), st.binary(max_size=12)), max_size=12)


@settings(max_examples=400, deadline=None)
@given(_VARS, st.binary(max_size=40), st.integers(0, 255), st.integers(1, 9), st.data())
def test_random_packets_never_raise_anything_but_http_errors(variables, body, mod1, cut, data):
    raw = packet(variables, body, modifier1=mod1 if data.draw(st.booleans()) else 0)
    if data.draw(st.booleans()):  # and a corrupted copy
        position = data.draw(st.integers(0, len(raw) - 1))
        raw = raw[:position] + bytes([data.draw(st.integers(0, 255))]) + raw[position + 1 :]
    limits = Limits(head=data.draw(st.sampled_from([0, 16, 64])), body=30)
    pieces = [raw[i : i + cut] for i in range(0, len(raw), cut)]
    recorder, error, ended = replay(pieces, limits)
    if error is None and ended:
        described(recorder)  # one well-ordered request


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise_anything_but_http_errors(raw):
    recorder, error, ended = replay([raw], Limits())
    if error is None and ended:
        described(recorder)


# -- the environ -----------------------------------------------------------------------------------


def _environ(variables, body=b"") -> dict:
    recorder = Recorder()
    UwsgiParser(recorder, Limits()).feed(packet(variables, body))
    head = recorder.events[0][1]
    base = connection_environ(
        "/run/app.sock",
        None,
        multithread=False,
        multiprocess=True,
        file_wrapper=None,
        errors=None,
        http=False,
    )
    return uwsgi_environ(base, head, "BODY")


def test_environ_is_the_proxys_vars_with_the_servers_wsgi_keys():
    data, _ = load("valid", "nginx_get")
    recorder = Recorder()
    UwsgiParser(recorder, Limits()).feed(data)
    base = connection_environ(
        "/run/app.sock",
        None,
        multithread=True,
        multiprocess=True,
        file_wrapper=None,
        errors=None,
        http=False,
    )
    environ = uwsgi_environ(base, recorder.events[0][1], "BODY")
    for key in ("REQUEST_METHOD", "QUERY_STRING", "REQUEST_URI", "PATH_INFO", "SERVER_NAME"):
        assert environ[key] == recorder.events[0][1].vars[key]
    assert environ["REMOTE_ADDR"] == "203.0.113.7" and environ["SERVER_PORT"] == "80"
    assert environ["PATH_INFO"] == "/a b"  # nginx's decoded path, as given
    assert environ["RAW_URI"] == "/a%20b?x=1"
    assert environ["HTTP_USER_AGENT"] == "curl/7.88.1"
    assert "CONTENT_LENGTH" not in environ and "CONTENT_TYPE" not in environ  # empty: absent
    assert environ["wsgi.url_scheme"] == "http" and environ["wsgi.input"] == "BODY"
    assert environ["wsgi.multithread"] is True and environ["SCRIPT_NAME"] == ""


def test_environ_keeps_the_servers_wsgi_keys_over_the_vars():
    environ = _environ({"REQUEST_METHOD": "GET", "wsgi.errors": "x", "wsgi.multiprocess": "no"})
    assert environ["wsgi.errors"] is not None and environ["wsgi.errors"] != "x"
    assert environ["wsgi.multiprocess"] is True


def test_environ_from_a_minimal_packet():
    environ = _environ({"REQUEST_METHOD": "GET", "REQUEST_URI": "/x%2Fy?a=1"})
    assert environ["PATH_INFO"] == "/x/y" and environ["QUERY_STRING"] == "a=1"
    assert environ["SERVER_PROTOCOL"] == "HTTP/1.1" and environ["REMOTE_ADDR"] == ""
    environ = _environ({"REQUEST_METHOD": "POST", "CONTENT_LENGTH": "3", "HTTPS": "on"}, b"abc")
    assert environ["CONTENT_LENGTH"] == "3" and environ["wsgi.url_scheme"] == "https"

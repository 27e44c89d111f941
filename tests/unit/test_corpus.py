"""The raw-request corpus (tests/corpus) replayed through both builds of the parser.

Each ``.http`` file is fed whole, split in two at every byte boundary, and one
byte at a time; a recording sink collects what the parser reports. A valid file
must produce exactly the requests of its ``.json``; an invalid one must raise
the ``HttpError`` with the expected status at some point, after reporting no
more requests than the ``.json`` allows (never the bad request, when the error
is in its head). A valid file whose ``.json`` has ``environ`` must also give, for each
request, exactly those ``HTTP_*`` and ``CONTENT_*`` keys in its WSGI environ (the default
``discard_unsafe_fields``).
"""

from __future__ import annotations

import base64
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.apps.wsgi.environ import request_environ, set_unsafe_fields
from corral.http.errors import HttpError
from corral.http.head import Limits, RequestHead, RequestSink
from corral.http.parser import RequestParser

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
MODES = ("whole", "split", "bytes")


class Recorder(RequestSink):
    """A parser sink that keeps every event in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_request(self, head: RequestHead) -> None:
        self.events.append(("request", head))

    def on_body(self, chunk: bytes) -> None:
        self.events.append(("body", bytes(chunk)))

    def on_request_end(self) -> None:
        self.events.append(("end",))


class Outcome:
    def __init__(self, recorder: Recorder, error: HttpError | None, upgraded: bool) -> None:
        self.events = recorder.events
        self.error = error
        self.upgraded = upgraded

    @property
    def started(self) -> int:
        return sum(1 for event in self.events if event[0] == "request")

    @property
    def ended(self) -> int:
        return sum(1 for event in self.events if event[0] == "end")

    def environs(self) -> list[dict]:
        """The ``HTTP_*`` and ``CONTENT_*`` keys of each reported request's WSGI environ."""
        set_unsafe_fields(None)
        found = []
        for event in self.events:
            if event[0] == "request":
                environ = request_environ({}, event[1], None)
                keys = {k: v for k, v in environ.items() if k.startswith(("HTTP_", "CONTENT_"))}
                found.append(keys)
        return found

    def requests(self) -> list[dict]:
        """The reported requests in the corpus's JSON shape; checks the event order."""
        result: list[dict] = []
        body: list[bytes] | None = None
        for event in self.events:
            if event[0] == "request":
                assert body is None, f"a request began before the previous ended: {self.events}"
                head: RequestHead = event[1]
                result.append(
                    {
                        "method": head.method,
                        "target": head.target.decode("latin-1"),
                        "version": head.version,
                        "headers": [
                            [name.decode("latin-1"), value.decode("latin-1")]
                            for name, value in head.headers
                        ],
                        "body": b"",
                        "keep_alive": head.keep_alive,
                        "content_length": head.content_length,
                        "chunked": head.chunked,
                        "expect_continue": head.expect_continue,
                    }
                )
                body = []
            elif event[0] == "body":
                assert body is not None, f"body outside a request: {self.events}"
                body.append(event[1])
            else:
                assert body is not None, f"end outside a request: {self.events}"
                result[-1]["body"] = b"".join(body)
                body = None
        assert body is None, f"the last request never ended: {self.events}"
        return result


def replay(
    data: bytes, pieces: Iterator[bytes], limits: Limits, parser_class: type = RequestParser
) -> Outcome:
    """Feed ``pieces`` (which join to ``data``) to a ``parser_class`` until an error or an
    upgrade."""
    recorder = Recorder()
    parser = parser_class(recorder, limits)
    for piece in pieces:
        if parser.ended:
            break  # the connection stops feeding HTTP bytes after an upgrade
        try:
            parser.feed(piece)
        except HttpError as error:
            return Outcome(recorder, error, parser.ended)
    return Outcome(recorder, None, parser.ended)


def feeds(data: bytes, mode: str) -> Iterator[tuple[str, list[bytes]]]:
    """(label, pieces) for each way of feeding ``data`` in ``mode``."""
    if mode == "whole":
        yield "whole", [data]
    elif mode == "split":
        for cut in range(1, len(data)):
            yield f"split at {cut}", [data[:cut], data[cut:]]
    else:
        yield "byte by byte", [data[i : i + 1] for i in range(len(data))]


def make_limits(spec: dict | None) -> Limits:
    return Limits(**(spec or {}))


def expected_requests(expected: dict) -> list[dict]:
    result = []
    for request in expected["requests"]:
        request = dict(request)
        body = request["body"]
        request["body"] = (
            base64.b64decode(body["base64"]) if isinstance(body, dict) else body.encode("ascii")
        )
        result.append(request)
    return result


def cases(kind: str) -> list[str]:
    return sorted(path.stem for path in (CORPUS / kind).glob("*.http"))


def load(kind: str, name: str) -> tuple[bytes, dict]:
    data = (CORPUS / kind / f"{name}.http").read_bytes()
    expected = json.loads((CORPUS / kind / f"{name}.json").read_text("ascii"))
    return data, expected


# -- the corpus itself ----------------------------------------------------------------------------


def generated_and_on_disk(script: Path, directory: Path) -> tuple[dict, dict]:
    """What a corpus generator's ``render()`` writes, and what ``directory`` holds, by path
    relative to it (shared with the uwsgi corpus's test)."""
    spec = importlib.util.spec_from_file_location(script.stem, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    on_disk = {
        f"{kind}/{path.name}": path.read_bytes()
        for kind in ("valid", "invalid")
        for path in (directory / kind).iterdir()
    }
    return module.render(), on_disk


def test_corpus_files_are_what_the_generator_writes():
    files, on_disk = generated_and_on_disk(CORPUS / "make_corpus.py", CORPUS)
    assert sorted(on_disk) == sorted(files), "run python tests/corpus/make_corpus.py"
    stale = [name for name, data in files.items() if on_disk[name] != data]
    assert not stale, f"stale corpus files (run make_corpus.py): {stale}"


def test_corpus_is_not_empty_and_paired():
    assert len(cases("valid")) >= 30
    assert len(cases("invalid")) >= 60
    for kind in ("valid", "invalid"):
        stems = {path.stem for path in (CORPUS / kind).glob("*.json")}
        assert stems == set(cases(kind))


def test_every_http_error_status_is_covered():
    statuses = {load("invalid", name)[1]["status"] for name in cases("invalid")}
    assert statuses == {400, 405, 413, 414, 417, 431, 501, 505}


def test_replay_detects_a_wrong_expectation():
    """The comparison can fail: a changed byte gives a different parse."""
    data, expected = load("valid", "get_simple")
    outcome = replay(data, iter([data]), make_limits(None))
    assert outcome.requests() == expected_requests(expected)
    changed = data.replace(b"GET", b"PUT")
    outcome = replay(changed, iter([changed]), make_limits(None))
    assert outcome.requests() != expected_requests(expected)


# -- replays --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", cases("valid"))
def test_valid(name: str, mode: str, parser_class: type):
    data, expected = load("valid", name)
    limits = make_limits(expected.get("limits"))
    want = expected_requests(expected)
    failures = []
    for label, pieces in feeds(data, mode):
        outcome = replay(data, iter(pieces), limits, parser_class)
        if outcome.error is not None:
            failures.append(f"{label}: {outcome.error.status} {outcome.error}")
            continue
        got = outcome.requests()
        if got != want:
            failures.append(f"{label}: parsed {got}")
        elif outcome.upgraded != expected.get("upgraded", False):
            failures.append(f"{label}: upgraded={outcome.upgraded}")
        elif "environ" in expected and outcome.environs() != expected["environ"]:
            failures.append(f"{label}: environ {outcome.environs()}")
    assert not failures, f"{len(failures)} failing feeds, first: {failures[0]}\nwanted: {want}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", cases("invalid"))
def test_invalid(name: str, mode: str, parser_class: type):
    data, expected = load("invalid", name)
    limits = make_limits(expected.get("limits"))
    failures = []
    for label, pieces in feeds(data, mode):
        outcome = replay(data, iter(pieces), limits, parser_class)
        if outcome.error is None:
            failures.append(f"{label}: no error; events {outcome.events}")
        elif outcome.error.status != expected["status"]:
            failures.append(f"{label}: status {outcome.error.status} ({outcome.error})")
        elif outcome.started != expected["requests"]:
            failures.append(
                f"{label}: {outcome.started} requests reported; events {outcome.events}"
            )
        elif outcome.ended != expected["complete"]:
            failures.append(f"{label}: {outcome.ended} requests ended; events {outcome.events}")
    assert not failures, (
        f"{len(failures)} failing feeds, first: {failures[0]}\nwanted: {expected['status']} "
        f"({expected['why']})"
    )

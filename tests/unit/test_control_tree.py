"""corral.control.tree: path operations on the document's JSON form, and JSON bodies."""

import copy
import json

import msgspec
import pytest

from corral.config import ConfigError, load, validate_document
from corral.control import tree
from corral.control.tree import InvalidJson, NotAllowed, NotFound

TREE = {
    "listeners": {"127.0.0.1:8000": {"pass": "applications/blog"}},
    "applications": {"blog": {"module": "blog", "workers": 2}, "a/b": {"module": "x"}},
    "routes": [{"match": {"uri": "/x"}}, {"match": {"uri": "/y"}}],
    "settings": {"touch_reload": []},
}


@pytest.fixture
def data():
    original = copy.deepcopy(TREE)
    yield copy.deepcopy(TREE)
    assert original == TREE  # nothing here changes the module's tree


# -- paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "segments"),
    [
        ("", []),
        ("/", []),
        ("/applications", ["applications"]),
        ("/applications/", ["applications"]),
        ("/applications/blog/workers", ["applications", "blog", "workers"]),
        ("/applications/a%2Fb", ["applications", "a/b"]),
        ("/listeners/*:8000", ["listeners", "*:8000"]),
        ("/listeners/127.0.0.1%3A8000", ["listeners", "127.0.0.1:8000"]),
        ("/applications/caf%C3%A9", ["applications", "café"]),
        ("/routes/0/match/uri", ["routes", "0", "match", "uri"]),
    ],
)
def test_split(path, segments):
    assert tree.split(path) == segments


def test_split_refuses_a_segment_that_is_not_utf8():
    with pytest.raises(NotFound):
        tree.split("/applications/%FF")


@pytest.mark.parametrize(
    ("segments", "path"),
    [
        ([], "/config"),
        (["applications", "a/b", "workers"], "/config/applications/a%2Fb/workers"),
        (["listeners", "127.0.0.1:8000"], "/config/listeners/127.0.0.1:8000"),
        (["applications", "50%"], "/config/applications/50%25"),
    ],
)
def test_join_is_the_inverse_of_split(segments, path):
    assert tree.join(segments) == path
    assert tree.split(path.removeprefix("/config")) == segments


# -- GET -----------------------------------------------------------------------------------


def test_get(data):
    assert tree.get(data, []) is data
    assert tree.get(data, ["applications", "blog", "workers"]) == 2
    assert tree.get(data, ["applications", "a/b"]) == {"module": "x"}
    assert tree.get(data, ["routes", "1", "match", "uri"]) == "/y"


@pytest.mark.parametrize(
    "segments",
    [
        ["nope"],
        ["applications", "blog", "workers", "x"],  # inside a scalar
        ["routes", "2"],  # past the end
        ["routes", "-1"],
        ["routes", "01"],  # not how an index is written
        ["routes", "x"],
        ["settings", "touch_reload", "0"],
    ],
)
def test_get_missing(data, segments):
    with pytest.raises(NotFound) as caught:
        tree.get(data, segments)
    assert caught.value.status == 404
    assert caught.value.path == tree.join(segments)


# -- PUT -----------------------------------------------------------------------------------


def test_put_replaces_a_member_and_shares_the_rest(data):
    new = tree.put(data, ["applications", "blog", "workers"], 4)
    assert new["applications"]["blog"] == {"module": "blog", "workers": 4}
    assert data["applications"]["blog"]["workers"] == 2
    assert new["listeners"] is data["listeners"]  # untouched branches are shared
    assert new["applications"]["a/b"] is data["applications"]["a/b"]


def test_put_creates_a_member(data):
    new = tree.put(data, ["applications", "shop"], {"module": "shop"})
    assert list(new["applications"]) == ["blog", "a/b", "shop"]
    assert tree.put(data, ["applications", "blog", "threads"], 8)["applications"]["blog"] == {
        "module": "blog",
        "workers": 2,
        "threads": 8,
    }


def test_put_replaces_an_array_element(data):
    new = tree.put(data, ["routes", "0", "match", "uri"], "/z")
    assert [r["match"]["uri"] for r in new["routes"]] == ["/z", "/y"]
    assert tree.put(data, ["routes", "1"], {})["routes"] == [{"match": {"uri": "/x"}}, {}]


def test_put_at_the_root_is_the_value(data):
    assert tree.put(data, [], {"listeners": {}}) == {"listeners": {}}


@pytest.mark.parametrize(
    "segments",
    [
        ["nope", "x"],  # the parent must exist
        ["routes", "2"],  # an array grows by POST, not by PUT past its end
        ["applications", "blog", "workers", "x"],
    ],
)
def test_put_missing_parent(data, segments):
    with pytest.raises(NotFound):
        tree.put(data, segments, 1)


# -- POST ----------------------------------------------------------------------------------


def test_post_appends_to_an_array(data):
    new = tree.post(data, ["settings", "touch_reload"], "/tmp/touch")
    assert new["settings"]["touch_reload"] == ["/tmp/touch"]
    new = tree.post(new, ["settings", "touch_reload"], "/tmp/other")
    assert new["settings"]["touch_reload"] == ["/tmp/touch", "/tmp/other"]
    assert data["settings"]["touch_reload"] == []


@pytest.mark.parametrize("segments", [[], ["applications"], ["applications", "blog", "workers"]])
def test_post_on_anything_but_an_array_is_not_allowed(data, segments):
    with pytest.raises(NotAllowed) as caught:
        tree.post(data, segments, 1)
    assert caught.value.status == 405
    assert caught.value.allow == ("GET", "PUT", "DELETE")


def test_post_to_a_missing_array(data):
    with pytest.raises(NotFound):
        tree.post(data, ["settings", "nope"], 1)


# -- DELETE --------------------------------------------------------------------------------


def test_delete(data):
    new = tree.delete(data, ["applications", "a/b"])
    assert list(new["applications"]) == ["blog"]
    assert list(data["applications"]) == ["blog", "a/b"]
    assert tree.delete(data, ["routes", "0"])["routes"] == [{"match": {"uri": "/y"}}]
    assert tree.delete(data, []) == {}


@pytest.mark.parametrize("segments", [["nope"], ["routes", "5"], ["applications", "blog", "x"]])
def test_delete_missing(data, segments):
    with pytest.raises(NotFound):
        tree.delete(data, segments)


# -- on the real document ------------------------------------------------------------------


def test_operations_on_the_cli_document_validate_again():
    doc = load(["blog:app", "-w", "2", "-b", "127.0.0.1:8000"])
    data = msgspec.to_builtins(doc)
    assert validate_document(data) == doc
    bigger = validate_document(tree.put(data, ["applications", "blog", "processes"], 5))
    assert bigger.applications["blog"].workers == 5
    pool = {"max": 4, "spare": 2}
    dynamic = validate_document(tree.put(data, ["applications", "blog", "processes"], pool))
    blog = dynamic.applications["blog"]
    assert (blog.workers, blog.dynamic.max, blog.dynamic.idle_timeout) == (2, 4, 15)
    listener = {"pass": "applications/blog"}
    two = validate_document(tree.put(data, ["listeners", "localhost:8001"], listener))
    assert list(two.listeners) == ["127.0.0.1:8000", "127.0.0.1:8001"]  # keys normalized
    with pytest.raises(ConfigError) as caught:
        validate_document(tree.put(data, ["applications", "blog", "processes"], {"spare": -1}))
    message = str(caught.value)
    assert message == "$.applications.blog.processes.spare: expected int >= 0, got -1"
    assert tree.api_path(message) == "/config/applications/blog/processes/spare"
    with pytest.raises(ConfigError, match=r"\$\.listeners\[\"127\.0\.0\.1:8000\"\]\.pass"):
        validate_document(tree.delete(data, ["applications", "blog"]))  # listener passes to it


@pytest.mark.parametrize(
    ("message", "path"),
    [
        ("$.applications.blog.processes: expected", "/config/applications/blog/processes"),
        ('$.applications["my.app"].environment: x', "/config/applications/my.app/environment"),
        ("$.settings.http.idle_timeout: x", "/config/settings/http/idle_timeout"),
        ('$.listeners["127.0.0.1:80"].pass: x', "/config/listeners/127.0.0.1:80/pass"),
        ('$.applications["a/b"]: x', "/config/applications/a%2Fb"),
        ("$.settings.touch_reload[2]: x", "/config/settings/touch_reload/2"),
        ("$: expected an object", "/config"),
        ("several applications: not supported yet", ""),
    ],
)
def test_api_path_of_a_config_error(message, path):
    assert tree.api_path(message) == path


# -- JSON bodies ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [b"4", b'"two"', b"null", b'{"a": [1, 2]}', b"\xef\xbb\xbf{}", b" [] \n"]
)
def test_decode(body):
    assert tree.decode(body) == json.loads(body.decode("utf-8-sig"))


@pytest.mark.parametrize(
    ("body", "offset", "line", "column"),
    [
        (b'{"a": }', 6, 1, 7),
        (b'{\n  "workers": 3,\n  "threads": x\n}', 31, 3, 14),
        (b'{\n  "a": 1,\n  "b": 2,,\n}', 21, 3, 10),
        (b'{"a": 1} x', 9, 1, 10),  # trailing characters
        (b'{"a": 1}\n\n  zz', 12, 3, 3),
        (b'{"a": 1', 7, 1, 8),  # truncated: at the end
        (b"", 0, 1, 1),
        ('{"é": 1,\n "b": x}'.encode(), 16, 2, 7),  # columns count characters
        (b'"\xff"', 1, 1, 2),  # not UTF-8
    ],
)
def test_decode_errors_say_where(body, offset, line, column):
    with pytest.raises(InvalidJson) as caught:
        tree.decode(body)
    error = caught.value
    assert (error.offset, error.line, error.column) == (offset, line, column)
    assert error.status == 400
    assert f"at line {line}, column {column}" in error.detail


def test_decode_error_without_a_place():
    with pytest.raises(InvalidJson) as caught:
        tree.decode(b"1e999")
    assert caught.value.offset is None
    assert "out of range" in caught.value.detail.lower()


@pytest.mark.parametrize("depth", [tree.MAX_DEPTH + 1, 5000, 200_000])
def test_decode_refuses_a_value_nested_too_deep(depth):
    """Not a RecursionError (a 500) from the decoder or whatever walks the value later."""
    for body in (b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth):
        with pytest.raises(InvalidJson, match=f"nested deeper than {tree.MAX_DEPTH} levels"):
            tree.decode(body)


@pytest.mark.parametrize(
    ("body", "name"),
    [
        (b'{"a": 1, "a": 2}', "a"),
        (b'{"x": {"listeners": {}, "b": 1, "b": 1}}', "b"),
        (b'[1, {"k\\u00e9": 1, "k\xc3\xa9": 2}]', "k\u00e9"),  # one name, two spellings
    ],
)
def test_decode_refuses_two_members_of_one_name(body, name):
    with pytest.raises(InvalidJson) as caught:
        tree.decode(body)
    assert caught.value.detail == f"duplicate object member {json.dumps(name)}"
    assert tree.decode(b'{"a": {"b": 1}, "b": {"a": 2}}') == {"a": {"b": 1}, "b": {"a": 2}}


def test_decode_takes_a_value_at_the_depth_limit():
    depth = tree.MAX_DEPTH
    assert tree.decode(b"[" * depth + b"]" * depth) is not None
    wide = {"a": [1, {"b": [2, 3]}], "c": {"d": {"e": "f"}}}
    assert tree.decode(json.dumps(wide).encode()) == wide

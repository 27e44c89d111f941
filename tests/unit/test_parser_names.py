"""Header field names as the parser gives them: exactly the bytes sent, whatever it keeps of
names seen before (the compiled parser keeps one object per name in a bounded table, so that
the environ's lookup finds its hash computed)."""

from __future__ import annotations

from corral.http.head import Limits
from tests.cores import request_parser
from tests.unit.test_corpus import Recorder


def names_of(parser_class: type, name: bytes) -> list[bytes]:
    recorder = Recorder()
    parser_class(recorder, Limits()).feed(b"GET / HTTP/1.1\r\nHost: h\r\n" + name + b": v\r\n\r\n")
    head = recorder.events[0][1]
    return [field[0] for field in head.headers]


def test_names_are_given_as_sent_among_more_names_than_a_table_holds(parser_class) -> None:
    names = [b"X-Name-%d" % index for index in range(1000)] + [b"x-name-1", b"X-NAME-1", b"A"]
    for _ in range(2):  # the second pass finds its names' slots taken by the others
        for name in names:
            assert names_of(parser_class, name) == [b"Host", name]
        names.reverse()


def test_a_name_sent_again_is_the_same_object_in_the_compiled_parser() -> None:
    compiled = request_parser("compiled")
    first = names_of(compiled, b"X-Request-Id")[1]
    assert names_of(compiled, b"X-Request-Id")[1] is first


def test_a_field_sent_again_on_a_connection_is_the_same_object(parser_class) -> None:
    """Both parsers give a field that repeats, at its place and byte for byte, as the object
    of the request before (environ.ConnectionEnviron reuses its key and value by that)."""
    recorder = Recorder()
    parser = parser_class(recorder, Limits())
    alike = b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n"
    changed = b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 2\r\n\r\n"
    for data in (alike, alike, changed, alike):
        parser.feed(data)
    first, second, third, fourth = (
        event[1].headers for event in recorder.events if event[0] == "request"
    )
    assert second[0] is first[0] and second[1] is first[1]
    assert third[0] is first[0] and third[1] == (b"X-A", b"2") and third[1] is not first[1]
    assert fourth[1] == (b"X-A", b"1") and fourth[1] is not third[1]

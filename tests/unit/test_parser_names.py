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

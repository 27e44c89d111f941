"""The bytes of a routed ``return`` (corral.actions.respond.reply): Unit's page for 400-599,
the framing RFC 9110 allows for each status."""

from __future__ import annotations

import pytest

from corral.actions.respond import reply
from corral.http.head import RequestHead

PREFIX = "Date: Mon, 30 Nov 2026 03:31:53 GMT\r\nServer: corral\r\n"


def head(method: str = "GET") -> RequestHead:
    return RequestHead(method, b"/", "1.1", [], True, None, False, False)


def fields(data: bytes) -> list[str]:
    return data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]


@pytest.mark.parametrize("status", [100, 103, 204, 304])
def test_a_status_without_a_body_has_no_content_length(status: int) -> None:
    data = reply(status, None, head(), True, PREFIX)
    assert not [line for line in fields(data) if line.lower().startswith("content-length")]
    assert data.endswith(b"\r\n\r\n")


def test_a_redirect_has_its_location_and_an_empty_body() -> None:
    data = reply(301, "/new", head(), True, PREFIX)
    assert data.startswith(b"HTTP/1.1 301 Moved Permanently\r\n")
    assert fields(data)[-2:] == ["Location: /new", "Content-Length: 0"]
    assert data.endswith(b"\r\n\r\n")


def test_an_error_has_units_page_and_head_its_length_alone() -> None:
    page = b"<!DOCTYPE html><title>Error 404</title><p>Error 404.\r\n"
    data = reply(404, None, head(), False, PREFIX)
    assert fields(data)[-3:] == [
        "Content-Type: text/html",
        f"Content-Length: {len(page)}",
        "Connection: close",
    ]
    assert data.endswith(b"\r\n\r\n" + page)
    assert reply(404, None, head("HEAD"), False, PREFIX) == data[: -len(page)]

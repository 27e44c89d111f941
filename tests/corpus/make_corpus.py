"""Writes the raw-request corpus: ``valid/NAME.http`` + ``NAME.json``, ``invalid/...`` likewise.

The requests are written here as Python bytes literals, so every CR, LF, NUL and
bare CR is explicit and reviewable; the ``.http`` files hold those bytes exactly.
Run ``python tests/corpus/make_corpus.py`` after editing; ``--check`` only compares
(tests/unit/test_corpus.py runs the same comparison, so the files cannot drift).

Expected results (JSON):
- valid: ``{"limits": {...}?, "requests": [{method, target, version, headers,
  body, keep_alive, content_length, chunked, expect_continue}], "upgraded": bool?}``.
  ``target``, header names and values are latin-1 strings; ``body`` is text or
  ``{"base64": ...}``; ``headers`` exclude trailers and hold values without the
  optional whitespace around them (RFC 9110 5.5). ``environ`` (optional): for each
  request, the ``HTTP_*`` and ``CONTENT_*`` keys of its WSGI environ under the default
  ``discard_unsafe_fields`` (exactly those: a key not listed must be absent).
- invalid: ``{"status": int, "why": str, "limits": {...}?, "requests": int,
  "complete": int}``: the status the parser must raise, and how many requests it
  may report (``on_request``) and finish (``on_request_end``) before the error;
  a request whose head is bad is never reported.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CRLF = b"\r\n"


def req(line: bytes, *fields: bytes, body: bytes = b"") -> bytes:
    """A request: request line, fields, the empty line, then ``body`` as is."""
    return line + CRLF + b"".join(field + CRLF for field in fields) + CRLF + body


def parsed(
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    *,
    version: str = "1.1",
    body: bytes = b"",
    keep_alive: bool = True,
    content_length: int | None = None,
    chunked: bool = False,
    expect_continue: bool = False,
) -> dict:
    try:
        text: str | dict = body.decode("ascii")
    except UnicodeDecodeError:
        text = {"base64": base64.b64encode(body).decode("ascii")}
    return {
        "method": method,
        "target": target,
        "version": version,
        "headers": [[name, value] for name, value in headers],
        "body": text,
        "keep_alive": keep_alive,
        "content_length": content_length,
        "chunked": chunked,
        "expect_continue": expect_continue,
    }


HOST = ("Host", "example.com")
H = b"Host: example.com"
TE = b"Transfer-Encoding: chunked"
POST = b"POST /upload HTTP/1.1"

# -- valid requests -----------------------------------------------------------------------------

VALID: dict[str, tuple[bytes, dict]] = {}


def valid(
    name: str,
    data: bytes,
    *requests: dict,
    limits: dict | None = None,
    environ: list[dict] | None = None,
    **extra,
) -> None:
    expected: dict = {"requests": list(requests)}
    if environ is not None:
        assert len(environ) == len(requests), name
        expected["environ"] = environ
    if limits:
        expected["limits"] = limits
    expected.update(extra)
    assert name not in VALID, name
    VALID[name] = (data, expected)


valid(
    "get_simple",
    req(b"GET / HTTP/1.1", H),
    parsed("GET", "/", [HOST]),
)
valid(
    "keep_alive_11_default",
    req(b"GET /index.html HTTP/1.1", H, b"User-Agent: corpus/1", b"Accept: */*"),
    parsed(
        "GET", "/index.html", [HOST, ("User-Agent", "corpus/1"), ("Accept", "*/*")], keep_alive=True
    ),
)
valid(
    "close_11_connection_close",
    req(b"GET / HTTP/1.1", H, b"Connection: close"),
    parsed("GET", "/", [HOST, ("Connection", "close")], keep_alive=False),
)
valid(
    "close_11_close_among_tokens",
    req(b"GET / HTTP/1.1", H, b"Connection: keep-alive, close"),
    parsed("GET", "/", [HOST, ("Connection", "keep-alive, close")], keep_alive=False),
)
valid(
    "keep_alive_10_connection_keep_alive",
    req(b"GET /ka HTTP/1.0", b"Connection: keep-alive"),
    parsed("GET", "/ka", [("Connection", "keep-alive")], version="1.0", keep_alive=True),
)
valid(
    "keep_alive_10_token_case",
    req(b"GET /ka HTTP/1.0", b"Connection: Keep-Alive"),
    parsed("GET", "/ka", [("Connection", "Keep-Alive")], version="1.0", keep_alive=True),
)
valid(
    "close_10_default",
    req(b"GET / HTTP/1.0"),
    parsed("GET", "/", [], version="1.0", keep_alive=False),
)
valid(
    "close_10_with_host",
    req(b"GET /old HTTP/1.0", H, b"User-Agent: old"),
    parsed("GET", "/old", [HOST, ("User-Agent", "old")], version="1.0", keep_alive=False),
)
valid(
    "pipelined_three_gets",
    req(b"GET /1 HTTP/1.1", H) + req(b"GET /2 HTTP/1.1", H) + req(b"GET /3 HTTP/1.1", H),
    parsed("GET", "/1", [HOST]),
    parsed("GET", "/2", [HOST]),
    parsed("GET", "/3", [HOST]),
)
valid(
    "pipelined_with_bodies",
    req(POST, H, b"Content-Length: 5", body=b"first")
    + req(POST, H, TE, body=b"6\r\nsecond\r\n0\r\n\r\n")
    + req(b"GET /last HTTP/1.1", H, b"Connection: close"),
    parsed("POST", "/upload", [HOST, ("Content-Length", "5")], body=b"first", content_length=5),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Transfer-Encoding", "chunked")],
        body=b"second",
        chunked=True,
    ),
    parsed("GET", "/last", [HOST, ("Connection", "close")], keep_alive=False),
)
valid(
    "pipelined_methods",
    req(b"HEAD /h HTTP/1.1", H)
    + req(b"DELETE /d HTTP/1.1", H)
    + req(b"PUT /p HTTP/1.1", H, b"Content-Length: 2", body=b"{}")
    + req(b"PATCH /p HTTP/1.1", H, b"Content-Length: 0")
    + req(b"OPTIONS /o HTTP/1.1", H),
    parsed("HEAD", "/h", [HOST]),
    parsed("DELETE", "/d", [HOST]),
    parsed("PUT", "/p", [HOST, ("Content-Length", "2")], body=b"{}", content_length=2),
    parsed("PATCH", "/p", [HOST, ("Content-Length", "0")], content_length=0),
    parsed("OPTIONS", "/o", [HOST]),
)
valid(
    "chunked_simple",
    req(POST, H, TE, body=b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Transfer-Encoding", "chunked")],
        body=b"hello world",
        chunked=True,
    ),
)
valid(
    "chunked_extensions",
    req(
        POST,
        H,
        TE,
        body=b'4;name=value;flag\r\nWiki\r\n5;q="a;b"\r\npedia\r\n0;last=1\r\n\r\n',
    ),
    parsed(
        "POST", "/upload", [HOST, ("Transfer-Encoding", "chunked")], body=b"Wikipedia", chunked=True
    ),
)
valid(
    "chunked_trailers",
    req(
        POST,
        H,
        TE,
        b"Trailer: X-Checksum",
        body=b"3\r\nabc\r\n0\r\nX-Checksum: 900150983cd24fb0\r\nHost: evil.example\r\n\r\n",
    ),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Transfer-Encoding", "chunked"), ("Trailer", "X-Checksum")],
        body=b"abc",
        chunked=True,
    ),
)
valid(
    "chunked_hex_sizes",
    req(POST, H, TE, body=b"A\r\n0123456789\r\n00b\r\nabcdefghijk\r\n0000\r\n\r\n"),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Transfer-Encoding", "chunked")],
        body=b"0123456789abcdefghijk",
        chunked=True,
    ),
)
valid(
    "chunked_binary_data",
    req(POST, H, TE, body=b"6\r\n\x00\r\n\xff\r\x01\r\n0\r\n\r\n"),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Transfer-Encoding", "chunked")],
        body=b"\x00\r\n\xff\r\x01",
        chunked=True,
    ),
)
valid(
    "chunked_coding_name_case",
    req(POST, H, b"Transfer-Encoding: Chunked", body=b"2\r\nok\r\n0\r\n\r\n"),
    parsed("POST", "/upload", [HOST, ("Transfer-Encoding", "Chunked")], body=b"ok", chunked=True),
)
valid(
    "chunked_after_an_empty_list_element",  # (RFC 9110 5.6.1: an empty element is no coding)
    req(POST, H, b"Transfer-Encoding: , chunked", body=b"2\r\nok\r\n0\r\n\r\n"),
    parsed("POST", "/upload", [HOST, ("Transfer-Encoding", ", chunked")], body=b"ok", chunked=True),
)
valid(
    "chunked_empty_body",
    req(POST, H, TE, body=b"0\r\n\r\n"),
    parsed("POST", "/upload", [HOST, ("Transfer-Encoding", "chunked")], chunked=True),
)
valid(
    "content_length_body",
    req(POST, H, b"Content-Type: text/plain", b"Content-Length: 11", body=b"hello world"),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Content-Type", "text/plain"), ("Content-Length", "11")],
        body=b"hello world",
        content_length=11,
    ),
)
valid(
    "content_length_binary_body",
    req(POST, H, b"Content-Length: 8", body=b"\r\n\r\n\x00\xff\x80\n"),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Content-Length", "8")],
        body=b"\r\n\r\n\x00\xff\x80\n",
        content_length=8,
    ),
)
valid(
    "content_length_zero",
    req(POST, H, b"Content-Length: 0"),
    parsed("POST", "/upload", [HOST, ("Content-Length", "0")], content_length=0),
)
valid(
    "content_length_leading_zeros",
    req(POST, H, b"Content-Length: 007", body=b"1234567"),
    parsed("POST", "/upload", [HOST, ("Content-Length", "007")], body=b"1234567", content_length=7),
)
valid(
    "content_length_10",
    req(b"POST /form HTTP/1.0", b"Content-Length: 3", body=b"a=1"),
    parsed(
        "POST",
        "/form",
        [("Content-Length", "3")],
        version="1.0",
        body=b"a=1",
        keep_alive=False,
        content_length=3,
    ),
)
valid(
    "absolute_form",
    req(b"GET http://example.com:8080/p/q?x=1 HTTP/1.1", b"Host: example.com:8080"),
    parsed("GET", "http://example.com:8080/p/q?x=1", [("Host", "example.com:8080")]),
)
valid(
    "absolute_form_other_host",
    req(b"GET https://other.example/only/path HTTP/1.1", H),
    parsed("GET", "https://other.example/only/path", [HOST]),
)
valid(
    "asterisk_form",
    req(b"OPTIONS * HTTP/1.1", H),
    parsed("OPTIONS", "*", [HOST]),
)
valid(
    "absolute_form_ipv6_host",
    # RFC 3986 3.2.2: the brackets belong to the host; HTTP_HOST says it as Host would
    req(b"GET http://[::1]:8080/ HTTP/1.1", b"Host: [::1]:8080"),
    parsed("GET", "http://[::1]:8080/", [("Host", "[::1]:8080")]),
    environ=[{"HTTP_HOST": "[::1]:8080"}],
)
valid(
    "absolute_form_ipv6_host_other",
    req(b"GET http://[2001:db8::7]/p HTTP/1.1", H),
    parsed("GET", "http://[2001:db8::7]/p", [HOST]),
    environ=[{"HTTP_HOST": "[2001:db8::7]"}],
)
valid(
    "percent_encoded_path",
    req(b"GET /a%20b/%2Fc%25/%E2%82%AC HTTP/1.1", H),
    parsed("GET", "/a%20b/%2Fc%25/%E2%82%AC", [HOST]),
)
valid(
    "triple_slash_path",
    req(b"GET ///a HTTP/1.1", H),
    parsed("GET", "///a", [HOST]),
)
valid(
    "dot_segments_kept",
    req(b"GET /a/./b/../c HTTP/1.1", H),
    parsed("GET", "/a/./b/../c", [HOST]),
)
valid(
    "query_string",
    req(b"GET /search?q=a+b&x=%26&empty=&flag&a=1?2 HTTP/1.1", H),
    parsed("GET", "/search?q=a+b&x=%26&empty=&flag&a=1?2", [HOST]),
)
valid(
    "query_only_path",
    req(b"GET /?a=/b/ HTTP/1.1", H),
    parsed("GET", "/?a=/b/", [HOST]),
)
valid(
    "obs_text_value",
    req(b"GET / HTTP/1.1", H, b"X-Name: caf\xe9 \xa0\xff"),
    parsed("GET", "/", [HOST, ("X-Name", "caf\xe9 \xa0\xff")]),
)
valid(
    "utf8_value_as_bytes",
    req(b"GET / HTTP/1.1", H, "X-Name: d\u00e9j\u00e0 vu".encode()),
    parsed("GET", "/", [HOST, ("X-Name", "d\u00e9j\u00e0 vu".encode().decode("latin-1"))]),
)
valid(
    "repeated_headers",
    req(
        b"GET / HTTP/1.1",
        H,
        b"Accept: text/html",
        b"Cookie: a=1",
        b"Accept: application/json",
        b"Cookie: b=2",
    ),
    parsed(
        "GET",
        "/",
        [
            HOST,
            ("Accept", "text/html"),
            ("Cookie", "a=1"),
            ("Accept", "application/json"),
            ("Cookie", "b=2"),
        ],
    ),
)
valid(
    "header_name_case_kept",
    req(b"GET / HTTP/1.1", b"hOsT: example.com", b"x-lower: 1", b"X-UPPER: 2"),
    parsed("GET", "/", [("hOsT", "example.com"), ("x-lower", "1"), ("X-UPPER", "2")]),
)
valid(
    "header_token_chars",
    req(b"GET / HTTP/1.1", H, b"X-!#$%&'*+.^_`|~09az: v"),
    parsed("GET", "/", [HOST, ("X-!#$%&'*+.^_`|~09az", "v")]),
    environ=[{"HTTP_HOST": "example.com"}],  # a name with "_": dropped by default
)
valid(
    "header_name_any_token_char",
    # RFC 9110 5.1: field-name = token; reaches WSGI as Gunicorn maps it, "-" as "_" only
    req(b"GET / HTTP/1.1", H, b"X.Custom|Pipe: p", b"X-!#$%&'*+.^`|~09az: t", b"Content-Type: a"),
    parsed(
        "GET",
        "/",
        [HOST, ("X.Custom|Pipe", "p"), ("X-!#$%&'*+.^`|~09az", "t"), ("Content-Type", "a")],
    ),
    environ=[
        {
            "HTTP_HOST": "example.com",
            "HTTP_X.CUSTOM|PIPE": "p",
            "HTTP_X_!#$%&'*+.^`|~09AZ": "t",
            "CONTENT_TYPE": "a",
        }
    ],
)
valid(
    "header_name_underscore_dropped",
    # X_Forwarded_For would be HTTP_X_FORWARDED_FOR, as X-Forwarded-For is: spoofing
    req(b"GET / HTTP/1.1", H, b"X_Forwarded_For: 6.6.6.6", b"X-Forwarded-For: 1.2.3.4"),
    parsed("GET", "/", [HOST, ("X_Forwarded_For", "6.6.6.6"), ("X-Forwarded-For", "1.2.3.4")]),
    environ=[{"HTTP_HOST": "example.com", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}],
)
valid(
    "ows_around_value",
    req(b"GET / HTTP/1.1", H, b"X-A:   spaced  out   ", b"X-B:\ttabbed\t", b"X-C:no-space"),
    parsed("GET", "/", [HOST, ("X-A", "spaced  out"), ("X-B", "tabbed"), ("X-C", "no-space")]),
)
valid(
    "tab_inside_value",
    req(b"GET / HTTP/1.1", H, b"X-A: a\tb"),
    parsed("GET", "/", [HOST, ("X-A", "a\tb")]),
)
valid(
    "empty_value",
    req(b"GET / HTTP/1.1", H, b"X-Empty:", b"X-Blank: "),
    parsed("GET", "/", [HOST, ("X-Empty", ""), ("X-Blank", "")]),
)
valid(
    "host_empty_value",
    req(b"GET / HTTP/1.1", b"Host:"),
    parsed("GET", "/", [("Host", "")]),
)
valid(
    "host_ip_literal_and_port",
    req(b"GET / HTTP/1.1", b"Host: [::1]:8080"),
    parsed("GET", "/", [("Host", "[::1]:8080")]),
)
valid(
    "host_reg_name_characters",  # (RFC 3986 3.2.2: unreserved, sub-delims, pct-encoded)
    req(b"GET / HTTP/1.1", b"Host: my_host-1.example~%41!$&'()*+,;=:"),
    parsed("GET", "/", [("Host", "my_host-1.example~%41!$&'()*+,;=:")]),
)
valid(
    "expect_100_continue",
    req(POST, H, b"Expect: 100-continue", b"Content-Length: 5", body=b"hello"),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Expect", "100-continue"), ("Content-Length", "5")],
        body=b"hello",
        content_length=5,
        expect_continue=True,
    ),
)
valid(
    "expect_100_continue_case",
    req(POST, H, b"Expect: 100-Continue", TE, body=b"2\r\nhi\r\n0\r\n\r\n"),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Expect", "100-Continue"), ("Transfer-Encoding", "chunked")],
        body=b"hi",
        chunked=True,
        expect_continue=True,
    ),
)
valid(
    "expect_100_continue_without_body",
    req(b"GET / HTTP/1.1", H, b"Expect: 100-continue"),
    parsed("GET", "/", [HOST, ("Expect", "100-continue")], expect_continue=False),
)
valid(
    "expect_100_continue_http10",
    # RFC 9110 10.1.1: a server MUST ignore a 100-continue expectation in HTTP/1.0
    req(b"POST /upload HTTP/1.0", b"Expect: 100-continue", b"Content-Length: 2", body=b"hi"),
    parsed(
        "POST",
        "/upload",
        [("Expect", "100-continue"), ("Content-Length", "2")],
        version="1.0",
        body=b"hi",
        keep_alive=False,
        content_length=2,
        expect_continue=False,
    ),
)
valid(
    "leading_empty_line",
    CRLF + req(b"GET / HTTP/1.1", H),
    parsed("GET", "/", [HOST]),
)
valid(
    "leading_empty_lines_crlf_and_lf",
    CRLF + b"\n" + CRLF + req(b"GET / HTTP/1.1", H),
    parsed("GET", "/", [HOST]),
)
valid(
    "upgrade_websocket",
    req(b"GET /ws HTTP/1.1", H, b"Connection: Upgrade", b"Upgrade: websocket") + b"\x81\x05hello",
    parsed("GET", "/ws", [HOST, ("Connection", "Upgrade"), ("Upgrade", "websocket")]),
    upgraded=True,
)
valid(
    "request_line_at_limit",
    # "GET " + target + " HTTP/1.1" is exactly 64 bytes
    req(b"GET /" + b"a" * 50 + b" HTTP/1.1", H),
    parsed("GET", "/" + "a" * 50, [HOST]),
    limits={"request_line": 64},
)
valid(
    "fields_at_limit",
    req(b"GET / HTTP/1.1", H, b"A: 1", b"B: 2", b"C: 3", b"D: 4"),
    parsed("GET", "/", [HOST, ("A", "1"), ("B", "2"), ("C", "3"), ("D", "4")]),
    limits={"fields": 5},
)
valid(
    "field_size_at_limit",
    # name and value hold 100 bytes together
    req(b"GET / HTTP/1.1", H, b"X-Big: " + b"v" * 95),
    parsed("GET", "/", [HOST, ("X-Big", "v" * 95)]),
    limits={"field_size": 100},
)
valid(
    "body_at_limit_content_length",
    req(POST, H, b"Content-Length: 10", body=b"0123456789"),
    parsed(
        "POST", "/upload", [HOST, ("Content-Length", "10")], body=b"0123456789", content_length=10
    ),
    limits={"body": 10},
)
valid(
    "body_at_limit_chunked",
    req(POST, H, TE, body=b"4\r\n0123\r\n6\r\n456789\r\n0\r\n\r\n"),
    parsed(
        "POST",
        "/upload",
        [HOST, ("Transfer-Encoding", "chunked")],
        body=b"0123456789",
        chunked=True,
    ),
    limits={"body": 10},
)

# -- invalid requests ---------------------------------------------------------------------------

INVALID: dict[str, tuple[bytes, dict]] = {}


def invalid(
    name: str,
    data: bytes,
    status: int,
    why: str,
    *,
    limits: dict | None = None,
    requests: int = 0,
    complete: int = 0,
) -> None:
    expected: dict = {"status": status, "why": why}
    if limits:
        expected["limits"] = limits
    expected["requests"] = requests
    expected["complete"] = complete
    assert name not in INVALID, name
    INVALID[name] = (data, expected)


SMUGGLE = "RFC 9112 6.3: invalid framing is an unrecoverable error (request smuggling)"
CHUNK = "RFC 9112 7.1: chunk-size = 1*HEXDIG, then optional extensions and CRLF"

invalid(
    "te_http10",
    req(b"POST /upload HTTP/1.0", TE, body=b"3\r\nabc\r\n0\r\n\r\n"),
    400,
    "RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing",
)
invalid(
    "te_http10_keep_alive",
    req(b"POST /upload HTTP/1.0", b"Connection: keep-alive", TE, body=b"0\r\n\r\n"),
    400,
    "RFC 9112 6.1: Transfer-Encoding in HTTP/1.0 (the connection must close after)",
)
invalid(
    "te_http10_after_a_request",
    req(b"GET /first HTTP/1.1", H) + req(b"POST /upload HTTP/1.0", TE, body=b"0\r\n\r\n"),
    400,
    "RFC 9112 6.1: Transfer-Encoding in HTTP/1.0, pipelined behind a valid request",
    requests=1,
    complete=1,
)
invalid(
    "asterisk_form_get",
    req(b"GET * HTTP/1.1", H),
    400,
    "RFC 9112 3.2.4: the asterisk-form is only for a server-wide OPTIONS",
)
invalid(
    "asterisk_form_post",
    req(POST.replace(b"/upload", b"*"), H, b"Content-Length: 2", body=b"hi"),
    400,
    "RFC 9112 3.2.4: the asterisk-form is only for a server-wide OPTIONS",
)
invalid(
    "asterisk_form_head",
    req(b"HEAD * HTTP/1.1", H),
    400,
    "RFC 9112 3.2.4: the asterisk-form is only for a server-wide OPTIONS",
)
invalid(
    "cl_with_te",
    req(POST, H, b"Content-Length: 5", TE, body=b"0\r\n\r\nX"),
    400,
    "RFC 9112 6.1: Content-Length with Transfer-Encoding is rejected (" + SMUGGLE + ")",
)
invalid(
    "te_with_cl",
    req(POST, H, TE, b"Content-Length: 3", body=b"3\r\nabc\r\n0\r\n\r\n"),
    400,
    "RFC 9112 6.1: Transfer-Encoding with Content-Length, in either order",
)
invalid(
    "cl_duplicate_differing",
    req(POST, H, b"Content-Length: 3", b"Content-Length: 4", body=b"abcd"),
    400,
    "RFC 9112 6.3 item 5: differing Content-Length values",
)
invalid(
    "cl_duplicate_same",
    req(POST, H, b"Content-Length: 3", b"Content-Length: 3", body=b"abc"),
    400,
    "RFC 9110 8.6 lets a recipient reject duplicates; we do, as proxies may disagree",
)
invalid(
    "cl_list",
    req(POST, H, b"Content-Length: 3, 3", body=b"abc"),
    400,
    "RFC 9110 8.6: a list in Content-Length is not 1*DIGIT",
)
invalid(
    "cl_plus_sign",
    req(POST, H, b"Content-Length: +3", body=b"abc"),
    400,
    "RFC 9110 8.6: Content-Length = 1*DIGIT, no sign",
)
invalid(
    "cl_minus_sign",
    req(POST, H, b"Content-Length: -1", body=b"abc"),
    400,
    "RFC 9110 8.6: Content-Length = 1*DIGIT, no sign",
)
invalid(
    "cl_hex",
    req(POST, H, b"Content-Length: 0x3", body=b"abc"),
    400,
    "RFC 9110 8.6: Content-Length is decimal",
)
invalid(
    "cl_space_inside",
    req(POST, H, b"Content-Length: 1 0", body=b"abcdefghij"),
    400,
    "RFC 9110 8.6: no whitespace inside 1*DIGIT",
)
invalid(
    "cl_empty",
    req(POST, H, b"Content-Length:", body=b"abc"),
    400,
    "RFC 9110 8.6: Content-Length needs at least one digit",
)
invalid(
    "cl_overflow",
    req(POST, H, b"Content-Length: 184467440737095516160", body=b"abc"),
    400,
    "RFC 9112 6.3: a length that cannot be represented is invalid framing",
)
invalid(
    "te_gzip_alone",
    req(POST, H, b"Transfer-Encoding: gzip", body=b"abc"),
    400,
    "RFC 9112 6.3 item 4: TE in a request whose final coding is not chunked",
)
invalid(
    "te_chunked_then_gzip",
    req(POST, H, b"Transfer-Encoding: chunked, gzip", body=b"3\r\nabc\r\n0\r\n\r\n"),
    400,
    "RFC 9112 6.3 item 4: chunked must be the final coding",
)
invalid(
    "te_gzip_then_chunked",
    req(POST, H, b"Transfer-Encoding: gzip, chunked", body=b"3\r\nabc\r\n0\r\n\r\n"),
    501,
    "RFC 9112 6.1: a transfer coding the server does not implement (it decodes none)",
)
invalid(
    "te_unknown_line_then_chunked",
    req(POST, H, b"Transfer-Encoding: x-custom", b"Transfer-Encoding: chunked", body=b"0\r\n\r\n"),
    501,
    "RFC 9112 6.1: a coding before chunked, in a field line of its own",
)
invalid(
    "te_identity",
    req(POST, H, b"Transfer-Encoding: identity", body=b"abc"),
    400,
    "RFC 9112 6.3 item 4: identity is no longer a coding; final coding is not chunked",
)
invalid(
    "te_chunked_twice",
    req(POST, H, TE, TE, body=b"3\r\nabc\r\n0\r\n\r\n"),
    400,
    "RFC 9112 6.1: chunked must not be applied more than once",
)
invalid(
    "chunk_size_plus",
    req(POST, H, TE, body=b"+3\r\nabc\r\n0\r\n\r\n"),
    400,
    CHUNK,
    requests=1,
)
invalid(
    "chunk_size_minus",
    req(POST, H, TE, body=b"-3\r\nabc\r\n0\r\n\r\n"),
    400,
    CHUNK,
    requests=1,
)
invalid(
    "chunk_size_0x",
    req(POST, H, TE, body=b"0x3\r\nabc\r\n0\r\n\r\n"),
    400,
    CHUNK,
    requests=1,
)
invalid(
    "chunk_size_overflow",
    req(POST, H, TE, body=b"10000000000000003\r\nabc\r\n0\r\n\r\n"),
    400,
    "RFC 9112 7.1: a chunk size that overflows must be rejected, never wrapped",
    requests=1,
)
invalid(
    "chunk_size_space_inside",
    req(POST, H, TE, body=b"1 3\r\nabc\r\n0\r\n\r\n"),
    400,
    CHUNK,
    requests=1,
)
invalid(
    "chunk_size_leading_space",
    req(POST, H, TE, body=b" 3\r\nabc\r\n0\r\n\r\n"),
    400,
    CHUNK,
    requests=1,
)
invalid(
    "chunk_size_empty",
    req(POST, H, TE, body=b"\r\nabc\r\n0\r\n\r\n"),
    400,
    CHUNK,
    requests=1,
)
invalid(
    "chunk_size_not_hex",
    req(POST, H, TE, body=b"3g\r\nabc\r\n0\r\n\r\n"),
    400,
    CHUNK,
    requests=1,
)
invalid(
    "chunk_data_longer_than_size",
    req(POST, H, TE, body=b"3\r\nabcdef\r\n0\r\n\r\n"),
    400,
    "RFC 9112 7.1: chunk-data is exactly chunk-size octets, then CRLF",
    requests=1,
)
invalid(
    "chunk_missing_crlf",
    req(POST, H, TE, body=b"3\r\nabc0\r\n\r\n"),
    400,
    "RFC 9112 7.1: CRLF after chunk-data",
    requests=1,
)
invalid(
    "chunk_bare_lf_after_size",
    req(POST, H, TE, body=b"3\nabc\n0\n\n"),
    400,
    "RFC 9112 7.1: chunk lines end in CRLF; a bare LF is a smuggling vector",
    requests=1,
)
invalid(
    "obs_fold",
    req(b"GET / HTTP/1.1", H, b"X-A: one", b" two"),
    400,
    "RFC 9112 5.2: a server may reject obs-fold with 400; we do",
)
invalid(
    "obs_fold_tab",
    req(b"GET / HTTP/1.1", H, b"X-A: one", b"\ttwo"),
    400,
    "RFC 9112 5.2: obs-fold with a tab",
)
invalid(
    "bare_cr_in_value",
    req(b"GET / HTTP/1.1", H, b"X-A: one\rtwo"),
    400,
    "RFC 9112 2.2: a bare CR must be rejected or replaced; CR is not field-vchar",
)
invalid(
    "bare_cr_line_end",
    b"GET / HTTP/1.1\r\nHost: example.com\rX-A: b\r\n\r\n",
    400,
    "RFC 9112 2.2: a bare CR as a line ending",
)
invalid(
    "chunk_extensions_too_long",
    req(b"POST /upload HTTP/1.1", H, TE, body=b"3;" + b"x" * 120 + b"\r\nabc\r\n0\r\n\r\n"),
    400,
    "RFC 9112 7.1.1: chunk extensions are limited (here as a field: limit_request_field_size)",
    limits={"field_size": 100},
    requests=1,
)
valid(
    "chunk_extensions_at_the_limit",
    req(b"POST /upload HTTP/1.1", H, TE, body=b"3;" + b"x" * 97 + b"\r\nabc\r\n0\r\n\r\n"),
    parsed("POST", "/upload", [HOST, ("Transfer-Encoding", "chunked")], body=b"abc", chunked=True),
    limits={"field_size": 100},
)
invalid(
    "content_length_in_trailers",
    req(b"POST /upload HTTP/1.1", H, TE, body=b"3\r\nabc\r\n0\r\nContent-Length: 3\r\n\r\n"),
    400,
    "RFC 9110 6.5.1: framing fields are not for trailers (a proxy merging them would reframe)",
    requests=1,
)
invalid(
    "transfer_encoding_in_trailers",
    req(b"POST /upload HTTP/1.1", H, TE, body=b"0\r\nTransfer-Encoding: chunked\r\n\r\n"),
    400,
    "RFC 9110 6.5.1: framing fields are not for trailers (a proxy merging them would reframe)",
    requests=1,
)
invalid(
    "bare_cr_before_request_line",
    b"\rGET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
    400,
    "RFC 9112 2.2: empty lines before a request line are skipped; a bare CR is not one",
)
invalid(
    "bare_cr_between_requests",
    req(b"GET / HTTP/1.1", H) + b"\r\n\rGET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
    400,
    "RFC 9112 2.2: a bare CR among the empty lines before the second request line",
    requests=1,
    complete=1,
)
invalid(
    "bare_cr_request_line",
    b"GET / HTTP/1.1\rHost: example.com\r\n\r\n",
    400,
    "RFC 9112 2.2: a bare CR after the request line",
)
invalid(
    "bare_lf_request_line",
    b"GET / HTTP/1.1\nHost: example.com\r\n\r\n",
    400,
    "RFC 9112 2.2: we do not accept a bare LF as a line terminator (strict, as for CR)",
)
invalid(
    "bare_lf_header",
    b"GET / HTTP/1.1\r\nHost: example.com\nX-A: b\r\n\r\n",
    400,
    "RFC 9112 2.2: a bare LF ending a field line",
)
invalid(
    "nul_in_name",
    req(b"GET / HTTP/1.1", H, b"X-\x00A: b"),
    400,
    "RFC 9110 5.1: field names are tokens",
)
invalid(
    "nul_in_value",
    req(b"GET / HTTP/1.1", H, b"X-A: b\x00c"),
    400,
    "RFC 9110 5.5: NUL must be rejected in a field value",
)
invalid(
    "ctl_in_value",
    req(b"GET / HTTP/1.1", H, b"X-A: b\x01c"),
    400,
    "RFC 9110 5.5: CTLs other than HTAB are not field-vchar",
)
invalid(
    "del_in_value",
    req(b"GET / HTTP/1.1", H, b"X-A: b\x7fc"),
    400,
    "RFC 9110 5.5: DEL is not field-vchar",
)
invalid(
    "space_before_colon",
    req(b"GET / HTTP/1.1", H, b"Content-Length : 3", body=b"abc"),
    400,
    "RFC 9112 5.1: whitespace between field name and colon must be rejected with 400",
)
invalid(
    "tab_before_colon",
    req(b"GET / HTTP/1.1", H, b"X-A\t: b"),
    400,
    "RFC 9112 5.1: whitespace between field name and colon",
)
invalid(
    "space_in_name",
    req(b"GET / HTTP/1.1", H, b"X A: b"),
    400,
    "RFC 9110 5.1: field names are tokens",
)
invalid(
    "whitespace_before_first_field",
    req(b"GET / HTTP/1.1", b" Host: example.com"),
    400,
    "RFC 9112 2.2: whitespace between the start line and the first field",
)
invalid(
    "empty_field_name",
    req(b"GET / HTTP/1.1", H, b": value"),
    400,
    "RFC 9110 5.1: a field name is 1*tchar",
)
invalid(
    "field_without_colon",
    req(b"GET / HTTP/1.1", H, b"NoColonHere"),
    400,
    'RFC 9112 5: field-line = field-name ":" OWS field-value OWS',
)
invalid(
    "version_2_0",
    req(b"GET / HTTP/2.0", H),
    505,
    "RFC 9110 15.6.6: HTTP/2 is not spoken over this HTTP/1 connection",
)
invalid(
    "version_0_9_style",
    b"GET /\r\n\r\n",
    505,
    "no HTTP-version: an HTTP/0.9 request, a version we do not support",
)
invalid(
    "version_1_2",
    req(b"GET / HTTP/1.2", H),
    505,
    "RFC 9112 2.3 says SHOULD treat 1.2 as 1.1; corral refuses versions other than 1.0/1.1",
)
invalid(
    "version_3_0",
    req(b"GET / HTTP/3.0", H),
    505,
    "RFC 9110 15.6.6: major version 3 not supported",
)
invalid(
    "version_lowercase",
    req(b"GET / http/1.1", H),
    400,
    'RFC 9112 2.3: HTTP-name is %x48.54.54.50, case-sensitive "HTTP"',
)
invalid(
    "version_two_digit_minor",
    req(b"GET / HTTP/1.10", H),
    400,
    'RFC 9112 2.3: HTTP-version = HTTP-name "/" DIGIT "." DIGIT',
)
invalid(
    "version_trailing_space",
    req(b"GET / HTTP/1.1 ", H),
    400,
    "RFC 9112 3: nothing between HTTP-version and CRLF",
)
invalid(
    "missing_host_11",
    req(b"GET / HTTP/1.1", b"Accept: */*"),
    400,
    "RFC 9112 3.2: a server must answer 400 to an HTTP/1.1 request without Host",
)
for name, value, why in (
    ("host_with_space", b"a b", "a space is in no part of uri-host"),
    ("host_with_path", b"example.com/admin", "a path is not part of Host"),
    ("host_with_userinfo", b"user@example.com", "userinfo is not part of Host"),
    ("host_port_not_digits", b"example.com:80a", "port = *DIGIT"),
    ("host_unclosed_ip_literal", b"[::1", "an IP literal ends with ]"),
    ("host_bad_pct_encoding", b"exa%zzmple.com", "pct-encoded is % and two hex digits"),
):
    invalid(
        name,
        req(b"GET / HTTP/1.1", b"Host: " + value),
        400,
        f"RFC 9112 3.2: an invalid Host value is 400 ({why})",
    )
invalid(
    "two_host_headers",
    req(b"GET / HTTP/1.1", H, b"Host: evil.example"),
    400,
    "RFC 9112 3.2: more than one Host field must be answered with 400",
)
invalid(
    "two_host_headers_case",
    req(b"GET / HTTP/1.1", b"host: example.com", b"HOST: evil.example"),
    400,
    "RFC 9112 3.2: field names are case-insensitive, so this is two Host fields",
)
invalid(
    "two_host_headers_10",
    req(b"GET / HTTP/1.0", H, b"Host: evil.example"),
    400,
    "RFC 9112 3.2: more than one Host field, whatever the version",
)
invalid(
    "request_line_too_long",
    req(b"GET /" + b"a" * 51 + b" HTTP/1.1", H),
    414,
    "the request line is 65 bytes, one over limit_request_line",
    limits={"request_line": 64},
)
invalid(
    "request_line_far_too_long",
    req(b"GET /" + b"a" * 1000 + b" HTTP/1.1", H),
    414,
    "a target far over limit_request_line",
    limits={"request_line": 64},
)
invalid(
    "request_line_over_the_head_bound",
    req(b"GET /" + b"a" * 5000 + b" HTTP/1.1", H),
    414,
    "a request line longer than the whole head may be is still a too-long request line",
    limits={"request_line": 100, "fields": 5, "field_size": 100},
)
invalid(
    "too_many_fields",
    req(b"GET / HTTP/1.1", H, b"A: 1", b"B: 2", b"C: 3", b"D: 4", b"E: 5"),
    431,
    "six fields, one over limit_request_fields",
    limits={"fields": 5},
)
invalid(
    "too_many_fields_unterminated",
    b"GET / HTTP/1.1\r\nHost: example.com\r\n" + b"a:\r\n" * 20,
    431,
    "the count is a limit on memory: refuse the sixth field when it arrives, not at the end"
    " of the head (a head of tiny fields costs ~16x its size in tuples)",
    limits={"fields": 5},
)
invalid(
    "field_too_large",
    req(b"GET / HTTP/1.1", H, b"X-Big: " + b"v" * 96),
    431,
    "name and value hold 101 bytes, one over limit_request_field_size",
    limits={"field_size": 100},
)
invalid(
    "field_too_large_unterminated",
    b"GET / HTTP/1.1\r\nHost: example.com\r\nX-Big: " + b"v" * 2000,
    431,
    "an unterminated field line longer than the largest legal head (64 + 5 * 104 + 4"
    " bytes here) must be refused before it ends: the parser's own memory bound",
    limits={"request_line": 64, "field_size": 100, "fields": 5},
)
invalid(
    "trailer_field_too_large",
    req(POST, H, TE, body=b"3\r\nabc\r\n0\r\nX-Trailer: " + b"t" * 200 + b"\r\n\r\n"),
    431,
    "trailer fields are fields: limit_request_field_size bounds them too",
    limits={"field_size": 100},
    requests=1,
)
invalid(
    "too_many_trailer_fields",
    req(POST, H, TE, body=b"3\r\nabc\r\n0\r\n" + b"X-T: 1\r\n" * 10 + b"\r\n"),
    431,
    "trailer fields are fields: limit_request_fields bounds them too",
    limits={"fields": 5},
    requests=1,
)
invalid(
    "body_too_large_content_length",
    req(POST, H, b"Content-Length: 11", body=b"0123456789A"),
    413,
    "declared length one over limit_request_body: refused before any body byte",
    limits={"body": 10},
)
invalid(
    "body_too_large_chunked",
    req(POST, H, TE, body=b"6\r\n012345\r\n5\r\n6789A\r\n0\r\n\r\n"),
    413,
    "chunks adding up to one byte over limit_request_body",
    limits={"body": 10},
    requests=1,
)
invalid(
    "body_too_large_one_chunk",
    req(POST, H, TE, body=b"ffffff\r\n" + b"x" * 20),
    413,
    "a chunk size over limit_request_body: refused as soon as it is known",
    limits={"body": 10},
    requests=1,
)
invalid(
    "expect_other",
    req(POST, H, b"Expect: 200-ok", b"Content-Length: 3", body=b"abc"),
    417,
    "RFC 9110 10.1.1: an expectation other than 100-continue gets 417",
)
invalid(
    "connect_method",
    req(b"CONNECT example.com:443 HTTP/1.1", b"Host: example.com:443"),
    405,
    "a WSGI server is no tunnel: CONNECT is not allowed",
)
invalid(
    "method_invalid_char",
    req(b"G(T / HTTP/1.1", H),
    400,
    "RFC 9110 9.1: method = token; '(' is a delimiter",
)
invalid(
    "method_with_nul",
    req(b"GET\x00 / HTTP/1.1", H),
    400,
    "RFC 9110 9.1: method = token",
)
invalid(
    "space_in_target",
    req(b"GET /a b HTTP/1.1", H),
    400,
    "RFC 9112 3.2: whitespace inside the request-target must be answered 400",
)
invalid(
    "ctl_in_target",
    req(b"GET /a\x01b HTTP/1.1", H),
    400,
    "RFC 3986: control characters are not allowed in a URI",
)
invalid(
    "nul_in_target",
    req(b"GET /a\x00b HTTP/1.1", H),
    400,
    "RFC 3986: NUL is not allowed in a URI",
)
invalid(
    "tab_in_target",
    req(b"GET /a\tb HTTP/1.1", H),
    400,
    "RFC 9112 3.2: whitespace inside the request-target",
)
invalid(
    "absolute_form_unclosed_ip_literal",
    req(b"GET http://[::1/x HTTP/1.1", H),
    400,
    "RFC 3986 3.2.2: an IP-literal is closed by ']'; an invalid request-target gets 400",
)
invalid(
    "absolute_form_port_not_digits",
    req(b"GET http://example.com:http/x HTTP/1.1", H),
    400,
    "RFC 3986 3.2.3: port = *DIGIT",
)
invalid(
    "absolute_form_empty_host",
    req(b"GET http:///x HTTP/1.1", H),
    400,
    "RFC 9110 4.2.1: a recipient MUST reject an http URI with an empty host as invalid",
)
invalid(
    "absolute_form_two_userinfo",
    req(b"GET http://a@b@example.com/x HTTP/1.1", H),
    400,
    "RFC 3986 3.2: '@' ends the userinfo and may not appear in the host",
)
invalid(
    "valid_then_garbage",
    req(b"GET /ok HTTP/1.1", H) + b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n",
    400,
    "a good request, then bytes that are no request line (a TLS hello)",
    requests=1,
    complete=1,
)
invalid(
    "valid_then_smuggled_te",
    req(POST, H, b"Content-Length: 0") + req(POST, H, TE, b"Content-Length: 4", body=b"0\r\n\r\n"),
    400,
    "the first request is served; the second carries CL with TE",
    requests=1,
    complete=1,
)


# -- writing ------------------------------------------------------------------------------------


# a header [name, value] pair on one line, for reading
_PAIR = re.compile(r'\[\s+("(?:[^"\\]|\\.)*"),\s+("(?:[^"\\]|\\.)*")\s+\]')


def render() -> dict[str, bytes]:
    """Every corpus file, by path relative to this directory."""
    files: dict[str, bytes] = {}
    for kind, table in (("valid", VALID), ("invalid", INVALID)):
        for name, (data, expected) in table.items():
            files[f"{kind}/{name}.http"] = data
            text = _PAIR.sub(r"[\1, \2]", json.dumps(expected, indent=2, ensure_ascii=True))
            text += "\n"
            files[f"{kind}/{name}.json"] = text.encode("ascii")
    return files


def sync(here: Path, files: dict[str, bytes], check: bool) -> int:
    """Write ``files`` (paths relative to ``here``) and remove what else is under its valid/
    and invalid/; with ``check``, only say what is stale (exit 1). Shared with
    make_uwsgi_corpus.py."""
    stale = []
    for relative, data in files.items():
        path = here / relative
        if path.exists() and path.read_bytes() == data:
            continue
        stale.append(relative)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    for kind in ("valid", "invalid"):
        for path in sorted((here / kind).glob("*")):
            relative = f"{kind}/{path.name}"
            if relative not in files:
                stale.append(relative)
                if not check:
                    path.unlink()
    for relative in stale:
        print(("stale: " if check else "wrote: ") + relative)
    return 1 if check and stale else 0


def main(argv: list[str]) -> int:
    return sync(HERE, render(), "--check" in argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

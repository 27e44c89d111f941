"""Writes the uwsgi-protocol corpus: ``uwsgi/valid/NAME.uwsgi`` + ``NAME.json``, ``invalid/...``.

The packets are built here from their parts (the 4-byte header, each var's two lengths, the
body), with a builder of this file's own, so the bytes do not depend on the code under test;
``--check`` only compares (tests/unit/test_uwsgi_protocol.py runs the same comparison).

Expected results (JSON):
- valid: ``{"limits": {...}?, "request": {method, target, protocol, headers, content_length,
  body, scheme, client, vars}}``: the one request the parser must report, then its end.
- invalid: ``{"status": int, "why": str, "limits": {...}?}``: the status the parser must
  raise, before it reports any request.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "uwsgi"


def u16(n: int) -> bytes:
    return n.to_bytes(2, "little")


def block(*pairs: tuple[bytes, bytes]) -> bytes:
    return b"".join(u16(len(k)) + k + u16(len(v)) + v for k, v in pairs)


def packet(block_bytes: bytes, body: bytes = b"", modifier1: int = 0, modifier2: int = 0) -> bytes:
    return bytes([modifier1]) + u16(len(block_bytes)) + bytes([modifier2]) + block_bytes + body


# What nginx's stock uwsgi_params sends for `GET /a%20b?x=1 HTTP/1.1` (Debian's: HTTP_HOST is
# $host), then the request's own header fields.
NGINX = (
    (b"QUERY_STRING", b"x=1"),
    (b"REQUEST_METHOD", b"GET"),
    (b"CONTENT_TYPE", b""),
    (b"CONTENT_LENGTH", b""),
    (b"REQUEST_URI", b"/a%20b?x=1"),
    (b"PATH_INFO", b"/a b"),
    (b"DOCUMENT_ROOT", b"/usr/share/nginx/html"),
    (b"SERVER_PROTOCOL", b"HTTP/1.1"),
    (b"REQUEST_SCHEME", b"http"),
    (b"REMOTE_ADDR", b"203.0.113.7"),
    (b"REMOTE_PORT", b"51234"),
    (b"SERVER_PORT", b"80"),
    (b"SERVER_NAME", b"example.com"),
    (b"HTTP_HOST", b"example.com"),
    (b"HTTP_USER_AGENT", b"curl/7.88.1"),
    (b"HTTP_ACCEPT", b"*/*"),
)


def post(length: bytes, *more: tuple[bytes, bytes]) -> tuple[tuple[bytes, bytes], ...]:
    """NGINX's vars for a POST to /form with a CONTENT_LENGTH of ``length``."""
    replaced = {
        b"REQUEST_METHOD": b"POST",
        b"CONTENT_LENGTH": length,
        b"CONTENT_TYPE": b"application/x-www-form-urlencoded",
        b"REQUEST_URI": b"/form",
        b"PATH_INFO": b"/form",
        b"QUERY_STRING": b"",
    }
    return tuple((k, replaced.get(k, v)) for k, v in NGINX) + more


def expected(
    pairs: tuple[tuple[bytes, bytes], ...],
    *,
    target: str,
    method: str = "GET",
    protocol: str = "HTTP/1.1",
    content_length: int | None = None,
    body: str = "",
    scheme: str = "http",
    client: str | None = "203.0.113.7",
) -> dict:
    variables: dict[str, str] = {}
    headers = []
    for key, value in pairs:
        name, text = key.decode("latin-1"), value.decode("latin-1")
        if name in variables:
            variables[name] += ("; " if name == "HTTP_COOKIE" else ", ") + text
        else:
            variables[name] = text
        if name.startswith("HTTP_"):
            headers.append([name[5:].replace("_", "-").lower(), text])
    return {
        "method": method,
        "target": target,
        "protocol": protocol,
        "headers": headers,
        "content_length": content_length,
        "body": body,
        "scheme": scheme,
        "client": client,
        "vars": variables,
    }


VALID: dict[str, tuple[bytes, dict]] = {}
INVALID: dict[str, tuple[bytes, dict]] = {}


def valid(name: str, data: bytes, request: dict, limits: dict | None = None) -> None:
    VALID[name] = (data, {"limits": limits, "request": request} if limits else {"request": request})


def invalid(name: str, data: bytes, status: int, why: str, limits: dict | None = None) -> None:
    spec: dict = {"status": status, "why": why}
    if limits:
        spec["limits"] = limits
    INVALID[name] = (data, spec)


# -- valid --------------------------------------------------------------------------------------

valid("nginx_get", packet(block(*NGINX)), expected(NGINX, target="/a%20b?x=1"))
FORM = post(b"11")
valid(
    "nginx_post",
    packet(block(*FORM), b"a=1&b=hello"),
    expected(FORM, method="POST", target="/form", content_length=11, body="a=1&b=hello"),
)
valid(
    "post_then_more_bytes",  # what follows the body is not read: one request per connection
    packet(block(*FORM), b"a=1&b=helloGET / HTTP/1.1\r\n\r\n"),
    expected(FORM, method="POST", target="/form", content_length=11, body="a=1&b=hello"),
)
ZERO = post(b"0")
valid(
    "post_empty_body",
    packet(block(*ZERO)),
    expected(ZERO, method="POST", target="/form", content_length=0),
)
for var, value, name in (
    (b"HTTPS", b"on", "https_on"),
    (b"UWSGI_SCHEME", b"https", "uwsgi_scheme"),
):
    pairs = (*NGINX, (var, value))
    valid(name, packet(block(*pairs)), expected(pairs, target="/a%20b?x=1", scheme="https"))
PLAIN = tuple((k, b"https") if k == b"REQUEST_SCHEME" else (k, v) for k, v in NGINX)
valid(
    "request_scheme_https",
    packet(block(*PLAIN)),
    expected(PLAIN, target="/a%20b?x=1", scheme="https"),
)
OVERRIDE = (*PLAIN, (b"UWSGI_SCHEME", b"http"))
valid(  # UWSGI_SCHEME first, as uWSGI reads it
    "uwsgi_scheme_wins",
    packet(block(*OVERRIDE)),
    expected(OVERRIDE, target="/a%20b?x=1", scheme="http"),
)
MINIMAL = ((b"REQUEST_METHOD", b"GET"), (b"PATH_INFO", b"/p"), (b"QUERY_STRING", b"q=2"))
valid(  # no REQUEST_URI: the target is PATH_INFO?QUERY_STRING
    "no_request_uri",
    packet(block(*MINIMAL)),
    expected(MINIMAL, target="/p?q=2", client=None),
)
ONLY_METHOD = ((b"REQUEST_METHOD", b"DELETE"),)
valid(
    "only_method",
    packet(block(*ONLY_METHOD)),
    expected(ONLY_METHOD, method="DELETE", target="/", client=None),
)
COOKIES = (*NGINX, (b"HTTP_COOKIE", b"a=1"), (b"HTTP_COOKIE", b"b=2"), (b"HTTP_X_LIST", b"1"))
COOKIES = (*COOKIES, (b"HTTP_X_LIST", b"2"))
valid(  # nginx sends a var per header line: joined as HTTP joins repeated fields
    "repeated_vars_joined",
    packet(block(*COOKIES)),
    expected(COOKIES, target="/a%20b?x=1"),
)
LATIN = (*NGINX, (b"HTTP_X_NAME", b"caf\xe9"), (b"X_EMPTY", b""))
valid("latin1_and_empty_values", packet(block(*LATIN)), expected(LATIN, target="/a%20b?x=1"))
valid(  # modifier2 is not read for modifier1 0
    "modifier2_ignored",
    packet(block(*NGINX), modifier2=7),
    expected(NGINX, target="/a%20b?x=1"),
)
H2 = tuple((k, b"HTTP/2.0") if k == b"SERVER_PROTOCOL" else (k, v) for k, v in NGINX)
valid("http2_client", packet(block(*H2)), expected(H2, target="/a%20b?x=1", protocol="HTTP/2.0"))
EXACT = block(*NGINX)
valid(
    "vars_block_at_the_limit",
    packet(EXACT),
    expected(NGINX, target="/a%20b?x=1"),
    limits={"head": len(EXACT)},
)
valid(
    "header_vars_at_the_field_limit",
    packet(block(*NGINX)),
    expected(NGINX, target="/a%20b?x=1"),
    limits={"fields": 3},
)
valid(
    "body_at_the_limit",
    packet(block(*FORM), b"a=1&b=hello"),
    expected(FORM, method="POST", target="/form", content_length=11, body="a=1&b=hello"),
    limits={"body": 11},
)

# -- invalid ------------------------------------------------------------------------------------

for modifier in (1, 5, 30, 255):
    invalid(
        f"modifier1_{modifier}",
        packet(block(*NGINX), modifier1=modifier),
        400,
        "only modifier1 0 (a WSGI request) is served",
    )
GOOD = block(*NGINX)
invalid(
    "key_runs_past_block",
    packet(GOOD + u16(40) + b"SHORT"),
    400,
    "a key's length reaches past the vars block",
)
invalid(
    "value_runs_past_block",
    packet(GOOD + u16(3) + b"KEY" + u16(40) + b"short"),
    400,
    "a value's length reaches past the vars block",
)
invalid(
    "block_ends_inside_a_length",
    packet(GOOD + b"\x05"),
    400,
    "one byte of a length, then the block ends",
)
invalid(
    "block_ends_before_the_value_length",
    packet(GOOD + u16(3) + b"KEY"),
    400,
    "a key without its value",
)
invalid("empty_key", packet(block(*NGINX, (b"", b"x"))), 400, "a var needs a name")
NO_METHOD = tuple(pair for pair in NGINX if pair[0] != b"REQUEST_METHOD")
invalid("no_method", packet(block(*NO_METHOD)), 400, "REQUEST_METHOD is required")
invalid("empty_block", packet(b""), 400, "no vars at all: no REQUEST_METHOD")
for method, name in ((b"", "empty"), (b"GE T", "space"), (b"G\x00T", "nul")):
    pairs = tuple((k, method) if k == b"REQUEST_METHOD" else (k, v) for k, v in NGINX)
    invalid(f"method_{name}", packet(block(*pairs)), 400, "REQUEST_METHOD must be a token")
for length, name in ((b"-1", "minus"), (b"1e3", "exponent"), (b" 5", "space"), (b"0x10", "hex")):
    invalid(
        f"content_length_{name}",
        packet(block(*post(length)), b"0123456789"),
        400,
        "CONTENT_LENGTH is decimal digits",
    )
invalid(
    "content_length_non_ascii_digits",
    packet(block(*post("١٢".encode()))),
    400,
    "CONTENT_LENGTH is ASCII decimal digits",
)
invalid(
    "vars_block_over_the_limit",
    packet(GOOD)[:10],  # refused from the header alone: the block is not awaited
    431,
    "the vars block is larger than the head limit (buffer-size)",
    limits={"head": len(GOOD) - 1},
)
invalid(
    "too_many_header_vars",
    packet(block(*NGINX)),
    431,
    "more HTTP_* vars than limit_request_fields",
    limits={"fields": 2},
)
BIG = (*NGINX, (b"HTTP_X_BIG", b"x" * 80))
invalid(
    "header_var_too_large",
    packet(block(*BIG)),
    431,
    "an HTTP_* var larger than limit_request_field_size",
    limits={"field_size": 64},
)
LONG = tuple((k, b"/" + b"a" * 80) if k == b"REQUEST_URI" else (k, v) for k, v in NGINX)
invalid(
    "request_uri_too_long",
    packet(block(*LONG)),
    414,
    "REQUEST_URI longer than limit_request_line",
    limits={"request_line": 64},
)
invalid(
    "body_over_the_limit",
    packet(block(*FORM), b"a=1&b=hello"),
    413,
    "CONTENT_LENGTH over limit_request_body, refused before the body",
    limits={"body": 10},
)


# -- writing ------------------------------------------------------------------------------------


def render() -> dict[str, bytes]:
    """Every corpus file, by path relative to ``uwsgi/``."""
    files: dict[str, bytes] = {}
    for kind, table in (("valid", VALID), ("invalid", INVALID)):
        for name, (data, spec) in table.items():
            files[f"{kind}/{name}.uwsgi"] = data
            text = json.dumps(spec, indent=2, ensure_ascii=True) + "\n"
            files[f"{kind}/{name}.json"] = text.encode("ascii")
    return files


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from make_corpus import sync

    return sync(HERE, render(), "--check" in argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

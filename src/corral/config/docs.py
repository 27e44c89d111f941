"""Render docs/settings.md from the setting declarations.

Run ``python -m corral.config.docs > docs/settings.md`` after changing a `Setting`; a unit test
fails while the committed file differs from `render()`. Nothing here is hand-written per setting.
"""

import sys

from corral.config import granian, uvicorn
from corral.config.gunicorn_names import NAMES
from corral.config.listening import DEFAULT_BIND
from corral.config.peers import Name
from corral.config.settings import SECTIONS, SETTINGS, Action, Setting

__all__ = ["main", "render"]

_INTRO = f"""\
# Settings

<!-- Generated from src/corral/config/settings.py by
     `python -m corral.config.docs > docs/settings.md`; do not edit by hand. -->

Every setting is declared once; the command-line flags, the config-file keys, the validated
document and this page are generated from that declaration.

**Config file.** `corral -c FILE` reads TOML (`.toml`) or JSON (`.json`), chosen by extension,
Gunicorn's Python config (`.py`, `python:MODULE`: [Gunicorn's settings](#gunicorns-settings)),
or a uWSGI ini file (`.ini`: see [uWSGI ini files](#uwsgi-ini-files) at the end).
The keys are the names in the *File key* column: the long flag without `--`, with `-` written `_`
(`proc_name` is the exception: its flag is `-n/--name`). Unknown keys are errors. Flags given on
the command line override the file, key by key (a `--bind` or `--env` flag replaces the file's
whole list or table); `GUNICORN_CMD_ARGS`, read as flags, sits between the two.

```toml
app = "myproj.wsgi:application"
workers = 4
bind = [":8000", "unix:/run/myproj.sock"]
limit_request_line = 4094
env = {{ DJANGO_SETTINGS_MODULE = "myproj.settings" }}
```

**Bind addresses.** `HOST:PORT`, `[IPV6]:PORT`, `unix:PATH`, `HOST` (port 8000), `PORT` alone
(on 127.0.0.1) and `:PORT` (all IPv4 interfaces, `0.0.0.0`, as in Gunicorn). `localhost` means
`127.0.0.1`; other host names are resolved when the configuration is loaded. Port 0 lets the
kernel pick a free port. Without any `--bind`, corral listens on `{DEFAULT_BIND}` only: nothing
listens beyond loopback unless configured to.

**Errors.** A bad value stops the server before it starts with one line naming the flag or the
key and what it expects, and exit code 2:

```
corral: error: --workers: expected int >= 1 or "auto", got "two"
corral: error: config.toml: $.workers: expected int >= 1 or "auto", got "two"
```

**The document.** Every source ends as one JSON document in NGINX Unit's shape, which
`corral --check-config ...` prints and the control API's `GET /config` shows: `listeners`
(`{{"ADDRESS": {{"pass": "applications/NAME"}}}}`; also `"routes"`, `"routes/NAME"`, Unit's
older `{{"application": NAME}}`, and `forwarded`: a trusted proxy's client address and scheme,
with Unit's rules, see architecture.md; corral's own `proxy_protocol` and `proxy_allow_from`
keys, as the settings below but for that listener alone, override the settings: `true`,
`"v1"`, `"v2"`, `"auto"` or `false`, and a list of addresses or `"*"`; and corral's own
`"protocol": "uwsgi"`, a listener of the uwsgi binary protocol for nginx's `uwsgi_pass`, which
passes straight to one application), `routes` (Unit's), `applications`
(`{{NAME: {{"type": "python", "module": ..., ...}}}}`), `settings` and `access_log`. The
*Document* column says where each setting sits (`NAME` is the application's name; the command
line names it after its module). A config file whose top level has `listeners`,
`applications`, `routes`, `settings` or `access_log` is such a document, so an NGINX Unit
configuration of Python applications runs as it is (`corral -c unit.json`); with it, only the
server-wide options (those under `$.settings` and `$.access_log`) may be given as flags.

```json
{{
  "listeners": {{"*:8000": {{"pass": "applications/blog"}}}},
  "applications": {{
    "blog": {{
      "type": "python 3.11",
      "path": "/srv/blog",
      "module": "wsgi",
      "processes": 4,
      "environment": {{"DJANGO_SETTINGS_MODULE": "blog.settings"}},
      "limits": {{"timeout": 10}}
    }}
  }},
  "settings": {{"http": {{"idle_timeout": 30, "max_body_size": 8388608}}}},
  "access_log": "/var/log/blog-access.log"
}}
```

Besides the settings below, an application has `type` (`"python"`, or Unit's `"python 3"`,
`"python3.11"`...), `module`, `callable`, `prefix` and `protocol` (`"wsgi"`, or `"asgi"`: see
`worker_class` and `interface`). `prefix` (a path
beginning with `/`, one trailing `/` ignored) is Unit's `SCRIPT_NAME`: a request whose decoded
path is the prefix or continues it with `/` gets `SCRIPT_NAME` = prefix and `PATH_INFO` = the
rest; any other path is passed whole with `SCRIPT_NAME` `""`. Unit's `targets`
(`{{"NAME": {{"module", "callable", "prefix"}}}}`, instead of `module`, `callable` and `prefix`)
gives one application several callables: each worker imports them all, and a pass to
`applications/APP/TARGET` runs TARGET's (`applications/APP` the first). NGINX Unit keys corral
does not implement (`isolation`, `certificates`, `js_modules`, `log_route`...)
are refused by name; `stdout`, `stderr` and `thread_stack_size` are settings below.
"""


def render() -> str:
    """The whole Markdown page."""
    parts = [_INTRO]
    for title, blurb in SECTIONS:
        settings = [s for s in SETTINGS if s.section == title]
        parts.append(f"\n## {title}\n\n{blurb}\n\n")
        parts.append("| File key | Flags | Document | Type | Default | Description |\n")
        parts.append("|---|---|---|---|---|---|\n")
        parts.extend(_row(setting) for setting in settings)
        parts.append(_AFTER.get(title, ""))
    parts.append(_GUNICORN)
    parts.append("| Gunicorn's name | Gunicorn's flags | corral |\n|---|---|---|\n")
    parts.extend(_gunicorn_row(entry) for entry in NAMES.values())
    for title, version, intro, table in (
        ("Uvicorn", uvicorn.VERSION, _UVICORN, uvicorn.FLAGS),
        ("Granian", granian.VERSION, _GRANIAN, granian.FLAGS),
    ):
        parts.append(f"\n## {title}'s flags\n\n{intro.format(version=version)}\n")
        parts.append(f"| {title}'s flag | corral |\n|---|---|\n")
        parts.extend(_flag_row(entry) for entry in table.values())
    parts.append(_uwsgi_section())
    return "".join(parts)


# the fields corral writes itself: (field, what corral sends, what becomes of the application's)
_FIELDS = (
    (
        "`Date`",
        "the time of the answer, on every answer (none with `date_header` false)",
        "sent instead of corral's, as given (Flask's `send_file` sets one): never two "
        "(RFC 9110 6.6.1)",
    ),
    (
        "`Server`",
        '`server_header` (none when it is `""`), or a `headers` field named Server',
        "sent instead of corral's",
    ),
    (
        "`Content-Length`",
        "when the whole body is known at once (a WSGI list of one item, an ASGI answer in one "
        "message, a file) and the application gave none",
        "frames the body and is sent once (the same value twice, once; two values: a 500); "
        "none on 1xx and 204 (RFC 9110 8.6), kept on 304",
    ),
    (
        "`Transfer-Encoding`",
        "`chunked`, on an HTTP/1.1 answer without a Content-Length whose length is not known",
        "dropped: corral frames the body itself (Content-Length, else chunked, else the close "
        "for HTTP/1.0), one framing, never two; the body is taken as its bytes, never as "
        "chunks the application encoded",
    ),
    (
        "`Connection`",
        "`close` when the connection closes after the answer, `keep-alive` to an HTTP/1.0 "
        "client it stays open for",
        "dropped; a value with `close` closes the connection after the answer (one "
        "`Connection: close`)",
    ),
    (
        "`Keep-Alive`, `Upgrade`, `Proxy-Connection`, `TE`",
        "only a WebSocket 101's `Upgrade`",
        "dropped: hop-by-hop (PEP 3333)",
    ),
    (
        "a WebSocket 101's `Upgrade`, `Connection`, `Sec-WebSocket-Accept`, `-Extensions`, "
        "`-Protocol`",
        "the handshake's (`-Protocol`: `websocket.accept`'s `subprotocol`)",
        "dropped where the handshake wrote the name: it is the server's",
    ),
)

_RESPONSE_FIELDS = (
    """
**The fields corral writes.** What becomes of an application's field (WSGI's or ASGI's) of a
name corral writes itself, the name compared without case; the same on both request cores:

| Field | corral's | The application's |
|---|---|---|
"""
    + "".join(f"| {field} | {ours} | {theirs} |\n" for field, ours, theirs in _FIELDS)
    + """
The `headers` setting's fields (Uvicorn's `--header`) are on every answer too; an
application's field of the same name is sent beside them, as Uvicorn sends it.
ASGI trailers (`http.response.trailers`) are sent as given, less the framing and hop-by-hop
fields. The answers corral writes itself (400, 408, 413, 500, 504, Unit's `return`...) have its
own `Date` and `Server`.
"""
)

_COMPRESSION = """
**Response compression.** With `compression` set, an answer is compressed when its client
accepts one of the `compressors`' encodings (`Accept-Encoding`, RFC 9110 §12.5.3: q-values,
`*`, `identity;q=0`; the client's highest weight wins, the list's order breaks ties, and
`identity` preferred or nothing of ours acceptable sends the body as it is, never a 406):

```json
{"settings": {"http": {"compression": {
    "types": ["text/*", "application/json", "application/javascript", "image/svg+xml"],
    "compressors": [{"encoding": "br", "level": 4}, {"encoding": "gzip", "level": 1}]
}}}}
```

Never compressed: a HEAD's answer, 1xx, 204, 304, a 206 (or any answer with
`Content-Range`), a body already encoded (`Content-Encoding`), `Cache-Control: no-transform`,
a `Content-Type` missing or not in `types`, a body whose known length is below the encoding's
`min_length`. Every other answer carries `Vary: Accept-Encoding` (merged into the
application's `Vary`), compressed or not, since another request could get it compressed (a
304 too, with the `ETag` the 200 would have: weak when that 200 is compressed). A
compressed answer gets `Content-Encoding`, its strong `ETag` becomes weak (`W/"..."`), and
it loses `Content-Length` (a whole body is framed by its compressed length, a streamed one
is chunked) and `Accept-Ranges`. A streamed answer (a WSGI iterable, ASGI `more_body`,
server-sent events) is compressed piece by piece, each piece flushed, so that it leaves when
the application sends it; WebSocket messages never are.

An application turns compression off for one answer (a page that shows a secret beside text
an attacker can make it echo: the BREACH attack) with `Content-Encoding: identity` (corral
drops it from an answer it could have compressed: RFC 9110 keeps `identity` out of that
field; clients ignore it on the others), or with
`Cache-Control: no-transform`, which also forbids proxies on the way to compress it.

Libraries, chosen by bench/RESULTS.md ("Response compression codecs"): gzip and deflate with
ISA-L (`isal`) at levels 1 to 3 (at 1, 6 times zlib's speed on a 100 KiB page, and smaller),
and with the standard library's zlib at 4 to 9 (ISA-L has no higher level) or without `isal`;
br with `brotli`; zstd with Python 3.14's `compression.zstd` or `backports.zstd`. A live
stream holds about 200 KiB (gzip with zlib), 70 KiB (ISA-L), 1 MiB (br, a 256 KiB window),
1.3 MiB (zstd up to level 3, a 512 KiB window) and more at higher zstd levels (3 MiB at 6,
40 MiB at 12, 80 MiB at 19): keep zstd's level low for answers that stream.
"""

# what a section says after its table
_AFTER = {"Responses": _RESPONSE_FIELDS + _COMPRESSION}

_GUNICORN = """
## Gunicorn's settings

`corral -c gunicorn.conf.py` (any `.py` file, or `python:MODULE`) runs the file as Gunicorn
does, once, in the directory corral starts in, and takes its module globals named as
Gunicorn's settings; other names (imports, helpers, `_private` ones) are ignored, as Gunicorn
ignores them, and so are corral's own setting names (they go in a TOML file or on the command
line). Its functions named as server hooks are the hooks: the file is the `hooks` file too
(`--hooks FILE` takes only the hooks of a file, with one warning per Gunicorn setting in it).
`GUNICORN_CMD_ARGS` is read as flags, applied over the file and under the command line. Each
of Gunicorn's names and flags (Gunicorn 23 to 27) below sets the corral setting named, or has
no counterpart: then a file that sets it to anything but Gunicorn's default gets one warning
line saying what corral does instead (`corral: warning: gunicorn.conf.py: spew: ...`), and the
flag stops corral with one line and exit code 2, except the flags marked *accepted* (one
warning: nothing is lost without them). `corral --check-config`
prints what the file resolved to.

Without `-c` (on the command line or in `GUNICORN_CMD_ARGS`), `./gunicorn.conf.py` is read when
it is there, as Gunicorn reads it, and the log's second line says so (`reading
/srv/app/gunicorn.conf.py: Gunicorn's default config file, found in the working directory`;
on standard error with `--check-config`). A file named replaces it, not over it: `-c FILE`,
`--ini FILE`, a Unit document, `--emperor DIR`; so does a state directory's saved
configuration (`--state-dir` or `--control` without an APP), with a warning that the file is
not read.

"""


def _gunicorn_row(entry: Name) -> str:
    flags = ", ".join(f"`{flag}`" for flag in entry.flags) or "—"
    return f"| `{entry.name}` | {flags} | {_what(entry)} |\n"


def _flag_row(entry: Name) -> str:
    what = _what(entry)
    if not (entry.setting or entry.accept or (not entry.value and entry.same)):
        taken = ", ".join(f"`{value}`" for value in entry.same)
        what = f"{taken} taken as they are, others refused: {what}" if taken else f"refused: {what}"
    return f"| `{entry.name}` | {what} |\n"


def _what(entry: Name) -> str:
    what = entry.disposition()
    if entry.accept:
        what = f"*accepted*, no effect: {what}"
    elif entry.refuse:
        what = f"refused, in a file too: {what}"
    return what.replace("|", "\\|")


_UVICORN = """\
Every flag of `uvicorn --help` (Uvicorn {version}) is understood with Uvicorn's meaning: it
sets the corral setting named (corral's own flag of the same name when the setting has one), is
taken without a word where it asks for what corral does anyway, or stops corral with one line
saying what to use instead (*refused* below), except the flags marked *accepted* (one warning:
nothing is lost without them). So `uvicorn main:app --host 0.0.0.0 --port 8000 --workers 4`
becomes `corral main:app --host 0.0.0.0 --port 8000 --workers 4`. Where the defaults differ:
corral writes no access log unless asked (`--access-log`, `--access-logfile`), waits 30 s for
a graceful stop (`--timeout-graceful-shutdown`), and kills a worker whose loop is silent for
30 s (`--timeout-worker-healthcheck`). Uvicorn's `UVICORN_*` environment variables are not
read.
"""

_GRANIAN = """\
Every flag of `granian --help` (Granian {version}) is understood the same way. Granian's own
interface, RSGI (its default), is not served: a Granian command line names `--interface asgi`
or `wsgi` (`auto`, corral's default, tells them apart too). Durations are seconds or Granian's
`1h30m` form; `--http1-header-read-timeout` is in milliseconds, as in Granian. Granian's
`GRANIAN_*` environment variables are not read.
"""


_UWSGI_INTRO = """
## uWSGI ini files

`corral --ini FILE[:SECTION]` (also uWSGI's `-ini FILE`, and `-c FILE.ini`) reads the `[uwsgi]`
section (or SECTION) of a uWSGI ini file with uWSGI's rules: `key = value` lines (a key alone is
a boolean set to true; `;` and `#` start comments), an option given several times accumulates
where it is a list, magic variables (`%d` the file's directory with its `/`, `%n` its name
without extension, `%p` its path, `%s` its file name, `%e`, `%c`, `%x`, `%0`..`%9`, `%h`, `%k`,
`%u`, `%U`, `%g`, `%G`, `%t`, `%T`, `%v`, `%o`, `%%`), then `$(ENV)` (`$(ENV:-DEFAULT)`,
`$(ENV-DEFAULT)`), `@(FILE)` and `%(name)` placeholders (the first option of that name: any key
of the file, or `set-placeholder = name=value`); `ini = FILE[:SECTION]` (relative to the
including file) and `ini = :SECTION` include others in place. Flags given on the command line
override the file, as with `-c`. Booleans are `true`, `yes`, `on`, `1` or `false`, `no`, `off`,
`0`. An option below that corral does not support, and an unknown one no placeholder refers to,
is one warning line each (`corral: warning: app.ini:12: stats: not supported: ...`; the error
log's on a reload) and the server starts; a value that does not fit is an error naming the file,
the line and the option. uWSGI's config logic (`if-env`, `for`...) is refused.

```ini
[uwsgi]
chdir = /srv/mysite
module = mysite.wsgi:application
home = /srv/mysite/venv
env = DJANGO_SETTINGS_MODULE=mysite.settings
master = true
processes = 4
socket = /run/mysite/%n.sock
chmod-socket = 660
harakiri = 30
```

```nginx
location / {
    include uwsgi_params;
    uwsgi_pass unix:/run/mysite/mysite.sock;
}
```

A uwsgi listener serves one request per connection (what `uwsgi_pass` sends without upstream
keepalive), answers it as a plain HTTP/1.x response (never chunked), then closes. The environ
is the packet's variables as nginx sent them (`include uwsgi_params`: its client's
`REMOTE_ADDR`, its `SERVER_NAME`...; `wsgi.url_scheme` from `UWSGI_SCHEME`, `HTTPS` or
`REQUEST_SCHEME`), the body `CONTENT_LENGTH` bytes. The limits are HTTP's: the vars block
against `limit_request_head` (`buffer-size`), the `HTTP_*` vars as header fields, the body
against `limit_request_body` (413), the header, body and send timeouts; a packet whose
modifier1 is not 0 (WSGI) or whose vars run past their block is answered 400.

| uWSGI option | corral |
|---|---|
"""


def _uwsgi_section() -> str:
    from corral.config.uwsgi import ACCEPTED, MAPPED, UNSUPPORTED

    rows = [f"| `{key}` | {rule.doc} |\n" for key, rule in MAPPED.items()]
    rows += [f"| `{key}` | accepted: {why.doc} |\n" for key, why in ACCEPTED.items()]
    rows.append("| `plugin`, `plugins` | accepted when they name Python (`python3`) |\n")
    rows += [
        f"| `{key}` | not supported (a warning): {what} |\n" for key, what in UNSUPPORTED.items()
    ]
    return _UWSGI_INTRO + "".join(rows)


def _row(setting: Setting) -> str:
    key = "—" if not setting.in_file else f"`{setting.name}`"
    if setting.action is Action.POSITIONAL:
        flags = f"`{setting.metavar}` (argument)"
    elif not setting.flags:
        flags = "—"
    else:
        metavar = "" if setting.action in (Action.FLAG, Action.SWITCH) else f" {setting.metavar}"
        if setting.action is Action.OPTIONAL:
            metavar = f" [{setting.metavar}]" if setting.values else f"[={setting.metavar}]"
        flags = ", ".join(f"`{flag}{metavar}`" for flag in setting.all_flags)
        if setting.action is Action.APPEND:
            flags += " (repeatable)"
    default = setting.shown_default()
    path = _SOURCE_PATHS.get(setting.name) or (
        f"`{setting.document_path}`" if setting.document_path else "—"
    )
    cells = [key, flags, path, _code(setting.expected), _code(default) if default else ""]
    cells.append(setting.doc)
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n"


# Where the settings that shape the document without being a field of it land.
_SOURCE_PATHS = {
    "app": "`$.applications.NAME.module`, `.callable`, `.factory`",
    "bind": "`$.listeners` (its keys)",
    "forwarded_allow_ips": "`$.listeners.ADDRESS.forwarded`",
    "capture_output": "`$.applications.NAME.stdout`, `.stderr`",
    "uwsgi_socket": '`$.listeners` (its keys, with `"protocol": "uwsgi"`)',
    "ini": "—",
    "host": "`$.listeners` (its key)",
    "port": "`$.listeners` (its key)",
    "uds": "`$.listeners` (its key)",
    "proxy_headers": "`$.listeners.ADDRESS.forwarded`",
    "prefix": "`$.applications.NAME.prefix`",
    "env_file": "`$.applications.NAME.environment`",
}


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def main() -> None:
    """Write the page to standard output."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()

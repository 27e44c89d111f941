"""``corral ctl``: the control API from the command line (stdlib only).

Commands: ``get PATH``, ``put PATH FILE|-|JSON``, ``post PATH FILE|-|JSON``, ``delete PATH``,
``status [PATH]``, ``restart APP``, ``stacks [APP] [--json]``, ``top [--once] [--interval S]``,
``upload NAME CERT [CHAIN...] [--key KEY]`` (a PEM bundle to ``/certificates/NAME``);
options ``--socket ADDRESS`` (``unix:PATH``, a path, or ``HOST:PORT``; default
``$CORRAL_CONTROL``, else the default state directory's socket), ``--token TOKEN`` (default
``$CORRAL_CONTROL_TOKEN``), ``--timeout SECONDS``, ``--one-at-a-time``.

What it prints: the answer's JSON, indented, on stdout, and exit code 0; an error answer is
one line on stderr (``corral ctl: error 404: Value doesn't exist. ...``) and exit code 1, as
is a server that cannot be reached (the line says whether a corral master runs on the machine,
found by its process title, and how the API is turned on); a usage error is one line and exit
code 2.

Several ``--socket`` (a fleet: one instance per machine or container): ``get``, ``put``,
``post``, ``delete``, ``status``, ``restart`` and ``upload`` go to every instance, all at once,
or with ``--one-at-a-time`` in the order given until the first failure (the rest are not
tried); ``top`` and ``stacks`` are a usage error. A value from standard input is read once and
sent to each. stdout is one JSON object keyed by address, each value
``{"status": N, "answer": ...}``, ``{"status": N or null, "error": "..."}`` or
``{"skipped": "..."}``; each failure is also a line on stderr
(``corral ctl: ADDRESS: error 404: ...``); the exit code is 0 when every instance succeeded,
else 1. control/fleet.py does the fan-out.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
from typing import Any, NoReturn
from urllib.parse import quote

from corral.control import fleet
from corral.control.options import SOCKET_NAME, default_state_dir
from corral.master.title import MASTER_TITLE_START

__all__ = ["main"]

EXIT_OK, EXIT_API, EXIT_USAGE = 0, 1, 2
PROG = "corral ctl"


class UsageError(Exception):
    pass


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Read and change a running corral through its control API.",
        epilog="With several --socket, every command but top and stacks goes to every "
        "instance, all at once (--one-at-a-time: in the order given, stopping at the first "
        "failure); stdout is one JSON object keyed by address, each value "
        '{"status", "answer"}, {"status", "error"} or {"skipped"}; each failure is also a '
        "line on stderr, and the exit code is 1 unless every instance succeeded.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--socket",
        metavar="ADDRESS",
        action="append",
        help="unix:PATH, a socket path, or HOST:PORT; again for each instance of a fleet "
        "[default: $CORRAL_CONTROL, else "
        f"unix:{os.path.join(default_state_dir(), SOCKET_NAME)}]",
    )
    parser.add_argument(
        "--token", metavar="TOKEN", help="bearer token [default: $CORRAL_CONTROL_TOKEN]"
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=120.0,
        help="how long to wait for the answer; a change answers once new workers serve "
        "[default: 120]",
    )
    parser.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="with several --socket: one instance after the other, in the order given, "
        "stopping at the first that fails (a canary rollout)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    get = commands.add_parser("get", help="print the value at PATH (/config/...)")
    get.add_argument("path", metavar="PATH")
    for name, blurb in (("put", "set PATH to a value"), ("post", "append a value to PATH")):
        change = commands.add_parser(name, help=blurb)
        change.add_argument("path", metavar="PATH")
        change.add_argument("value", metavar="FILE|-|JSON", help="a file, - for stdin, or JSON")
    delete = commands.add_parser("delete", help="remove the value at PATH")
    delete.add_argument("path", metavar="PATH")
    status = commands.add_parser("status", help="the processes and requests of each application")
    status.add_argument("path", metavar="PATH", nargs="?", default="")
    upload = commands.add_parser(
        "upload",
        help="store a certificate bundle as NAME: the certificate, its chain, the key "
        "(PUT /certificates/NAME)",
    )
    upload.add_argument("name", metavar="NAME")
    upload.add_argument(
        "files", metavar="CERT [CHAIN...]", nargs="+", help="PEM files, the leaf first"
    )
    upload.add_argument("--key", metavar="KEY", help="the private key's PEM file, if not in CERT")
    restart = commands.add_parser("restart", help="new workers for application APP, gracefully")
    restart.add_argument("app", metavar="APP")
    stacks = commands.add_parser(
        "stacks", help="every worker's live thread and task stacks, of APP or of every application"
    )
    stacks.add_argument("app", metavar="APP", nargs="?")
    stacks.add_argument("--json", action="store_true", help="print the API's JSON answers")
    top = commands.add_parser("top", help="a live view of the applications and their workers")
    top.add_argument("--once", action="store_true", help="print one snapshot as text, and exit")
    top.add_argument(
        "--interval", metavar="SECONDS", type=float, default=1.0, help="refresh [default: 1]"
    )
    return parser  # the subcommands' parsers are _Parsers too (argparse uses the parent's class)


class ApiError(Exception):
    """An answer the command cannot go on with (``status`` None: no answer came)."""

    def __init__(self, status: int | None, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line

    def __str__(self) -> str:
        """Its line for stderr, after ``corral ctl: ``."""
        return _error_text(self.status, self.line)


def _error_text(status: int | None, line: str) -> str:
    return f"error {status}: {line}" if status else f"error: {line}"


class Client:
    """Requests to one control API, each on a connection of its own (the API closes it)."""

    def __init__(self, address: str, token: str | None, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        _connection(address, timeout)  # a UsageError for an address that is none

    def call(
        self, method: str, path: str, body: bytes | None = None, kind: str = "application/json"
    ) -> object:
        """The JSON answer; `ApiError` for an error answer or an API out of reach. ``kind``:
        the body's Content-Type."""
        return self.exchange(method, path, body, kind)[1]

    def exchange(
        self, method: str, path: str, body: bytes | None = None, kind: str = "application/json"
    ) -> tuple[int, object]:
        """As `call`, with the answer's status too."""
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = kind
        connection = _connection(self.address, self.timeout)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            status, data = response.status, response.read()
        except (FileNotFoundError, ConnectionRefusedError) as exc:  # nothing listens there
            local = _on_this_machine(self.address)
            hint = _turn_it_on(_running_masters()) if local else _TURN_IT_ON_THERE
            reason = f"{exc.strerror or exc}; {hint}"
            raise ApiError(
                None, f"cannot reach the control API at {self.address}: {reason}"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise ApiError(None, f"cannot reach the control API at {self.address}: {exc}") from None
        finally:
            connection.close()
        try:
            answer = json.loads(data)
        except ValueError:
            status, answer = max(status, 500), None  # not the control API's answer
        if status >= 400:
            raise ApiError(status, _error_line(answer, data))
        return status, answer


def main(argv: list[str]) -> int:
    """Run ``corral ctl`` with ``argv`` (after ``ctl``); returns the exit code."""
    try:
        args = _parser().parse_args(argv)
        addresses = args.socket or [os.environ.get("CORRAL_CONTROL") or _default_socket()]
        _check_fleet(addresses, args.command)
        token = args.token or os.environ.get("CORRAL_CONTROL_TOKEN")
        clients = [Client(address, token, args.timeout) for address in addresses]
        request = None if args.command in ("stacks", "top") else _request(args)
        if args.command == "top" and not args.interval > 0:
            raise UsageError(f"--interval {args.interval}: expected a number of seconds above 0")
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if len(clients) > 1 and request is not None:  # (_check_fleet refused top and stacks)
        return _ask_fleet(clients, request, args.one_at_a_time)
    client, address = clients[0], addresses[0]
    try:
        if args.command == "top":
            from corral.control import top  # curses, and the view, only for this command

            if args.once:
                print(top.once(client.call, address), end="")
            else:
                top.run(client.call, address, args.interval)
        elif request is None:
            _print_stacks(client, args.app, args.json)
        else:
            print(json.dumps(client.call(*request), indent=4, ensure_ascii=False))
    except ApiError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_API
    return EXIT_OK


def _check_fleet(addresses: list[str], command: str) -> None:
    """A UsageError for what several sockets cannot do: a live view or stacks of several
    instances, or one address twice (its outcome would hide the other's)."""
    if len(addresses) < 2:
        return
    if command in ("top", "stacks"):
        raise UsageError(f"{command} reads one instance: give one --socket, not {len(addresses)}")
    for index, address in enumerate(addresses):
        if address in addresses[:index]:
            raise UsageError(f"--socket {address}: given twice")


def _ask_fleet(clients: list[Client], request: Request, one_at_a_time: bool) -> int:
    """``request`` to every client's instance (fleet.py); prints the outcomes keyed by
    address, and a line on stderr per instance that failed."""

    def ask(address: str) -> fleet.Outcome:
        try:
            status, answer = by_address[address].exchange(*request)
        except ApiError as exc:
            return fleet.Outcome(exc.status, error=exc.line)
        return fleet.Outcome(status, answer)

    by_address = {client.address: client for client in clients}
    addresses = list(by_address)
    outcomes = fleet.ask_all(addresses, ask, one_at_a_time)
    print(fleet.report(addresses, outcomes))
    for address, outcome in zip(addresses, outcomes, strict=True):
        if outcome.error is not None:
            print(
                f"{PROG}: {address}: {_error_text(outcome.status, outcome.error)}", file=sys.stderr
            )
    return EXIT_OK if all(outcome.succeeded for outcome in outcomes) else EXIT_API


def _print_stacks(client: Client, app: str | None, as_json: bool) -> None:
    if app is None:
        status = client.call("GET", "/status/applications")
        names = list(status) if isinstance(status, dict) else []
    else:
        names = [app]
    for name in names:
        answer = client.call("GET", f"/control/applications/{quote(name, safe='')}/stacks")
        if as_json:
            print(json.dumps(answer, indent=4, ensure_ascii=False))
        elif isinstance(answer, dict):
            print(stacks_text(answer), end="")


def stacks_text(answer: dict[str, Any]) -> str:
    """A ``/stacks`` answer as a traceback-like text, one block per worker."""
    lines = []
    for worker in answer.get("workers", []):
        pid, state = worker["pid"], worker["state"]
        head = f"{answer['application']}: worker {worker['slot']} (pid {pid}, {state})"
        if not worker["answered"]:
            lines.append(f"{head}: did not answer within a second")
            continue
        lines.append(head + ":")
        for kind, entries in (("thread", worker["threads"]), ("task", worker["tasks"] or [])):
            for entry in entries:
                lines.append(f"  {kind} {entry['name']}:")
                for frame in entry["frames"]:
                    where = f'File "{frame["file"]}", line {frame["line"]}, in {frame["function"]}'
                    lines.append(f"    {where}")
                    if frame["code"]:
                        lines.append(f"      {frame['code']}")
        if worker.get("error"):
            lines.append(f"  (stacks incomplete: {worker['error']})")
        lines.append("")
    return "\n".join(lines) + ("\n" if lines else "")


# method, path, body, and the body's Content-Type when it is not JSON
Request = tuple[str, str, bytes | None] | tuple[str, str, bytes, str]


def _request(args: argparse.Namespace) -> Request:
    command = args.command
    if command == "upload":
        files = [*args.files, *([args.key] if args.key else [])]
        path = "/certificates/" + quote(args.name, safe="")
        return "PUT", path, b"".join(_pem(name) for name in files), "application/x-pem-file"
    if command == "get":
        return "GET", _path(args.path), None
    if command == "delete":
        return "DELETE", _path(args.path), None
    if command in ("put", "post"):
        return command.upper(), _path(args.path), _value(args.value)
    if command == "status":
        return "GET", "/status" + (_path(args.path) if args.path.strip("/") else ""), None
    app = quote(args.app, safe="")
    return "GET", f"/control/applications/{app}/restart", None


def _path(text: str) -> str:
    """``config/applications`` → ``/config/applications``; what must be is percent-encoded
    (a ``%`` already written stays, so ``a%2Fb`` names the key ``a/b``)."""
    if not text.startswith("/"):
        text = "/" + text
    return quote(text, safe="/%:@!$&'()*+,;=[]~")


def _pem(path: str) -> bytes:
    """A PEM file's text, ending with a line end (files are joined into one bundle)."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return data if data.endswith(b"\n") else data + b"\n"


def _value(text: str) -> bytes:
    if text == "-":
        return sys.stdin.buffer.read()
    if os.path.isfile(text):
        try:
            with open(text, "rb") as stream:
                return stream.read()
        except OSError as exc:
            raise UsageError(f"{text}: cannot read: {exc.strerror or exc}") from None
    return text.encode("utf-8")


MASTER_TITLE = MASTER_TITLE_START.encode()  # the start of a master's /proc/PID/cmdline


def _running_masters(proc: str = "/proc") -> list[int] | None:
    """The pids of the corral masters this user can see running (by their process title), or
    None where processes cannot be listed so."""
    try:
        entries = os.listdir(proc)
    except OSError:
        return None
    pids = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as stream:
                title = stream.read(len(MASTER_TITLE))
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if title == MASTER_TITLE:
            pids.append(int(entry))
    return sorted(pids)


# when the address is another machine's, whose servers this one cannot see
_TURN_IT_ON_THERE = (
    "no control API answers on that machine: its server must start with --control HOST:PORT "
    "and --control-token TOKEN, and ctl be given the same token (--token or "
    "$CORRAL_CONTROL_TOKEN)"
)


def _on_this_machine(address: str) -> bool:
    """Whether ``address`` (a unix socket, or HOST:PORT) is this machine's: only then do the
    corral servers running here say anything about it."""
    if address.startswith("unix:") or "/" in address:
        return True
    host = address.rpartition(":")[0].strip("[]")
    return host in ("", "localhost", "::1") or host.startswith("127.")


def _turn_it_on(masters: list[int] | None) -> str:
    """What to do when no control API answers at an address of this machine: a server runs
    without one (or with it elsewhere), or none runs."""
    how = (
        "the API is off unless a server starts with --control ADDRESS or --state-dir DIR (then "
        "at unix:DIR/control.sock); start it so and give ctl that address (--socket ADDRESS or "
        "$CORRAL_CONTROL)"
    )
    if masters is None:
        return how
    if not masters:
        return f"no corral server runs here; {how}"
    pids = ", ".join(map(str, masters))
    running = f"a corral server runs here (pid {pids})"
    if len(masters) > 1:
        running = f"corral servers run here (pids {pids})"
    return f"{running}, but no control API at that address: {how}"


def _default_socket() -> str:
    return "unix:" + os.path.join(default_state_dir(), SOCKET_NAME)


def _connection(address: str, timeout: float) -> http.client.HTTPConnection:
    if address.startswith("unix:"):
        return UnixHTTPConnection(address[5:].removeprefix("//"), timeout)
    if "/" in address:
        return UnixHTTPConnection(address, timeout)
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise UsageError(f"--socket {address}: expected unix:PATH, a path, or HOST:PORT")
    return http.client.HTTPConnection(host.strip("[]") or "127.0.0.1", int(port), timeout=timeout)


def _error_line(answer: object, data: bytes) -> str:
    if isinstance(answer, dict) and "error" in answer:
        parts = [str(answer["error"])]
        if answer.get("detail"):
            parts.append(str(answer["detail"]))
        return " ".join(parts)
    text = data.decode("utf-8", "replace").strip()
    return " ".join(text.split())[:300] or "(empty answer)"

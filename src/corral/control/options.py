"""Whether the control API runs, where, with which token, and who owns the configuration.

Invariants:
- the API is on only when asked for (`--control` or `--state-dir`): a Gunicorn-style command
  line gets no socket file and no state directory it did not name;
- a TCP control address needs a token, and ``PORT`` or ``:PORT`` alone means loopback: the
  API never listens beyond the machine by default;
- the state directory owns the configuration (restored at start, saved on every change) only
  when the command line names no application and no config file; otherwise the command line
  stays the source of truth, and API changes last until the next restart or HUP.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from corral.config import BindAddress, ConfigError, parse_bind
from corral.config.errors import Invalid

ROOT_STATE_DIR = "/var/lib/corral"
SOCKET_NAME = "control.sock"
STATE_FILE = "conf.json"


@dataclass(frozen=True, slots=True)
class ControlOptions:
    """The control API of one server, resolved from the command line."""

    address: BindAddress  # where the API listens
    token: str | None  # the bearer token every request must carry, if any
    state_dir: str  # absolute
    owns_config: bool  # the state directory's conf.json is the configuration

    @property
    def state_file(self) -> str:
        return os.path.join(self.state_dir, STATE_FILE)


def default_state_dir() -> str:
    """``/var/lib/corral`` as root, else ``$XDG_STATE_HOME/corral`` (``~/.local/state``)."""
    if os.geteuid() == 0:
        return ROOT_STATE_DIR
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "corral")


def resolve(
    control: str | None, token: str | None, state_dir: str | None, names_an_application: bool
) -> ControlOptions | None:
    """The control options a command line asks for, or None when the API is off.

    Raises `ConfigError` (one line) for a bad address or a TCP address without a token.
    """
    if control is None and state_dir is None:
        return None
    directory = os.path.abspath(os.path.expanduser(state_dir or default_state_dir()))
    text = control if control is not None else f"unix:{os.path.join(directory, SOCKET_NAME)}"
    address = _control_address(text)
    if address.kind == "tcp" and not token:
        raise ConfigError(
            f"--control {text}: a TCP control address needs --control-token (a unix socket "
            "is protected by its file mode instead)"
        )
    return ControlOptions(address, token, directory, owns_config=not names_an_application)


def _control_address(text: str) -> BindAddress:
    stripped = text.strip()
    if stripped.startswith(":") or (stripped.isascii() and stripped.isdigit()):
        stripped = "127.0.0.1:" + stripped.lstrip(":")  # loopback unless a host says otherwise
    try:
        address = parse_bind(stripped)
    except Invalid as exc:
        raise ConfigError(f"--control: {exc}") from None
    if address.kind == "unix":
        path = os.path.abspath(os.path.expanduser(address.path or ""))
        address = parse_bind(f"unix:{path}")
    return address

"""An application's NGINX Unit ``targets``: Python's (``module``, ``callable``, ``prefix``)
and php's (``root``, ``script``, ``index``: config/php_keys.py) in one struct, `Target`, which
document.py checks by the application's type; and what a Python worker imports for each
(`EntryPoint`), read as the `Application`'s ``entry_points`` and ``target_names``."""

from typing import Annotated, Any, NamedTuple

import msgspec
from msgspec import UNSET, Meta, UnsetType

from corral.config import php_keys

__all__ = ["EntryPoint", "Target", "entry_points", "target_names"]

_DOTTED = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
_MODULE = Annotated[str, Meta(pattern=_DOTTED, description="dotted Python module name")]
_CALLABLE = Annotated[str, Meta(pattern=_DOTTED, description="dotted Python name")]
_PREFIX = Annotated[str, Meta(pattern=r"^/", description='a path beginning with "/"')]


class Target(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """One of NGINX Unit's application `targets`: a callable and where it is mounted."""

    module: _MODULE | None = None  # a Python target's (required there: php_keys.check)
    callable: _CALLABLE | None = None
    prefix: _PREFIX | UnsetType = UNSET
    root: php_keys.ROOT | UnsetType = UNSET  # a php target's (config/php_keys.py)
    script: php_keys.SCRIPT | UnsetType = UNSET
    index: php_keys.SCRIPT | UnsetType = UNSET


class EntryPoint(NamedTuple):
    """What a worker imports for one target (the application itself when it has none).

    `prefix` is Unit's as matched: one trailing "/" dropped, "" for none."""

    target: str  # "" for an application without targets
    module: str
    callable: str | None
    prefix: str


def _mount(prefix: Any) -> str:
    return "" if prefix is UNSET or prefix is None else prefix.removesuffix("/")


def entry_points(self: Any) -> tuple[EntryPoint, ...]:
    """The application's targets in order (one, unnamed, without `targets`): a request
    routed to `applications/NAME/TARGET` runs the callable at TARGET's position."""
    if self.targets is UNSET:
        return (EntryPoint("", self.module, self.callable, _mount(self.prefix)),)
    return tuple(
        EntryPoint(name, t.module, t.callable, _mount(t.prefix)) for name, t in self.targets.items()
    )


def target_names(self: Any) -> tuple[str, ...]:
    return () if self.targets is UNSET else tuple(self.targets)

"""NGINX Unit's ``share`` action: a static file. corral serves none yet: answered 501."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.actions.respond import respond
from corral.routing import Respond

if TYPE_CHECKING:
    from corral.server.connection import HttpConnection
    from corral.server.exchange import Exchange

NOT_IMPLEMENTED = Respond(501)


def share(conn: HttpConnection, exchange: Exchange, action: Any) -> bool:
    return respond(conn, exchange, NOT_IMPLEMENTED)

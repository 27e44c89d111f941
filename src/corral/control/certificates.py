"""The control API's ``/certificates``: NGINX Unit's certificate store over HTTP.

- ``GET /certificates``: every bundle's JSON by name; ``GET /certificates/NAME[/PATH]``: one
  bundle's, or a value inside it (``/certificates/NAME/chain/0/subject``);
- ``PUT /certificates/NAME`` with a PEM bundle as the body: checked and stored
  (``{"success": "Certificate chain uploaded."}``); a bundle outside its validity period is
  stored, as Unit stores it, and the answer carries a ``warning`` (corral's);
- ``DELETE /certificates/NAME``: refused while a listener's ``tls.certificate`` names it, in
  the running document or in one being applied.

The answers and their titles are Unit's (`Refused`); corral adds a ``detail`` saying why.
Nothing here knows HTTP framing (`server.py`) or the arbiter (`api.py` gives the documents).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from corral.config import ConfigError, Document
from corral.config.listener_tls import Tls
from corral.control import tree
from corral.jsonpath import member
from corral.tls.store import (
    BadName,
    BundleError,
    CertificateStore,
    Exists,
    Unserved,
    listener_bundles,
)

__all__ = ["ALLOWED", "Refused", "check_listeners", "handle", "users"]

PREFIX = "/certificates"
ALLOWED = ("GET", "PUT", "DELETE")
UPLOADED = "Certificate chain uploaded."
DELETED = "Certificate deleted."


class Refused(Exception):
    """An error answer, in Unit's words (``title``) and corral's (``detail``)."""

    def __init__(self, status: int, title: str, detail: str = "") -> None:
        super().__init__(title)
        self.status = status
        self.title = title
        self.detail = detail


def handle(
    store: CertificateStore, documents: Iterable[Document], method: str, path: str, body: bytes
) -> Any:
    """The JSON answer (status 200) to ``METHOD path`` (``/certificates...``); raises
    `Refused` for any other answer. ``documents``: the running one, and one being applied."""
    try:
        segments = tree.split(path[len(PREFIX) :])
    except tree.NotFound:
        raise Refused(400, "Invalid certificate name.", "the name is not UTF-8") from None
    name, rest = (segments[0], segments[1:]) if segments else ("", [])
    if method == "GET":
        if not name:
            return store.all_info()
        info = store.info(name)
        if info is None:
            raise Refused(404, "Certificate doesn't exist.", f"no certificate {name!r}")
        try:
            return tree.get(info, rest)
        except tree.NotFound:
            raise Refused(404, "Invalid path.", f"{path} does not exist") from None
    if method not in ALLOWED:
        raise Refused(405, "Invalid method.", f"{method} is not allowed on {path}")
    if not name or rest:
        raise Refused(400, "Invalid certificate name.", "the path is /certificates/NAME")
    if method == "PUT":
        return _put(store, name, body)
    using = users(documents, name)
    if using:
        raise Refused(
            400, "Certificate is used in the configuration.", f"{name!r} is used by {using[0]}"
        )
    try:
        removed = store.remove(name)
    except OSError as exc:
        raise Refused(500, "Failed to delete certificate.", str(exc)) from None
    if not removed:
        raise Refused(404, "Certificate doesn't exist.", f"no certificate {name!r}")
    return {"success": DELETED}


def _put(store: CertificateStore, name: str, body: bytes) -> Any:
    try:
        bundle = store.add(name, body)
    except BadName as exc:
        raise Refused(400, "Invalid certificate name.", str(exc)) from None
    except Exists:
        raise Refused(
            400,
            "Certificate already exists.",
            f"{name!r} is in the store: upload the new "
            "bundle under another name, or delete this one first",
        ) from None
    except BundleError as exc:
        raise Refused(400, "Invalid certificate.", str(exc)) from None
    except OSError as exc:
        raise Refused(500, "Failed to store certificate.", str(exc)) from None
    answer: dict[str, Any] = {"success": UPLOADED}
    if bundle.authorities:  # corral's own: a bundle without a key
        answer["note"] = "no private key: a CA bundle, for a listener's client_certificate.ca"
    warning = bundle.validity_warning()
    if warning:
        answer["warning"] = warning
    return answer


def users(documents: Iterable[Document], name: str) -> list[str]:
    """The JSON paths of the listeners' ``tls.certificate`` and ``tls.client_certificate.ca``
    that name ``name``."""
    return [
        f"$.listeners{member(key)}.tls.{where}"
        for doc in documents
        for key, listener in doc.listeners.items()
        if isinstance(listener.tls, Tls)
        for where, names in (
            ("certificate", listener.tls.names),
            ("client_certificate.ca", listener.tls.authorities),
        )
        if name in names
    ]


def check_listeners(store: CertificateStore, doc: Document) -> None:
    """Raise `ConfigError` (Unit's words, after the JSON path) when a listener of ``doc``
    names a bundle the store lacks, or one it cannot use there (`listener_bundles`)."""
    for key, listener in doc.listeners.items():
        if not isinstance(listener.tls, Tls):
            continue
        try:
            listener_bundles(listener.tls, store.get)
        except Unserved as exc:
            raise ConfigError(f"$.listeners{member(key)}.tls.{exc.where}: {exc.text}") from None

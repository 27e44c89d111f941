"""What a document may hold that corral accepts and does not serve: said, never silent.

NGINX Unit's documents are taken whole, so some of their parts are validated and kept with
nothing behind them: an application ``type`` naming a Python other than the one corral runs.
`unserved` names them in warning lines, one per kind, each listing every JSON path that has
it; its callers say them where the document comes in: `corral.config.sources` for the command
line and its files (standard error at start, the error log on a reload),
`corral.master.reload` for a change through the control API or the emperor. When a feature
lands, its entry here goes (shares and ``settings.http.static`` went with the file engine).
"""

from __future__ import annotations

import re
import sys

from corral.config.app_types import is_external, unserved_external
from corral.config.document import Document
from corral.config.errors import show
from corral.config.language_keys import is_language, unserved_language
from corral.config.php_keys import is_php
from corral.jsonpath import member

__all__ = ["unserved"]

_RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


def unserved(doc: Document) -> list[str]:
    """One warning line per kind of part of ``doc`` corral accepts and does not serve."""
    lines = []
    for name, application in doc.applications.items():
        if is_external(application):
            lines += unserved_external(application, f"$.applications{member(name)}")
            continue
        if is_language(application):
            lines += unserved_language(application, f"$.applications{member(name)}")
            continue
        if is_php(application):  # its version is php-fpm's, whichever is installed
            continue
        version = re.search(r"\d+\.\d+", application.type)
        if version is not None and version.group() != _RUNNING:
            lines.append(
                f"$.applications{member(name)}.type: {show(application.type)}: corral runs the "
                f"application on its own Python, {_RUNNING}"
            )
    return lines

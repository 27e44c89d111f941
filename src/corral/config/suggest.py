"""A "did you mean" for a mistyped name: an option, a key of a file or of the document.

Every source of the configuration words its unknown names with it; a name is quoted as JSON
spells it (as `corral.config.errors.show` quotes a value).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

__all__ = ["did_you_mean"]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean "x"?)`` for the closest choice of the same shape, or ``""``.

    Names are compared by their words (split at ``-``, ``_`` and ``.``, leading dashes
    dropped): a choice is offered only when it has as many words and is close letter by
    letter, word by word, or is the same letters otherwise split (``logfile``, ``log-file``).
    So a shared ``--`` or ``file`` makes no suggestion: ``--daemon`` is not ``--env``,
    ``--certfile`` not ``--error-logfile``, ``--worker-class`` not ``--workers``.
    """
    import difflib  # only when a name is unknown: reading a configuration stays cheap

    typed = _words(word)
    same_shape: dict[str, str] = {}
    for choice in choices:
        parts = _words(choice)
        if "".join(parts) == "".join(typed) and parts != typed:
            return f" (did you mean {_quoted(choice)}?)"
        if len(parts) == len(typed) and all(
            difflib.SequenceMatcher(None, a, b).ratio() >= 0.5
            for a, b in zip(parts, typed, strict=True)
        ):
            key = "-".join(parts)
            if key not in same_shape or "_" in same_shape[key]:  # the dashed flag first
                same_shape[key] = choice
    close = difflib.get_close_matches("-".join(typed), list(same_shape), n=1, cutoff=0.6)
    return f" (did you mean {_quoted(same_shape[close[0]])}?)" if close else ""


def _words(name: str) -> list[str]:
    return [part for part in re.split(r"[-_.]+", name.lstrip("-").lower()) if part]


def _quoted(name: str) -> str:
    return msgspec.json.encode(name).decode()

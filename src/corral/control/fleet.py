"""``corral ctl`` given several ``--socket``: one request to every instance of a fleet, and
what each did with it.

By default every instance is asked at once, a thread each: a change answers only once the
instance's new workers serve (seconds), and the instances do not wait on each other. With
``one_at_a_time`` they are asked in the order given and the first failure stops the rollout
(a canary): the instances after it are not asked, and are reported as skipped. Either way the
outcomes come back in the order of the addresses.

Stdlib only, as ``ctl.py``, and no other module of ``corral.control``: the request to one
instance is passed in (``ask(address)``), so ``ctl.py`` imports this module without a cycle.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

__all__ = ["Outcome", "ask_all", "report"]


@dataclass(frozen=True)
class Outcome:
    """What one instance did with the request: answered (``status`` and ``answer``), failed
    (``error``, its one line; ``status`` None when no answer came), or was not asked
    (``skipped``, why)."""

    status: int | None = None
    answer: object = None
    error: str | None = None
    skipped: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None and self.skipped is None

    def as_json(self) -> dict[str, object]:
        if self.skipped is not None:
            return {"skipped": self.skipped}
        if self.error is not None:
            return {"status": self.status, "error": self.error}
        return {"status": self.status, "answer": self.answer}


Ask = Callable[[str], Outcome]  # the request to the instance at an address; never raises


def ask_all(addresses: Sequence[str], ask: Ask, one_at_a_time: bool = False) -> list[Outcome]:
    """``ask`` each address: all at once, or in order until the first failure. The outcomes
    are in the order of ``addresses``."""
    if not one_at_a_time:
        with ThreadPoolExecutor(max_workers=max(len(addresses), 1)) as pool:
            return list(pool.map(ask, addresses))
    outcomes: list[Outcome] = []
    failed: str | None = None  # the address that stopped the rollout
    for address in addresses:
        if failed is not None:
            outcomes.append(Outcome(skipped=f"not tried: {failed} failed before it"))
            continue
        outcome = ask(address)
        outcomes.append(outcome)
        if not outcome.succeeded:
            failed = address
    return outcomes


def report(addresses: Sequence[str], outcomes: Sequence[Outcome]) -> str:
    """The outcomes as one JSON object keyed by address, indented as ``corral ctl`` prints an
    answer."""
    document = {
        address: outcome.as_json() for address, outcome in zip(addresses, outcomes, strict=True)
    }
    return json.dumps(document, indent=4, ensure_ascii=False)

"""The read-time phases of a stored outcome (SPEC §3: "derived when read … the same way wherever it is read").

A run or result receipt holds PENDING checks with deadlines. Read at ``now`` each check past its deadline answers
its expiry verdict (``evaluation.read_outcome``), so what a verification *reads as* changes only at those deadlines.
``read_phases`` lists, for each distinct deadline, the outcome read from that instant on: the single-item read and
every list filter then come from this one definition (the Django layer stores the phases so SQL can filter on them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from verification.kernel.determination import Outcome
from verification.kernel.evaluation import read_outcome


@dataclass(frozen=True)
class Phase:
    """From ``starts_at`` (inclusive) until ``ends_at`` (exclusive; None: for ever) the payload reads as ``outcome``."""

    starts_at: datetime
    ends_at: datetime | None
    outcome: Outcome


def pending_deadlines(payload: Mapping[str, Any]) -> list[datetime]:
    """The distinct deadlines of the payload's PENDING checks, earliest first."""
    found = {
        datetime.fromisoformat(str(k["deadline"]))
        for c in payload.get("criteria", ())
        for k in c.get("checks", ())
        if k.get("deadline") is not None
    }
    return sorted(found)


def read_phases(payload: Mapping[str, Any]) -> list[Phase]:
    """The outcome read at each deadline and after it, one phase per distinct deadline (none without a PENDING).

    Before the first deadline the payload reads as issued; ``resolve_pending`` expires a check at ``now >=
    deadline``, so reading at the deadline itself gives the phase that starts there.
    """
    deadlines = pending_deadlines(payload)
    phases = []
    for i, starts_at in enumerate(deadlines):
        ends_at = deadlines[i + 1] if i + 1 < len(deadlines) else None
        phases.append(Phase(starts_at=starts_at, ends_at=ends_at, outcome=read_outcome(payload, now=starts_at)))
    return phases


__all__ = ["Phase", "pending_deadlines", "read_phases"]

"""View-model pieces the areas' presenters share (``reviewportal/<area>/presenters.py``): an artifact's text with its
cited spans marked, and a reason code in the registry's words (SPEC §11)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from verification.kernel.reasons import Reason, explain_if_registered


@dataclass(frozen=True)
class Segment:
    """A piece of an artifact's text; ``marked`` when a citation covers it (shown in <mark>, always escaped)."""

    text: str
    marked: bool


def segments(text: str, spans: Sequence[tuple[int, int]]) -> list[Segment]:
    """Split ``text`` into plain and marked pieces; overlapping or touching spans merge; bad spans are ignored."""
    good = sorted((s, e) for s, e in spans if isinstance(s, int) and isinstance(e, int) and 0 <= s < e <= len(text))
    merged: list[list[int]] = []
    for start, end in good:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[Segment] = []
    at = 0
    for start, end in merged:
        if start > at:
            out.append(Segment(text[at:start], False))
        out.append(Segment(text[start:end], True))
        at = end
    if at < len(text) or not out:
        out.append(Segment(text[at:], False))
    return out


def explain_code(code: Reason | str | None) -> str:
    """The registry's sentence for a code (SPEC §11); empty for none or for a code the registry does not know."""
    return explain_if_registered(code) or ""

"""The semantic scorer seam: routing a model's judgment (SPEC §6; seed 000 "When model output counts as evidence").

A semantic judgment can move a verdict down (a grounded cited conflict is FAIL) or route it to a person; never up.
Every outcome is flagged and routed to review, whatever the model said, so the most an injected instruction can
reach is a human review. Authority is always ``semantic``; nothing here can produce PASS.

Structural gate (SPEC §9): no module on the hard-gate decision path may import this one. It imports only the
registry, the verdict types and citation resolution.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Literal

from verification.kernel.errors import InvariantError
from verification.kernel.evidence import Citation, resolve_citation
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Check, Verdict


class SemanticOutcome(StrEnum):
    CITED_CONFLICT = "cited_conflict"
    CITED_SUPPORT = "cited_support"
    UNKNOWN_UNCITED = "unknown_uncited"
    UNGROUNDED = "ungrounded"
    ABSTAIN = "abstain"
    ESCALATE = "escalate"


_OUTCOME_REASON: Final[dict[SemanticOutcome, Reason]] = {
    SemanticOutcome.CITED_CONFLICT: Reason.SEMANTIC_CITED_CONFLICT,
    SemanticOutcome.CITED_SUPPORT: Reason.SEMANTIC_CITED_SUPPORT,
    SemanticOutcome.UNKNOWN_UNCITED: Reason.SEMANTIC_UNKNOWN_UNCITED,
    SemanticOutcome.UNGROUNDED: Reason.SEMANTIC_UNGROUNDED,
    SemanticOutcome.ABSTAIN: Reason.SEMANTIC_ABSTAIN,
    SemanticOutcome.ESCALATE: Reason.SEMANTIC_ESCALATE,
}

_DETAIL_CLIP: Final = 80


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _clip(value: str) -> str:
    return value if len(value) <= _DETAIL_CLIP else value[:_DETAIL_CLIP] + "…"


@dataclass(frozen=True)
class Judgment:
    """A semantic worker's judgment of one criterion, exactly as lenient as the wire: any field may be garbage.

    Construction never raises: a non-string field becomes ``""`` (or None), and a citation that is not a
    ``Citation`` is dropped and counted in ``malformed_citations`` (which makes the judgment ungrounded).
    ``typed_predicate`` None or blank means the judgment has no typed predicate. ``raw`` is what was received,
    kept for the record only.
    """

    criterion_id: str
    outcome_claimed: str
    citations: tuple[Citation, ...] = ()
    case_digest: str | None = None
    typed_predicate: str | None = None
    rationale: str = ""
    raw: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    malformed_citations: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "criterion_id", _text(self.criterion_id))
        object.__setattr__(self, "outcome_claimed", _text(self.outcome_claimed))
        object.__setattr__(self, "case_digest", _optional_text(self.case_digest))
        object.__setattr__(self, "typed_predicate", _optional_text(self.typed_predicate))
        object.__setattr__(self, "rationale", _text(self.rationale))
        object.__setattr__(self, "raw", self.raw if isinstance(self.raw, Mapping) else None)
        malformed = self.malformed_citations
        if isinstance(malformed, bool) or not isinstance(malformed, int) or malformed < 0:
            malformed = 1  # a garbage count cannot vouch for the citations
        items: object = self.citations
        kept: list[Citation] = []
        if isinstance(items, (tuple, list)):
            for item in items:
                if isinstance(item, Citation):
                    kept.append(item)
                else:
                    malformed += 1
        elif items is not None:
            malformed += 1
        object.__setattr__(self, "citations", tuple(kept))
        object.__setattr__(self, "malformed_citations", malformed)


def _get(raw: Mapping[Any, Any], key: str) -> object:
    try:
        return raw.get(key)
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


def parse_judgment(raw: object, *, criterion_id: str) -> Judgment:
    """Parse what a semantic worker sent (already-decoded JSON) leniently; never raises.

    ``criterion_id`` comes from the server (the check the result answers), never from the body. Read keys:
    ``outcome``, ``citations`` (a list of ``{evidence_id, start, end, quote, quote_hash}``), ``case_digest``,
    ``typed_predicate``, ``rationale``. A citation that is not an object counts as malformed; its fields are passed
    through untouched for ``resolve_citation`` to judge.
    """
    if not isinstance(raw, Mapping):
        return Judgment(criterion_id=criterion_id, outcome_claimed="", malformed_citations=0)
    citations: list[Citation] = []
    malformed = 0
    listed = _get(raw, "citations")
    if isinstance(listed, (list, tuple)):
        for item in listed:
            if isinstance(item, Mapping):
                fields: dict[str, Any] = {
                    name: _get(item, name) for name in ("evidence_id", "start", "end", "quote", "quote_hash")
                }
                citations.append(Citation(**fields))
            else:
                malformed += 1
    elif listed is not None:
        malformed += 1
    return Judgment(
        criterion_id=criterion_id,
        outcome_claimed=_text(_get(raw, "outcome")),
        citations=tuple(citations),
        case_digest=_optional_text(_get(raw, "case_digest")),
        typed_predicate=_optional_text(_get(raw, "typed_predicate")),
        rationale=_text(_get(raw, "rationale")),
        raw=raw,
        malformed_citations=malformed,
    )


def parse_outcome(value: object) -> SemanticOutcome | None:
    """The outcome a worker claimed, tolerant of case, spaces and hyphens; None when it names none of the six."""
    if not isinstance(value, str):
        return None
    key = value.strip().lower().replace("-", "_").replace(" ", "_")
    try:
        return SemanticOutcome(key)
    except ValueError:
        return None


@dataclass(frozen=True)
class SemanticRouting:
    """Where a judgment went: its check (authority ``semantic``, never PASS) and outcome, always flagged and routed.

    ``outcome`` is None only for a judgment without a typed predicate (NOT_RUN: it was not considered).
    """

    check: Check
    outcome: SemanticOutcome | None
    flagged: Literal[True] = True
    routed_to_review: Literal[True] = True

    def __post_init__(self) -> None:
        # SPEC §6: model output never says yes, and every semantic outcome goes to a person.
        if self.check.verdict is Verdict.PASS or self.check.authority is not Authority.SEMANTIC:
            raise InvariantError(Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS, "a semantic check is never a PASS")
        if self.flagged is not True or self.routed_to_review is not True:
            raise InvariantError(Reason.MALFORMED_RECORD, "every semantic outcome is flagged and routed to review")


def _grounding_failure(judgment: Judgment, frozen_case_digest: str | None, artifacts: Mapping[str, str]) -> str | None:
    """Why the judgment is not grounded (SPEC §6), or None: case frozen, digest matches, every citation resolves."""
    if not isinstance(frozen_case_digest, str) or not frozen_case_digest:
        return "the evaluation case is not frozen"
    if judgment.case_digest != frozen_case_digest:
        return "the judgment is not bound to the frozen evaluation case"
    if judgment.malformed_citations:
        return f"{judgment.malformed_citations} citation(s) malformed"
    for index, citation in enumerate(judgment.citations):
        reason = resolve_citation(citation, artifacts)
        if reason is not None:
            return f"citation {index} does not resolve: {reason.value}"
    return None


def _routing(
    judgment: Judgment,
    outcome: SemanticOutcome | None,
    verdict: Verdict,
    reason: Reason,
    detail: str,
    evidence_ids: tuple[str, ...] = (),
) -> SemanticRouting:
    check = Check(
        criterion=judgment.criterion_id,
        authority=Authority.SEMANTIC,
        verdict=verdict,
        reason=reason,
        evidence_ids=evidence_ids,
        detail=detail,
    )
    return SemanticRouting(check=check, outcome=outcome)


def route(judgment: Judgment, *, frozen_case_digest: str | None, artifacts: Mapping[str, str]) -> SemanticRouting:
    """Route one judgment by SPEC §6's table. Never PASS, always flagged and routed to review, never raises.

    In order, the first that applies:
    1. no typed predicate → NOT_RUN ``no-typed-predicate`` (outcome None);
    2. not grounded — case not frozen, its digest differs, a citation malformed or not resolving → UNKNOWN
       ``ungrounded``;
    3. the worker abstained or escalated → UNKNOWN ``abstain`` / ``escalate``; an outcome string that names none
       of the six (``"PASS"`` included) is no decision at all → UNKNOWN ``abstain``; a worker saying ``ungrounded``
       → UNKNOWN ``ungrounded``;
    4. no citations → UNKNOWN ``unknown-uncited`` (also when the worker said so itself);
    5. ``cited_conflict`` → FAIL ``cited-conflict``; ``cited_support`` → UNKNOWN ``cited-support``.
    Grounded outcomes carry the cited evidence ids, sorted, for the integrity proof.
    """
    if judgment.typed_predicate is None:
        return _routing(judgment, None, Verdict.NOT_RUN, Reason.NO_TYPED_PREDICATE, "no typed predicate")
    failure = _grounding_failure(judgment, frozen_case_digest, artifacts)
    if failure is not None:
        return _routing(judgment, SemanticOutcome.UNGROUNDED, Verdict.UNKNOWN, Reason.SEMANTIC_UNGROUNDED, failure)
    evidence_ids = tuple(sorted({c.evidence_id for c in judgment.citations}))
    claimed = parse_outcome(judgment.outcome_claimed)
    verdict = Verdict.UNKNOWN
    if claimed is None:
        outcome, detail = SemanticOutcome.ABSTAIN, f"unrecognised outcome {_clip(judgment.outcome_claimed)!r}: abstain"
    elif claimed in (SemanticOutcome.ABSTAIN, SemanticOutcome.ESCALATE, SemanticOutcome.UNGROUNDED):
        outcome, detail = claimed, f"the worker said {claimed}"
    elif not judgment.citations or claimed is SemanticOutcome.UNKNOWN_UNCITED:
        outcome, detail = SemanticOutcome.UNKNOWN_UNCITED, f"the worker said {claimed} without citations"
    elif claimed is SemanticOutcome.CITED_CONFLICT:
        # The one way down: a grounded cited conflict (SPEC §6).
        outcome, detail, verdict = claimed, "grounded cited conflict", Verdict.FAIL
    else:
        outcome, detail = SemanticOutcome.CITED_SUPPORT, "grounded cited support; only a person can pass it"
    return _routing(judgment, outcome, verdict, _OUTCOME_REASON[outcome], detail, evidence_ids)

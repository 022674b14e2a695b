"""Receipt payloads (SPEC §7): the one place their wire format is written.

A receipt's payload is what gets signed, so its shape is kernel logic: ``outcome_payload`` writes the outcome part of
a run's or a result's payload (the run's own fields around it: ``verification.runs``), ``decision_payload`` the whole
payload of a person's decision, and both write a check with ``check_payload``. Reading a payload back is
``evaluation.read_outcome``. The golden envelope test (tests/verification/test_golden_envelopes.py) pins the bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verification.kernel.decision import DecisionOutcome
from verification.kernel.determination import Outcome
from verification.kernel.verdicts import Check


def check_payload(check: Check) -> dict[str, Any]:
    """One check as a payload writes it; ``deadline``/``on_expiry`` are None unless it is PENDING."""
    return {
        "criterion": check.criterion,
        "authority": check.authority.value,
        "verdict": check.verdict.value,
        "reason": check.reason.value,
        "origin": check.origin.value,
        "evidence_ids": list(check.evidence_ids),
        "detail": check.detail,
        "deadline": check.pending.deadline.isoformat() if check.pending is not None else None,
        "on_expiry": check.pending.on_expiry.value if check.pending is not None else None,
    }


def outcome_payload(outcome: Outcome) -> dict[str, Any]:
    """The outcome part of a receipt payload: verdict, determination, score, confidence, flag, criteria, checks."""
    return {
        "verdict": outcome.verdict.value,
        "determination": outcome.determination.value if outcome.determination is not None else None,
        "score": outcome.score,
        "confidence": outcome.confidence,
        "flagged": outcome.flagged,
        "flag_reason": outcome.flag_reason,
        "reason": outcome.reason.value if outcome.reason is not None else None,
        "criteria": [
            {
                "criterion": c.criterion_id,
                "hard": c.hard,
                "weight": c.weight,
                "semantic": c.semantic,
                "verdict": c.verdict.value,
                "reason": c.reason.value,
                "authority": c.authority.value,
                "checks": [check_payload(k) for k in c.checks],
            }
            for c in outcome.criteria
        ],
    }


def decision_payload(
    *,
    prior_payload: Mapping[str, Any],
    prior: Outcome,
    outcome: DecisionOutcome,
    actor_id: str,
    actor_kind: str,
    superseded_receipt_id: str,
    superseded_kind: str,
) -> dict[str, Any]:
    """SPEC §7's payload for a person's decision: its own outcome (it replaces the folded verdict, SPEC §2), the one
    human check, who decided, the cited evidence with tier and independence (from ``prior_payload``, the superseded
    receipt's), its integrity proof, the receipt it supersedes and the rationale; and what it superseded (``prior``,
    as read when deciding)."""
    cited = set(outcome.cited_evidence_ids)
    return {
        "subject": prior_payload.get("subject"),
        "contract": prior_payload.get("contract"),
        "verdict": outcome.verdict.value,
        "determination": outcome.determination.value,
        "score": outcome.score,
        "confidence": outcome.confidence,
        "flagged": outcome.flagged,
        "flag_reason": outcome.flag_reason,
        "reason": outcome.reason.value,
        "checks": [check_payload(outcome.check)],
        "actor": {"id": actor_id, "kind": actor_kind},
        "authority": outcome.authority.value,
        "evidence": [e for e in prior_payload.get("evidence", ()) if str(e.get("id")) in cited],
        "cited_evidence_ids": list(outcome.cited_evidence_ids),
        "citations": [],
        "integrity_proof": outcome.integrity.as_payload(),
        "superseded": {
            "receipt_id": superseded_receipt_id,
            "kind": superseded_kind,
            "verdict": prior.verdict.value,
            "determination": prior.determination.value if prior.determination is not None else None,
            "reason": prior.reason.value if prior.reason is not None else None,
            "flag_reason": prior.flag_reason,
        },
        "supersedes_receipt_id": superseded_receipt_id,
        "rationale": outcome.rationale,
    }


__all__ = ["check_payload", "decision_payload", "outcome_payload"]

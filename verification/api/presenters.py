"""The API's representation of a verification (the second seed's shape), built from what the selectors return.

``verification_view`` reads the head receipt through ``verification.runs.selectors`` (``head_outcome``,
``verification_status``, ``latest_automated``) and shapes it for the wire: the seed's field names, ``proof_ref``,
each result's ``primitive``, spans and per-criterion flag. ``VerificationResponseSerializer`` renders it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from verification.kernel.chain import format_created_at
from verification.kernel.criteria import CriterionKind
from verification.kernel.determination import CriterionResult, Outcome, Status, roll_up
from verification.kernel.evaluation import integrity_from_payload, read_outcome
from verification.kernel.reasons import Reason, explain, explain_if_registered
from verification.runs import selectors as run_selectors
from verification.runs.models import Verification
from verification.trust.models import Receipt
from verification.trust.selectors import receipt_payload, untrusted_head

#: The second seed names each result's ``primitive``; ours are named by criterion kind.
PRIMITIVES: Final[dict[str, str]] = {
    CriterionKind.DIGEST.value: "content_digest@1",
    CriterionKind.UNCHANGED.value: "baseline_unchanged@1",
    CriterionKind.SEMANTIC.value: "llm_judge@1",
    CriterionKind.IMPORTED.value: "imported_result@1",
}


NO_CONTRACT_PRIMITIVE: Final = "contract@1"


def _criterion_flagged(result: CriterionResult, entries: Sequence[Mapping[str, Any]]) -> bool:
    """Would this criterion alone be flagged? The kernel's roll-up of it, with the proof of the items it cites."""
    cited = {e for k in result.checks for e in k.evidence_ids}
    proof = integrity_from_payload([e for e in entries if str(e.get("evidence_id")) in cited])
    return roll_up([result], integrity=proof, now=None).flagged


def _rationale(result: CriterionResult) -> str:
    decider = next((k for k in result.checks if k.reason is result.reason), None)
    text = explain(result.reason)
    if decider is not None and decider.detail:
        text = f"{text} ({decider.detail})"
    return text


def _stored_pending(payload: Mapping[str, Any], criterion_id: str) -> tuple[str | None, str | None]:
    for c in payload.get("criteria", ()):
        if c.get("criterion") == criterion_id:
            for k in c.get("checks", ()):
                if k.get("deadline") is not None:
                    return str(k["deadline"]), k.get("on_expiry")
    return None, None


def _spans(result: CriterionResult, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    evidence = {str(e.get("id")): e for e in payload.get("evidence", ())}
    cited = sorted({e for k in result.checks for e in k.evidence_ids})
    spans: list[dict[str, Any]] = []
    for evidence_id in cited:
        item = evidence.get(evidence_id, {})
        base = {
            "evidence_id": evidence_id,
            "trust_tier": item.get("trust_tier"),
            "sha256": item.get("sha256"),
            "symbol": item.get("symbol"),
        }
        citations = [c for c in payload.get("citations", ()) if str(c.get("evidence_id")) == evidence_id]
        if not citations:
            spans.append(base)
        for c in citations:
            spans.append({**base, "start": c.get("start"), "end": c.get("end"), "quote_hash": c.get("quote_hash")})
    return spans


def _results(verification: Verification, outcome: Outcome, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    kinds: dict[str, str] = {}
    if verification.rubric is not None:
        kinds = {c.id: c.kind.value for c in run_selectors.rubric_criteria(verification.rubric).criteria}
    entries = list(payload.get("integrity_proof", ()))
    out = []
    for c in outcome.criteria:
        deadline, on_expiry = _stored_pending(payload, c.criterion_id)
        determination = c.determination
        out.append(
            {
                "criterion": c.criterion_id,
                "primitive": PRIMITIVES.get(kinds.get(c.criterion_id, ""), NO_CONTRACT_PRIMITIVE),
                "determination": determination.value if determination is not None else None,
                "rationale": _rationale(c),
                "evidence_spans": _spans(c, payload),
                "flagged": _criterion_flagged(c, entries),
                "verdict": c.verdict.value,
                "reason": c.reason.value,
                "authority": c.authority.value,
                "hard": c.hard,
                "deadline": deadline,
                "on_expiry": on_expiry,
            }
        )
    return out


#: How a verification whose head receipt is signed by a key the trust root does not know reads (SPEC §8): no verdict
#: is taken from it; it is flagged for review with ``key-not-in-pin-journal``, never ``met``.
UNTRUSTED_HEAD_VIEW: Final[Mapping[str, Any]] = {
    "determination": None,
    "score": None,
    "confidence": None,
    "flagged": True,
    "flag_reason": Reason.KEY_NOT_IN_PIN_JOURNAL.value,
    "verdict": {"results": []},
    "kernel_verdict": None,
    "reason": Reason.KEY_NOT_IN_PIN_JOURNAL.value,
}


def verification_view(
    verification: Verification,
    *,
    now: datetime,
    head: Receipt | None | run_selectors.Unread = run_selectors.UNREAD,
    automated: Receipt | None | run_selectors.Unread = run_selectors.UNREAD,
) -> dict[str, Any]:
    """A verification as the API returns it (the second seed's shape) resolved at ``now``.

    Seed fields: ``id``, ``status``, ``determination``, ``score``, ``confidence``, ``flagged``, ``flag_reason``,
    ``submission_hash``, ``proof_ref``, ``verdict.results[]`` (``primitive``, ``determination``, ``rationale``,
    ``evidence_spans[].trust_tier``, ``flagged``). Ours: ``kernel_verdict``, ``reason``, ``reason_text``, per result
    ``criterion``, ``verdict``, ``reason``, ``authority``, ``hard``, ``deadline``, ``on_expiry``; and ``task``,
    ``cycle``, ``rubric_hash``, ``submitted_at``, ``submitted_by``, ``attempts``, ``last_error`` (when failed),
    ``head_receipt_id``, ``head_receipt_kind``, ``supersedes``, ``awaiting_evidence``, ``human_decided``.
    ``determination``, ``score`` and ``confidence`` are null until ``succeeded``. The values come from the signed
    head receipt (the columns on ``Verification`` are only caches): ``head`` as the caller read it
    (``run_selectors.verification_and_head``, ``heads_of``), else read here; likewise ``automated``, the latest run or
    result a decision head superseded (``run_selectors.latest_automated_of``).
    """
    head, outcome = run_selectors.head_outcome(verification, now=now, head=head)
    status = run_selectors.verification_status(verification, head=head, outcome=outcome)
    view: dict[str, Any] = {
        "id": str(verification.pk),
        "status": status,
        "determination": None,
        "score": None,
        "confidence": None,
        "flagged": False,
        "flag_reason": None,
        "submission_hash": verification.submission_hash,
        "proof_ref": f"/v1/verifications/{verification.pk}/proof",
        "verdict": {"results": []},
        "kernel_verdict": None,
        "reason": None,
        "reason_text": None,
        "task": str(verification.task_id) if verification.task_id else None,
        "cycle": verification.cycle,
        "rubric_hash": verification.rubric_hash,
        "submitted_at": format_created_at(verification.submitted_at),
        "submitted_by": verification.submitted_by.name if verification.submitted_by else None,
        "attempts": verification.attempts,
        "last_error": verification.last_error or None if status == Status.FAILED else None,
        "head_receipt_id": head.content_hash if head is not None else None,
        "head_receipt_kind": head.kind if head is not None else None,
        "supersedes": str(verification.supersedes_id) if verification.supersedes_id else None,
        "awaiting_evidence": verification.awaiting_evidence,
        "human_decided": verification.human_decided,
        "claims": [],
    }
    if head is None:
        return view
    if untrusted_head(head):
        return {**view, **UNTRUSTED_HEAD_VIEW, "reason_text": explain(Reason.KEY_NOT_IN_PIN_JOURNAL)}
    payload = receipt_payload(head)
    if outcome is None:  # a head of another shape (a person's decision): its signed top-level fields
        for name in ("determination", "score", "confidence", "flagged", "flag_reason"):
            view[name] = payload.get(name, view[name])
        view["kernel_verdict"] = payload.get("verdict")
        reason = payload.get("reason")
        view["reason"] = reason
        view["reason_text"] = explain_if_registered(reason)
        # The per-criterion results are those of the latest run or result the decision superseded, as read now.
        if automated is run_selectors.UNREAD:
            automated = run_selectors.latest_automated(verification)
        if automated is not None:
            automated_payload = receipt_payload(automated)
            view["verdict"] = {
                "results": _results(verification, read_outcome(automated_payload, now=now), automated_payload)
            }
            view["claims"] = list(automated_payload.get("claims", ()))
        return view
    succeeded = status == Status.SUCCEEDED
    view.update(
        {
            "determination": outcome.determination.value if succeeded and outcome.determination else None,
            "score": outcome.score if succeeded else None,
            "confidence": outcome.confidence if succeeded else None,
            "flagged": outcome.flagged,
            "flag_reason": outcome.flag_reason,
            "verdict": {"results": _results(verification, outcome, payload)},
            "claims": list(payload.get("claims", ())),
            "kernel_verdict": outcome.verdict.value,
            "reason": outcome.reason.value if outcome.reason is not None else None,
            "reason_text": explain(outcome.reason) if outcome.reason is not None else None,
        }
    )
    return view

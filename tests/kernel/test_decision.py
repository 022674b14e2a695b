"""A human decision supersedes, it does not join (SPEC §2, §9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from verification.kernel.decision import DECISION_CRITERION, DecisionOutcome, decide
from verification.kernel.determination import (
    RAIL_REASONS,
    Determination,
    Outcome,
    Status,
    automation_gate,
    criterion_result,
    roll_up,
)
from verification.kernel.digests import sha256_digest
from verification.kernel.errors import DecisionRefused, InvariantError
from verification.kernel.integrity import IntegrityProof, StoredItem, recheck
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Check, ExpiryVerdict, Origin, Pending, Verdict

T0 = datetime(2025, 1, 1, tzinfo=UTC)
BYTES = b"the log the reviewer read"
DIGEST = sha256_digest(BYTES)
RUN_PROOF = recheck([StoredItem("e1", DIGEST, BYTES)])
CITED_PROOF = recheck([StoredItem("r1", DIGEST, BYTES)])


def check(
    verdict: Verdict,
    *,
    cid: str = "c1",
    authority: Authority = Authority.DETERMINISTIC,
    reason: Reason = Reason.DIGEST_MATCH,
) -> Check:
    return Check(
        criterion=cid,
        authority=authority,
        verdict=verdict,
        reason=reason,
        origin=Origin.ORACLE_SEAM if verdict is Verdict.MISMATCH else Origin.EVALUATOR,
        pending=Pending(deadline=T0, on_expiry=ExpiryVerdict.UNKNOWN) if verdict is Verdict.PENDING else None,
    )


def outcome_of(*checks: Check, hard: bool = True, now: datetime | None = None) -> Outcome:
    """The prior outcome: one criterion per check, rolled up as read now."""
    criteria = [criterion_result(c.criterion, hard=hard, checks=[c]) for c in checks]
    return roll_up(criteria, integrity=RUN_PROOF, now=now)


def pass_over(prior: Outcome | DecisionOutcome, **overrides: object) -> DecisionOutcome:
    arguments: dict[str, object] = {
        "prior": prior,
        "verdict": Verdict.PASS,
        "cited_evidence_ids": ["r1"],
        "integrity": CITED_PROOF,
        "rationale": "Read the log; the migration ran cleanly.",
    }
    arguments.update(overrides)
    return decide(**arguments)  # type: ignore[arg-type]


def refused(prior: Outcome | DecisionOutcome, **overrides: object) -> Reason:
    with pytest.raises(DecisionRefused) as exc:
        pass_over(prior, **overrides)
    return exc.value.reason


UNKNOWN_PRIOR = outcome_of(check(Verdict.UNKNOWN, reason=Reason.BELOW_TRUST_TIER))


# --- accepted ----------------------------------------------------------------------------------------------------


def test_a_human_pass_replaces_the_folded_verdict() -> None:
    assert UNKNOWN_PRIOR.verdict is Verdict.UNKNOWN and UNKNOWN_PRIOR.flagged
    decision = pass_over(UNKNOWN_PRIOR)
    # Replaces, does not join: an old UNKNOWN would outrank every PASS in a fold.
    assert decision.verdict is Verdict.PASS
    assert decision.determination is Determination.MET
    assert (decision.score, decision.confidence) == (1.0, 1.0)
    assert (decision.flagged, decision.flag_reason) == (False, None)
    assert (decision.authority, decision.reason) == (Authority.HUMAN, Reason.HUMAN_DECISION)
    assert decision.status_running is False
    assert decision.check == Check(
        criterion=DECISION_CRITERION,
        authority=Authority.HUMAN,
        verdict=Verdict.PASS,
        reason=Reason.HUMAN_DECISION,
        evidence_ids=("r1",),
    )
    assert decision.cited_evidence_ids == ("r1",)
    assert decision.integrity is CITED_PROOF
    assert decision.rationale == "Read the log; the migration ran cleanly."
    assert decision.criteria == UNKNOWN_PRIOR.criteria


def test_a_human_pass_opens_the_automation_gate() -> None:
    decision = pass_over(UNKNOWN_PRIOR)
    assert automation_gate(
        status=Status.SUCCEEDED, determination=decision.determination, flagged=decision.flagged, proof_verified=True
    )


@pytest.mark.parametrize(
    "prior",
    [
        outcome_of(check(Verdict.UNKNOWN, reason=Reason.BELOW_TRUST_TIER)),
        outcome_of(check(Verdict.NOT_RUN, authority=Authority.SEMANTIC, reason=Reason.NO_TYPED_PREDICATE)),
        outcome_of(check(Verdict.PENDING, authority=Authority.IMPORTED, reason=Reason.RESULT_AWAITED), now=T0),
        outcome_of(check(Verdict.UNKNOWN, authority=Authority.SEMANTIC, reason=Reason.SEMANTIC_CITED_SUPPORT)),
        outcome_of(check(Verdict.FAIL, authority=Authority.SEMANTIC, reason=Reason.SEMANTIC_CITED_CONFLICT)),
        outcome_of(check(Verdict.PASS, authority=Authority.SEMANTIC, reason=Reason.SEMANTIC_CITED_SUPPORT)),
        outcome_of(check(Verdict.FAIL, authority=Authority.IMPORTED, reason=Reason.IMPORTED_RESULT)),
        outcome_of(check(Verdict.PASS, authority=Authority.IMPORTED, reason=Reason.IMPORTED_RESULT)),
        outcome_of(check(Verdict.UNKNOWN, reason=Reason.MISSING_BASELINE)),
        roll_up([criterion_result("c1", checks=[check(Verdict.PASS)])], integrity=recheck([])),
    ],
    ids=[
        "unknown",
        "not_run",
        "expired-pending",
        "semantic-support",
        "semantic-conflict",
        "semantic-pass",
        "imported-fail",
        "imported-pass",
        "missing-baseline",
        "no-proof-pass",
    ],
)
def test_a_human_may_pass_over(prior: Outcome) -> None:
    assert prior.verdict is not Verdict.PASS and prior.flagged
    assert pass_over(prior).verdict is Verdict.PASS


def test_a_human_may_pass_over_a_fail_whose_evidence_bytes_changed() -> None:
    # The FAIL cites changed bytes, so it reads as UNKNOWN (never a FAIL charged to the submitter).
    criteria = [
        criterion_result(
            "c1",
            checks=[Check("c1", Authority.DETERMINISTIC, Verdict.FAIL, Reason.DIGEST_DIFFERS, evidence_ids=("e1",))],
        )
    ]
    prior = roll_up(criteria, integrity=recheck([StoredItem("e1", DIGEST, b"changed")]))
    assert prior.reason is Reason.EVIDENCE_INTEGRITY_MISMATCH
    assert pass_over(prior).verdict is Verdict.PASS


@pytest.mark.parametrize(
    "prior",
    [
        outcome_of(check(Verdict.MISMATCH, reason=Reason.BASELINE_CHANGED)),
        outcome_of(check(Verdict.FAIL, reason=Reason.DIGEST_DIFFERS)),
        outcome_of(check(Verdict.PASS)),
        outcome_of(check(Verdict.UNKNOWN, reason=Reason.BELOW_TRUST_TIER)),
    ],
    ids=["mismatch", "deterministic-fail", "pass", "unknown"],
)
def test_a_human_may_fail_anything(prior: Outcome) -> None:
    decision = pass_over(prior, verdict=Verdict.FAIL, cited_evidence_ids=[], integrity=recheck([]))
    assert decision.verdict is Verdict.FAIL
    assert decision.determination is Determination.NOT_MET
    assert (decision.score, decision.confidence) == (0.0, 1.0)
    # A person already looked: not flagged.
    assert (decision.flagged, decision.flag_reason) == (False, None)
    assert decision.check.verdict is Verdict.FAIL and decision.check.authority is Authority.HUMAN
    assert not automation_gate(
        status=Status.SUCCEEDED, determination=decision.determination, flagged=decision.flagged, proof_verified=True
    )


def test_a_human_fail_may_cite_evidence_whose_bytes_changed() -> None:
    broken = recheck([StoredItem("r1", DIGEST, b"changed")])
    decision = pass_over(UNKNOWN_PRIOR, verdict=Verdict.FAIL, integrity=broken)
    assert decision.verdict is Verdict.FAIL and decision.integrity is broken


def test_citations_are_deduplicated_in_order() -> None:
    proof = recheck([StoredItem("r1", DIGEST, BYTES), StoredItem("r2", DIGEST, BYTES)])
    decision = pass_over(UNKNOWN_PRIOR, cited_evidence_ids=["r2", "r1", "r2"], integrity=proof)
    assert decision.cited_evidence_ids == ("r2", "r1")
    assert decision.check.evidence_ids == ("r2", "r1")


# --- refused -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("verdict", [Verdict.UNKNOWN, Verdict.NOT_RUN, Verdict.PENDING, Verdict.MISMATCH, "PASS"])
def test_only_pass_or_fail_may_be_decided(verdict: object) -> None:
    assert refused(UNKNOWN_PRIOR, verdict=verdict) is Reason.DECISION_VERDICT_NOT_ALLOWED


@pytest.mark.parametrize("rationale", ["", "   ", "\n\t", None])
def test_a_decision_needs_a_rationale(rationale: object) -> None:
    assert refused(UNKNOWN_PRIOR, rationale=rationale) is Reason.RATIONALE_REQUIRED
    with pytest.raises(DecisionRefused) as exc:
        pass_over(UNKNOWN_PRIOR, verdict=Verdict.FAIL, rationale=rationale)
    assert exc.value.reason is Reason.RATIONALE_REQUIRED


def test_rationale_required_is_registered() -> None:
    assert Reason.RATIONALE_REQUIRED.value == "rationale-required"


@pytest.mark.parametrize("code", sorted(RAIL_REASONS))
@pytest.mark.parametrize("verdict", [Verdict.PASS, Verdict.FAIL])
def test_a_rail_refusal_refuses_the_decision_with_its_code(code: Reason, verdict: Verdict) -> None:
    assert refused(UNKNOWN_PRIOR, verdict=verdict, rail_refusal=code) is code


def test_the_verdict_is_checked_before_the_rail() -> None:
    assert (
        refused(UNKNOWN_PRIOR, verdict=Verdict.UNKNOWN, rail_refusal=Reason.WORKER_SELF_VERIFICATION)
        is Reason.DECISION_VERDICT_NOT_ALLOWED
    )


def test_the_rail_is_checked_before_the_rationale() -> None:
    assert refused(UNKNOWN_PRIOR, rationale="", rail_refusal=Reason.STALE_CYCLE) is Reason.STALE_CYCLE


@pytest.mark.parametrize("hard", [True, False])
def test_no_human_pass_over_a_mismatch(hard: bool) -> None:
    prior = outcome_of(
        check(Verdict.PASS), check(Verdict.MISMATCH, cid="c2", reason=Reason.BASELINE_CHANGED), hard=hard
    )
    assert refused(prior) is Reason.MISMATCH_NEEDS_NEW_EVIDENCE


def test_no_human_pass_over_a_mismatch_that_expired_from_pending() -> None:
    pending = Check(
        "c1",
        Authority.DETERMINISTIC,
        Verdict.PENDING,
        Reason.RESULT_AWAITED,
        origin=Origin.ORACLE_SEAM,
        pending=Pending(deadline=T0, on_expiry=ExpiryVerdict.MISMATCH),
    )
    prior = roll_up([criterion_result("c1", checks=[pending])], integrity=RUN_PROOF, now=T0 + timedelta(days=1))
    assert prior.verdict is Verdict.MISMATCH
    assert refused(prior) is Reason.MISMATCH_NEEDS_NEW_EVIDENCE


@pytest.mark.parametrize("hard", [True, False])
def test_no_human_pass_over_a_deterministic_fail(hard: bool) -> None:
    prior = outcome_of(check(Verdict.PASS), check(Verdict.FAIL, cid="c2", reason=Reason.DIGEST_DIFFERS), hard=hard)
    assert refused(prior) is Reason.DETERMINISTIC_FAIL_NEEDS_NEW_EVIDENCE


def test_no_human_pass_over_a_deterministic_fail_hidden_under_a_mismatch_gives_the_mismatch_code() -> None:
    criteria = [
        criterion_result(
            "c1",
            checks=[
                check(Verdict.FAIL, reason=Reason.DIGEST_DIFFERS),
                check(Verdict.MISMATCH, reason=Reason.BASELINE_CHANGED),
            ],
        )
    ]
    prior = roll_up(criteria, integrity=RUN_PROOF)
    assert refused(prior) is Reason.MISMATCH_NEEDS_NEW_EVIDENCE


def test_no_human_pass_over_a_deterministic_fail_check_that_does_not_decide_its_criterion() -> None:
    criteria = [
        criterion_result(
            "c1",
            checks=[
                check(Verdict.FAIL, reason=Reason.DIGEST_DIFFERS),
                check(Verdict.UNKNOWN, reason=Reason.UNNAMED_ACTOR),
            ],
        )
    ]
    prior = roll_up(criteria, integrity=RUN_PROOF)
    assert prior.criteria[0].verdict is Verdict.FAIL
    assert refused(prior) is Reason.DETERMINISTIC_FAIL_NEEDS_NEW_EVIDENCE


def test_a_human_fail_does_not_launder_a_mismatch_for_a_later_pass() -> None:
    prior = outcome_of(check(Verdict.MISMATCH, reason=Reason.BASELINE_CHANGED))
    human_fail = pass_over(prior, verdict=Verdict.FAIL)
    assert human_fail.criteria == prior.criteria
    assert refused(human_fail) is Reason.MISMATCH_NEEDS_NEW_EVIDENCE
    deterministic = pass_over(outcome_of(check(Verdict.FAIL, reason=Reason.DIGEST_DIFFERS)), verdict=Verdict.FAIL)
    assert refused(deterministic) is Reason.DETERMINISTIC_FAIL_NEEDS_NEW_EVIDENCE


def test_a_human_may_pass_over_a_previous_human_fail_of_an_unknown() -> None:
    human_fail = pass_over(UNKNOWN_PRIOR, verdict=Verdict.FAIL)
    assert pass_over(human_fail).verdict is Verdict.PASS


@pytest.mark.parametrize("cited", [[], ["  "], [""]])
def test_a_human_pass_must_cite_evidence(cited: list[str]) -> None:
    assert refused(UNKNOWN_PRIOR, cited_evidence_ids=cited) is Reason.DECISION_CITES_NO_EVIDENCE


def test_cited_ids_are_a_sequence_not_a_string() -> None:
    assert refused(UNKNOWN_PRIOR, cited_evidence_ids="r1") is Reason.DECISION_CITES_NO_EVIDENCE


@pytest.mark.parametrize(
    ("proof", "code"),
    [
        (recheck([StoredItem("r1", DIGEST, None)]), Reason.MISSING_EVIDENCE_INTEGRITY_PROOF),
        (recheck([StoredItem("r1", DIGEST, BYTES + b"!")]), Reason.EVIDENCE_INTEGRITY_MISMATCH),
        (recheck([StoredItem("r1", DIGEST, BYTES, redacted=True)]), Reason.EVIDENCE_REDACTED),
        (recheck([]), Reason.MISSING_EVIDENCE_INTEGRITY_PROOF),
        (recheck([StoredItem("r2", DIGEST, BYTES)]), Reason.MISSING_EVIDENCE_INTEGRITY_PROOF),
        (
            recheck([StoredItem("r1", DIGEST, BYTES), StoredItem("r2", DIGEST, b"other")]),
            Reason.EVIDENCE_INTEGRITY_MISMATCH,
        ),
    ],
    ids=["missing", "changed", "redacted", "empty", "not-covering", "other-entry-changed"],
)
def test_a_human_pass_needs_a_complete_integrity_proof_over_its_citations(proof: IntegrityProof, code: Reason) -> None:
    assert refused(UNKNOWN_PRIOR, integrity=proof) is code


def test_the_prior_is_checked_before_the_citations() -> None:
    prior = outcome_of(check(Verdict.MISMATCH, reason=Reason.BASELINE_CHANGED))
    assert refused(prior, cited_evidence_ids=[]) is Reason.MISMATCH_NEEDS_NEW_EVIDENCE


# --- the outcome cannot be built invalid -------------------------------------------------------------------------


def _fields(decision: DecisionOutcome) -> dict[str, object]:
    return {name: getattr(decision, name) for name in DecisionOutcome.__dataclass_fields__}


@pytest.mark.parametrize(
    "overrides",
    [
        {"flagged": True},
        {"flag_reason": "needs_review: x"},
        {"score": 0.5},
        {"confidence": 0.9},
        {"determination": Determination.PARTIAL},
        {"authority": Authority.SEMANTIC},
        {"reason": Reason.DIGEST_MATCH},
        {"rationale": " "},
        {"cited_evidence_ids": ()},
        {"integrity": recheck([])},
        {"status_running": True},
        {"verdict": Verdict.UNKNOWN},
    ],
)
def test_a_decision_outcome_cannot_be_built_invalid(overrides: dict[str, object]) -> None:
    fields = _fields(pass_over(UNKNOWN_PRIOR))
    fields.update(overrides)
    with pytest.raises(InvariantError) as exc:
        DecisionOutcome(**fields)  # type: ignore[arg-type]
    assert exc.value.reason is Reason.MALFORMED_RECORD


def test_a_decision_outcome_rebuilt_from_its_fields_is_equal() -> None:
    decision = pass_over(UNKNOWN_PRIOR)
    assert DecisionOutcome(**_fields(decision)) == decision  # type: ignore[arg-type]

"""Determinations, score, confidence, flags, the PASS gate and the automation gate (SPEC §2, §3)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.determination import (
    INTEGRITY_REASONS,
    RAIL_REASONS,
    CriterionResult,
    Determination,
    Outcome,
    Status,
    automation_gate,
    criterion_result,
    determination_of,
    roll_up,
)
from verification.kernel.digests import sha256_digest
from verification.kernel.errors import InvariantError
from verification.kernel.integrity import StoredItem, recheck
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Check, ExpiryVerdict, Origin, Pending, Verdict

T0 = datetime(2025, 1, 1, tzinfo=UTC)
BYTES = b"artifact bytes"
DIGEST = sha256_digest(BYTES)
PROOF = recheck([StoredItem("e1", DIGEST, BYTES), StoredItem("e2", DIGEST, BYTES)])
NO_PROOF = recheck([])


def passed(
    cid: str = "c1", authority: Authority = Authority.DETERMINISTIC, evidence: tuple[str, ...] = ("e1",)
) -> Check:
    return Check(
        criterion=cid, authority=authority, verdict=Verdict.PASS, reason=Reason.DIGEST_MATCH, evidence_ids=evidence
    )


def failed(
    cid: str = "c1", authority: Authority = Authority.DETERMINISTIC, reason: Reason = Reason.DIGEST_DIFFERS
) -> Check:
    return Check(criterion=cid, authority=authority, verdict=Verdict.FAIL, reason=reason, evidence_ids=("e1",))


def unknown(
    cid: str = "c1", reason: Reason = Reason.BELOW_TRUST_TIER, authority: Authority = Authority.DETERMINISTIC
) -> Check:
    return Check(criterion=cid, authority=authority, verdict=Verdict.UNKNOWN, reason=reason)


def not_run(cid: str = "c1") -> Check:
    return Check(criterion=cid, authority=Authority.SEMANTIC, verdict=Verdict.NOT_RUN, reason=Reason.NO_TYPED_PREDICATE)


def mismatch(cid: str = "c1") -> Check:
    return Check(
        criterion=cid,
        authority=Authority.DETERMINISTIC,
        verdict=Verdict.MISMATCH,
        reason=Reason.BASELINE_CHANGED,
        origin=Origin.ORACLE_SEAM,
        evidence_ids=("e1",),
    )


def pending(cid: str = "c1", on_expiry: ExpiryVerdict = ExpiryVerdict.UNKNOWN) -> Check:
    return Check(
        criterion=cid,
        authority=Authority.IMPORTED,
        verdict=Verdict.PENDING,
        reason=Reason.RESULT_AWAITED,
        pending=Pending(deadline=T0, on_expiry=on_expiry),
    )


def crit(cid: str, *checks: Check, hard: bool = True, weight: float = 1.0) -> CriterionResult:
    return criterion_result(cid, hard=hard, weight=weight, checks=checks)


# --- SPEC §3's table, row by row ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "determination"),
    [
        (Verdict.PASS, Determination.MET),
        (Verdict.FAIL, Determination.NOT_MET),
        (Verdict.MISMATCH, Determination.NOT_MET),
        (Verdict.UNKNOWN, Determination.CANNOT_DETERMINE),
        (Verdict.NOT_RUN, Determination.CANNOT_DETERMINE),
        (Verdict.PENDING, None),
    ],
)
def test_determination_table(verdict: Verdict, determination: Determination | None) -> None:
    assert determination_of(verdict) is determination


def test_wire_values() -> None:
    assert [d.value for d in Determination] == ["met", "not_met", "cannot_determine", "partial"]
    assert [s.value for s in Status] == ["queued", "running", "succeeded", "failed"]


def test_table_row_pass_is_met_and_clean() -> None:
    outcome = roll_up([crit("c1", passed())], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.PASS, Determination.MET)
    assert (outcome.score, outcome.confidence, outcome.flagged, outcome.flag_reason) == (1.0, 1.0, False, None)
    assert outcome.reason is Reason.DIGEST_MATCH
    assert outcome.status_running is False


def test_table_row_fail_is_not_met_and_not_flagged() -> None:
    outcome = roll_up([crit("c1", failed()), crit("c2", passed("c2"))], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.FAIL, Determination.NOT_MET)
    assert outcome.score == 0.5
    assert outcome.confidence == 1.0
    assert (outcome.flagged, outcome.flag_reason) == (False, None)
    assert outcome.reason is Reason.DIGEST_DIFFERS


def test_table_row_mismatch_is_not_met_and_always_flagged() -> None:
    outcome = roll_up([crit("c1", mismatch()), crit("c2", passed("c2"))], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.MISMATCH, Determination.NOT_MET)
    assert outcome.flagged is True
    assert outcome.flag_reason == "mismatch: baseline-changed"
    assert outcome.score == 0.5


def test_table_row_unknown_is_cannot_determine() -> None:
    outcome = roll_up([crit("c1", unknown()), crit("c2", passed("c2"))], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.UNKNOWN, Determination.CANNOT_DETERMINE)
    assert (outcome.score, outcome.confidence) == (None, 0.0)
    assert outcome.flag_reason == "needs_review: below-trust-tier"
    assert outcome.reason is Reason.BELOW_TRUST_TIER


def test_table_row_not_run_is_cannot_determine() -> None:
    outcome = roll_up([crit("c1", not_run()), crit("c2", passed("c2"))], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.NOT_RUN, Determination.CANNOT_DETERMINE)
    assert (outcome.score, outcome.confidence) == (None, 0.0)
    assert outcome.flag_reason == "needs_review: no-typed-predicate"


def test_table_row_pending_is_running_when_issued() -> None:
    outcome = roll_up([crit("c1", pending()), crit("c2", passed("c2"))], integrity=PROOF, now=None)
    assert outcome.verdict is Verdict.PENDING
    assert outcome.determination is None
    assert outcome.status_running is True
    assert outcome.score is None
    assert (outcome.flagged, outcome.flag_reason) == (False, None)
    assert outcome.reason is Reason.RESULT_AWAITED
    # The receipt still says PENDING, with its deadline.
    (check,) = outcome.criteria[0].checks
    assert check.verdict is Verdict.PENDING and check.pending is not None


def test_pending_is_never_resolved_when_issuing_even_past_its_deadline() -> None:
    outcome = roll_up([crit("c1", pending())], integrity=PROOF)
    assert outcome.status_running is True


def test_pending_before_its_deadline_is_still_running_when_read() -> None:
    outcome = roll_up([crit("c1", pending()), crit("c2", passed("c2"))], integrity=PROOF, now=T0 - timedelta(seconds=1))
    assert outcome.status_running is True and outcome.determination is None


def test_expired_pending_answers_its_expiry_verdict_when_read() -> None:
    criteria = [crit("c1", pending()), crit("c2", passed("c2"))]
    outcome = roll_up(criteria, integrity=PROOF, now=T0 + timedelta(hours=1))
    assert outcome.status_running is False
    assert (outcome.verdict, outcome.determination) == (Verdict.UNKNOWN, Determination.CANNOT_DETERMINE)
    assert outcome.reason is Reason.PENDING_EXPIRED
    assert outcome.flag_reason == "needs_review: pending-expired"
    # The input (the stored receipt's checks) is untouched.
    assert criteria[0].verdict is Verdict.PENDING


def test_expired_pending_with_fail_expiry_is_not_met() -> None:
    outcome = roll_up([crit("c1", pending(on_expiry=ExpiryVerdict.FAIL))], integrity=PROOF, now=T0)
    assert (outcome.verdict, outcome.determination) == (Verdict.FAIL, Determination.NOT_MET)
    assert outcome.reason is Reason.PENDING_EXPIRED
    # Decided by an imported authority, not a clean deterministic not_met: a person must look.
    assert outcome.flag_reason == "needs_review: pending-expired"


def test_an_imported_fail_is_not_met_and_flagged() -> None:
    outcome = roll_up(
        [crit("c1", passed()), crit("c2", failed("c2", Authority.IMPORTED, Reason.IMPORTED_RESULT), hard=False)],
        integrity=PROOF,
    )
    assert (outcome.verdict, outcome.determination) == (Verdict.PASS, Determination.PARTIAL)
    assert outcome.confidence == 0.5
    assert outcome.flag_reason == "needs_review: imported-result"


def test_a_hard_fail_outranks_a_pending_so_the_run_is_not_running() -> None:
    outcome = roll_up([crit("c1", pending()), crit("c2", failed("c2"))], integrity=PROOF)
    assert outcome.status_running is False
    assert (outcome.verdict, outcome.determination) == (Verdict.FAIL, Determination.NOT_MET)


def test_a_soft_fail_and_a_pending_are_running() -> None:
    outcome = roll_up([crit("c1", pending()), crit("c2", failed("c2"), hard=False)], integrity=PROOF)
    assert outcome.status_running is True and outcome.determination is None


# --- the roll-up: not_met > cannot_determine > partial > met ----------------------------------------------------


def test_soft_fail_is_partial_and_left_out_of_the_verdict() -> None:
    outcome = roll_up([crit("c1", passed()), crit("c2", failed("c2"), hard=False)], integrity=PROOF)
    assert outcome.determination is Determination.PARTIAL
    assert outcome.verdict is Verdict.PASS
    assert outcome.score == 0.5
    assert outcome.confidence == 1.0
    assert (outcome.flagged, outcome.flag_reason) == (False, None)


def test_a_partial_pass_still_needs_the_integrity_proof() -> None:
    outcome = roll_up([crit("c1", passed()), crit("c2", failed("c2"), hard=False)], integrity=NO_PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.UNKNOWN, Determination.CANNOT_DETERMINE)
    assert outcome.flag_reason == "needs_review: missing-evidence-integrity-proof"


def test_hard_not_met_outranks_cannot_determine() -> None:
    outcome = roll_up([crit("c1", failed()), crit("c2", unknown("c2"))], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.FAIL, Determination.NOT_MET)
    assert outcome.score == 0.0
    assert outcome.flagged is False


def test_cannot_determine_outranks_partial() -> None:
    outcome = roll_up(
        [crit("c1", passed()), crit("c2", failed("c2"), hard=False), crit("c3", unknown("c3"))], integrity=PROOF
    )
    assert (outcome.verdict, outcome.determination) == (Verdict.UNKNOWN, Determination.CANNOT_DETERMINE)


def test_a_soft_mismatch_is_not_met_and_counted_in_the_verdict() -> None:
    outcome = roll_up([crit("c1", passed()), crit("c2", mismatch("c2"), hard=False)], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.MISMATCH, Determination.NOT_MET)
    assert outcome.flag_reason == "mismatch: baseline-changed"


def test_a_mismatch_flag_outranks_a_cannot_determine_flag() -> None:
    outcome = roll_up([crit("c1", unknown()), crit("c2", mismatch("c2"))], integrity=PROOF)
    assert outcome.determination is Determination.NOT_MET
    assert outcome.flag_reason == "mismatch: baseline-changed"


def test_only_soft_fails_fold_to_not_run_never_pass() -> None:
    outcome = roll_up([crit("c1", failed(), hard=False)], integrity=PROOF)
    assert outcome.determination is Determination.PARTIAL
    assert outcome.verdict is Verdict.NOT_RUN
    assert outcome.score == 0.0


def test_no_criteria_is_not_run_cannot_determine_and_flagged() -> None:
    outcome = roll_up([], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.NOT_RUN, Determination.CANNOT_DETERMINE)
    assert (outcome.score, outcome.confidence) == (None, 0.0)
    assert outcome.flag_reason == "needs_review: no-criteria"
    assert outcome.reason is Reason.NO_CRITERIA


def test_a_criterion_folds_through_the_allow_list() -> None:
    result = crit("c1", passed(), passed(authority=Authority.SEMANTIC))
    assert result.verdict is Verdict.UNKNOWN
    assert result.reason is Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS
    assert result.authority is Authority.SEMANTIC
    assert result.semantic is True
    outcome = roll_up([result], integrity=PROOF)
    assert outcome.determination is Determination.CANNOT_DETERMINE
    assert outcome.flag_reason == "needs_review: authority-not-trusted-for-pass"


def test_an_imported_pass_is_unknown_and_not_semantic() -> None:
    result = crit("c1", passed(authority=Authority.IMPORTED))
    assert (result.verdict, result.reason, result.semantic) == (
        Verdict.UNKNOWN,
        Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS,
        False,
    )


# --- score and confidence ----------------------------------------------------------------------------------------


def test_weighted_score() -> None:
    outcome = roll_up([crit("c1", passed(), weight=3), crit("c2", failed("c2"), hard=False, weight=1)], integrity=PROOF)
    assert outcome.determination is Determination.PARTIAL
    assert outcome.score == 0.75
    not_met = roll_up([crit("c1", passed(), weight=1), crit("c2", failed("c2"), weight=4)], integrity=PROOF)
    assert not_met.score == 0.2


def test_weights_default_to_one() -> None:
    result = criterion_result("c1", checks=[passed()])
    assert (result.weight, result.hard) == (1.0, True)
    outcome = roll_up(
        [
            result,
            criterion_result("c2", hard=False, checks=[failed("c2")]),
            criterion_result("c3", checks=[passed("c3")]),
        ],
        integrity=PROOF,
    )
    assert outcome.score == pytest.approx(2 / 3)


def test_confidence_is_the_share_decided_by_deterministic_or_human_authority() -> None:
    conflict = failed("c2", authority=Authority.SEMANTIC, reason=Reason.SEMANTIC_CITED_CONFLICT)
    outcome = roll_up(
        [crit("c1", passed()), crit("c2", conflict, hard=False), crit("c3", passed("c3", Authority.HUMAN))],
        integrity=PROOF,
    )
    assert outcome.determination is Determination.PARTIAL
    assert outcome.confidence == pytest.approx(2 / 3)
    assert outcome.score == pytest.approx(2 / 3)
    # Every semantic outcome is flagged.
    assert outcome.flag_reason == "needs_review: cited-conflict"


def test_confidence_is_zero_for_cannot_determine() -> None:
    outcome = roll_up([crit("c1", passed()), crit("c2", unknown("c2"))], integrity=PROOF)
    assert outcome.confidence == 0.0


# --- flags -------------------------------------------------------------------------------------------------------


def test_a_semantic_hard_fail_is_not_met_and_flagged() -> None:
    conflict = failed(authority=Authority.SEMANTIC, reason=Reason.SEMANTIC_CITED_CONFLICT)
    outcome = roll_up([crit("c1", conflict)], integrity=PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.FAIL, Determination.NOT_MET)
    assert outcome.flag_reason == "needs_review: cited-conflict"
    assert outcome.confidence == 0.0


def test_a_criterion_can_be_marked_semantic_but_never_unmarked() -> None:
    result = criterion_result("c1", checks=[failed()], semantic=True)
    assert result.semantic is True
    outcome = roll_up([result], integrity=PROOF)
    assert outcome.flag_reason == "needs_review: digest-differs"
    with pytest.raises(InvariantError) as exc:
        CriterionResult(
            "c1", True, 1.0, Verdict.NOT_RUN, Reason.NO_TYPED_PREDICATE, Authority.SEMANTIC, (not_run(),), False
        )
    assert exc.value.reason is Reason.MALFORMED_RECORD


def test_rail_reasons_are_exactly_the_spec_list() -> None:
    assert RAIL_REASONS == {  # noqa: SIM300 -- the module's set is the subject
        Reason.UNNAMED_ACTOR,
        Reason.WORKER_SELF_VERIFICATION,
        Reason.STALE_CYCLE,
        Reason.VERIFIER_AUTHORED_WORK,
        Reason.SHARED_EXECUTION_BOUNDARY,
        Reason.SELF_CONTRACT_ACCEPTANCE,
        Reason.CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED,
        Reason.MISSING_BASELINE,
        Reason.OBLIGATION_NOT_FALSIFIABLE,
    }
    assert INTEGRITY_REASONS == {  # noqa: SIM300
        Reason.MISSING_EVIDENCE_INTEGRITY_PROOF,
        Reason.EVIDENCE_INTEGRITY_MISMATCH,
        Reason.EVIDENCE_REDACTED,
    }


@pytest.mark.parametrize("code", sorted(RAIL_REASONS))
def test_a_rail_refusal_deciding_a_criterion_is_flagged(code: Reason) -> None:
    outcome = roll_up([crit("c1", unknown(reason=code)), crit("c2", passed("c2"))], integrity=PROOF)
    assert outcome.determination is Determination.CANNOT_DETERMINE
    assert outcome.flag_reason == f"needs_review: {code.value}"


@pytest.mark.parametrize("code", sorted(RAIL_REASONS))
def test_a_rail_refusal_under_a_clean_not_met_is_still_flagged(code: Reason) -> None:
    # The FAIL decides the criterion, but a rail refused one of its checks: a person must look.
    outcome = roll_up([crit("c1", failed(), unknown(reason=code))], integrity=PROOF)
    assert outcome.determination is Determination.NOT_MET
    assert outcome.flagged is True
    assert outcome.flag_reason == f"needs_review: {code.value}"


def test_an_integrity_failure_under_a_clean_not_met_is_flagged() -> None:
    proof = recheck([StoredItem("e1", DIGEST, BYTES), StoredItem("e2", DIGEST, None)])
    outcome = roll_up([crit("c1", failed())], integrity=proof)
    assert outcome.determination is Determination.NOT_MET
    assert outcome.flag_reason == "needs_review: missing-evidence-integrity-proof"


@pytest.mark.parametrize(
    "outcome_criteria",
    [
        [crit("c1", failed())],
        [crit("c1", passed()), crit("c2", failed("c2"), hard=False)],
        [crit("c1", passed()), crit("c2", passed("c2", Authority.HUMAN))],
    ],
    ids=["not_met", "partial", "met"],
)
def test_clean_deterministic_outcomes_are_not_flagged(outcome_criteria: list[CriterionResult]) -> None:
    outcome = roll_up(outcome_criteria, integrity=PROOF)
    assert outcome.determination in {Determination.NOT_MET, Determination.PARTIAL, Determination.MET}
    assert (outcome.flagged, outcome.flag_reason) == (False, None)


# --- the PASS gate and the per-check integrity proof -------------------------------------------------------------


def test_pass_without_any_proof_is_unknown_missing_proof() -> None:
    outcome = roll_up([crit("c1", passed(evidence=()))], integrity=NO_PROOF)
    assert (outcome.verdict, outcome.determination) == (Verdict.UNKNOWN, Determination.CANNOT_DETERMINE)
    assert outcome.reason is Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
    assert outcome.flag_reason == "needs_review: missing-evidence-integrity-proof"
    assert (outcome.score, outcome.confidence) == (None, 0.0)
    # The criteria themselves still say what they folded to.
    assert outcome.criteria[0].verdict is Verdict.PASS


@pytest.mark.parametrize(
    ("item", "code"),
    [
        (StoredItem("e9", DIGEST, None), Reason.MISSING_EVIDENCE_INTEGRITY_PROOF),
        (StoredItem("e9", DIGEST, BYTES + b"!"), Reason.EVIDENCE_INTEGRITY_MISMATCH),
        (StoredItem("e9", DIGEST, BYTES, redacted=True), Reason.EVIDENCE_REDACTED),
    ],
)
def test_pass_over_an_incomplete_proof_is_unknown_with_the_code(item: StoredItem, code: Reason) -> None:
    proof = recheck([StoredItem("e1", DIGEST, BYTES), item])
    outcome = roll_up([crit("c1", passed())], integrity=proof)
    assert (outcome.verdict, outcome.reason) == (Verdict.UNKNOWN, code)
    assert outcome.flag_reason == f"needs_review: {code.value}"


@pytest.mark.parametrize(
    ("item", "code"),
    [
        (StoredItem("e1", DIGEST, None), Reason.MISSING_EVIDENCE_INTEGRITY_PROOF),
        (StoredItem("e1", DIGEST, BYTES + b"!"), Reason.EVIDENCE_INTEGRITY_MISMATCH),
        (StoredItem("e1", DIGEST, BYTES, redacted=True), Reason.EVIDENCE_REDACTED),
    ],
)
def test_a_fail_citing_broken_evidence_is_unknown_never_charged_to_the_submitter(
    item: StoredItem, code: Reason
) -> None:
    outcome = roll_up([crit("c1", failed())], integrity=recheck([item]))
    (check,) = outcome.criteria[0].checks
    assert (check.verdict, check.reason) == (Verdict.UNKNOWN, code)
    assert outcome.criteria[0].verdict is Verdict.UNKNOWN
    assert (outcome.verdict, outcome.determination) == (Verdict.UNKNOWN, Determination.CANNOT_DETERMINE)
    assert outcome.flag_reason == f"needs_review: {code.value}"


def test_a_mismatch_citing_changed_evidence_is_unknown() -> None:
    outcome = roll_up([crit("c1", mismatch())], integrity=recheck([StoredItem("e1", DIGEST, b"x")]))
    assert outcome.verdict is Verdict.UNKNOWN
    assert outcome.reason is Reason.EVIDENCE_INTEGRITY_MISMATCH


def test_a_check_citing_evidence_outside_the_proof_is_unknown() -> None:
    outcome = roll_up([crit("c1", passed(evidence=("e1", "e7")))], integrity=PROOF)
    assert outcome.verdict is Verdict.UNKNOWN
    assert outcome.reason is Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
    assert outcome.criteria[0].checks[0].detail == "e7: no integrity entry"


def test_a_check_citing_no_evidence_passes_under_a_complete_proof() -> None:
    outcome = roll_up([crit("c1", passed(evidence=()))], integrity=PROOF)
    assert outcome.verdict is Verdict.PASS


# --- validation --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [0, -1.0, math.nan, math.inf, True])
def test_a_weight_must_be_a_positive_finite_number(weight: float) -> None:
    with pytest.raises(InvariantError) as exc:
        criterion_result("c1", weight=weight, checks=[passed()])
    assert exc.value.reason is Reason.MALFORMED_RECORD


def test_a_criterion_needs_checks_of_its_own() -> None:
    with pytest.raises(InvariantError) as exc:
        criterion_result("c1", checks=[])
    assert exc.value.reason is Reason.MALFORMED_RECORD
    with pytest.raises(InvariantError) as exc:
        criterion_result("c1", checks=[passed("c2")])
    assert exc.value.reason is Reason.MALFORMED_RECORD
    with pytest.raises(InvariantError) as exc:
        criterion_result("", checks=[passed("")])
    assert exc.value.reason is Reason.MALFORMED_RECORD


def test_a_criterion_result_cannot_lie_about_its_fold() -> None:
    with pytest.raises(InvariantError) as exc:
        CriterionResult(
            "c1", True, 1.0, Verdict.PASS, Reason.DIGEST_DIFFERS, Authority.DETERMINISTIC, (failed(),), False
        )
    assert exc.value.reason is Reason.MALFORMED_RECORD
    with pytest.raises(InvariantError):
        CriterionResult("c1", True, 1.0, Verdict.FAIL, Reason.DIGEST_MATCH, Authority.DETERMINISTIC, (failed(),), False)
    with pytest.raises(InvariantError):
        CriterionResult("c1", True, 1.0, Verdict.FAIL, Reason.DIGEST_DIFFERS, Authority.HUMAN, (failed(),), False)
    with pytest.raises(InvariantError):
        one: Any = 1
        CriterionResult(
            "c1", one, 1.0, Verdict.FAIL, Reason.DIGEST_DIFFERS, Authority.DETERMINISTIC, (failed(),), False
        )


def test_criterion_ids_must_be_unique() -> None:
    with pytest.raises(InvariantError) as exc:
        roll_up([crit("c1", passed()), crit("c1", passed())], integrity=PROOF)
    assert exc.value.reason is Reason.MALFORMED_RECORD


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError):
        roll_up([crit("c1", pending())], integrity=PROOF, now=T0.replace(tzinfo=None))


def _outcome(**overrides: object) -> Outcome:
    fields: dict[str, object] = {
        "verdict": Verdict.PASS,
        "determination": Determination.MET,
        "score": 1.0,
        "confidence": 1.0,
        "flagged": False,
        "flag_reason": None,
        "reason": Reason.DIGEST_MATCH,
        "criteria": (),
        "status_running": False,
    }
    fields.update(overrides)
    return Outcome(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "overrides",
    [
        {"verdict": Verdict.FAIL},  # met needs PASS
        {"determination": Determination.NOT_MET},  # PASS is met or partial
        {"flagged": True},  # flagged without a reason
        {"flag_reason": "needs_review: x"},  # a reason without the flag
        {"flagged": True, "flag_reason": "look at this"},  # not one of the two prefixes
        {"score": None},  # met has a score
        {"score": 1.5},
        {"confidence": -0.1},
        {"status_running": True},  # running needs PENDING and no determination
        {"verdict": Verdict.PENDING},
        {"verdict": Verdict.UNKNOWN, "determination": Determination.CANNOT_DETERMINE, "score": None},  # unflagged
        {
            "verdict": Verdict.UNKNOWN,
            "determination": Determination.CANNOT_DETERMINE,
            "score": None,
            "flagged": True,
            "flag_reason": "needs_review: below-trust-tier",
        },  # confidence must be 0
        {
            "verdict": Verdict.MISMATCH,
            "determination": Determination.NOT_MET,
            "score": 0.0,
            "flagged": True,
            "flag_reason": "needs_review: baseline-changed",
        },  # a MISMATCH says mismatch:
    ],
)
def test_an_outcome_cannot_be_built_inconsistent(overrides: dict[str, object]) -> None:
    with pytest.raises(InvariantError) as exc:
        _outcome(**overrides)
    assert exc.value.reason is Reason.MALFORMED_RECORD


def test_a_consistent_outcome_can_be_built() -> None:
    assert _outcome().determination is Determination.MET


# --- properties --------------------------------------------------------------------------------------------------

VERDICT_CHECKS: dict[Verdict, Callable[[str], Check]] = {
    Verdict.PASS: passed,
    Verdict.FAIL: failed,
    Verdict.MISMATCH: mismatch,
    Verdict.UNKNOWN: unknown,
    Verdict.NOT_RUN: not_run,
}


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(VERDICT_CHECKS)), st.booleans(), st.integers(min_value=1, max_value=5)),
        min_size=1,
        max_size=6,
    )
)
def test_roll_up_laws(spec: list[tuple[Verdict, bool, int]]) -> None:
    criteria = [crit(f"c{i}", VERDICT_CHECKS[v](f"c{i}"), hard=hard, weight=w) for i, (v, hard, w) in enumerate(spec)]
    outcome = roll_up(criteria, integrity=PROOF)
    # The determination rule, restated.
    if any(v is Verdict.MISMATCH or (hard and v is Verdict.FAIL) for v, hard, _ in spec):
        expected = Determination.NOT_MET
    elif any(v in (Verdict.UNKNOWN, Verdict.NOT_RUN) for v, _, _ in spec):
        expected = Determination.CANNOT_DETERMINE
    elif any(v is Verdict.FAIL for v, _, _ in spec):
        expected = Determination.PARTIAL
    else:
        expected = Determination.MET
    assert outcome.determination is expected
    # Soft FAILs never show in the verdict.
    if all(v is not Verdict.FAIL or not hard for v, hard, _ in spec) and expected is not Determination.NOT_MET:
        assert outcome.verdict is not Verdict.FAIL
    # Score is the weighted share met; null for cannot_determine.
    if expected is Determination.CANNOT_DETERMINE:
        assert outcome.score is None and outcome.confidence == 0.0 and outcome.flagged
    else:
        total = sum(w for _, _, w in spec)
        assert outcome.score == pytest.approx(sum(w for v, _, w in spec if v is Verdict.PASS) / total)
    # Flagged: cannot_determine, any MISMATCH, any semantic outcome (the NOT_RUN checks here are semantic).
    flag_worthy = (Verdict.MISMATCH, Verdict.NOT_RUN)
    assert outcome.flagged is (expected is Determination.CANNOT_DETERMINE or any(v in flag_worthy for v, _, _ in spec))


# --- the automation gate -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "determination", "flagged", "proof_verified"),
    list(itertools.product([*Status, "succeeded"], [*Determination, None], [False, True], [False, True])),
)
def test_automation_gate_truth_table(
    status: str, determination: Determination | None, flagged: bool, proof_verified: bool
) -> None:
    expected = status == "succeeded" and determination is Determination.MET and not flagged and proof_verified
    assert (
        automation_gate(status=status, determination=determination, flagged=flagged, proof_verified=proof_verified)
        is expected
    )


def test_automation_gate_is_closed_to_truthy_non_booleans() -> None:
    assert automation_gate(status="succeeded", determination=Determination.MET, flagged=False, proof_verified=True)
    zero: Any = 0
    one: Any = 1
    met_text: Any = "met"
    assert not automation_gate(status="succeeded", determination=Determination.MET, flagged=zero, proof_verified=True)
    assert not automation_gate(status="succeeded", determination=Determination.MET, flagged=False, proof_verified=one)
    assert not automation_gate(status="SUCCEEDED", determination=Determination.MET, flagged=False, proof_verified=True)
    assert not automation_gate(status="succeeded", determination=met_text, flagged=False, proof_verified=True)


def test_the_worked_example_is_not_automatable() -> None:
    # The second seed's worked example: a completed abstain, flagged.
    outcome = roll_up([crit("c1", unknown(reason=Reason.BELOW_TRUST_TIER))], integrity=PROOF)
    assert (outcome.determination, outcome.score, outcome.confidence, outcome.flagged) == (
        Determination.CANNOT_DETERMINE,
        None,
        0.0,
        True,
    )
    assert not automation_gate(
        status=Status.SUCCEEDED, determination=outcome.determination, flagged=outcome.flagged, proof_verified=True
    )
    met = roll_up([crit("c1", passed())], integrity=PROOF)
    assert automation_gate(
        status=Status.SUCCEEDED, determination=met.determination, flagged=met.flagged, proof_verified=True
    )
    assert not automation_gate(
        status=Status.RUNNING, determination=met.determination, flagged=met.flagged, proof_verified=True
    )

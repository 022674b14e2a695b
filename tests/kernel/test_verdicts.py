"""Verdicts, folding, PENDING, the oracle seam and the evidence-integrity proof (SPEC §2)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.determination import Determination, criterion_result, roll_up
from verification.kernel.digests import sha256_digest
from verification.kernel.errors import InvariantError
from verification.kernel.integrity import (
    IntegrityProof,
    IntegrityStatus,
    StoredItem,
    gate_pass,
    recheck,
)
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import (
    PASS_AUTHORITIES,
    PRECEDENCE,
    Authority,
    Check,
    ExpiryVerdict,
    Origin,
    Pending,
    Verdict,
    deciding_check,
    effective,
    fold,
    fold_verdicts,
    may_carry_pass,
    resolve_pending,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
EVIDENCE_IDS = ("e1", "e2", "e3")


# --- strategies --------------------------------------------------------------------------------------------------

# Hypothesis takes naive bounds and attaches the timezone itself.
aware_datetimes = st.datetimes(
    min_value=datetime(2000, 1, 1),  # noqa: DTZ001
    max_value=datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)


@st.composite
def checks(draw: st.DrawFn, criterion: str = "c1", evidence: tuple[str, ...] = ()) -> Check:
    """Any constructible check: MISMATCH only from the oracle seam, PENDING only with a deadline."""
    verdict = draw(st.sampled_from(list(Verdict)))
    authority = draw(st.sampled_from(list(Authority)))
    origin = Origin.ORACLE_SEAM if verdict is Verdict.MISMATCH else draw(st.sampled_from(list(Origin)))
    pending = None
    if verdict is Verdict.PENDING:
        expiries = [e for e in ExpiryVerdict if e is not ExpiryVerdict.MISMATCH or origin is Origin.ORACLE_SEAM]
        pending = Pending(deadline=draw(aware_datetimes), on_expiry=draw(st.sampled_from(expiries)))
    cited = tuple(draw(st.lists(st.sampled_from(evidence), unique=True))) if evidence else ()
    return Check(
        criterion=criterion,
        authority=authority,
        verdict=verdict,
        reason=Reason.DIGEST_MATCH,
        origin=origin,
        pending=pending,
        evidence_ids=cited,
    )


@st.composite
def proofs(draw: st.DrawFn) -> IntegrityProof:
    """An integrity proof over a subset of EVIDENCE_IDS, each item intact, gone, changed or redacted."""
    items = []
    for evidence_id in draw(st.lists(st.sampled_from(EVIDENCE_IDS), unique=True)):
        status = draw(st.sampled_from(list(IntegrityStatus)))
        content = evidence_id.encode()
        items.append(
            StoredItem(
                evidence_id=evidence_id,
                recorded=sha256_digest(content),
                content=None
                if status is IntegrityStatus.MISSING
                else content + (b"!" if status is IntegrityStatus.CHANGED else b""),
                redacted=status is IntegrityStatus.REDACTED,
            )
        )
    return recheck(items)


def _as_check(verdict: Verdict) -> Check:
    """A deterministic check carrying ``verdict`` (from the oracle seam, so it may be MISMATCH)."""
    pending = Pending(deadline=T0) if verdict is Verdict.PENDING else None
    return Check(
        criterion="c1",
        authority=Authority.DETERMINISTIC,
        verdict=verdict,
        reason=Reason.DIGEST_MATCH,
        origin=Origin.ORACLE_SEAM,
        pending=pending,
    )


def _check(verdict: Verdict, authority: Authority = Authority.DETERMINISTIC) -> Check:
    return Check(criterion="c1", authority=authority, verdict=verdict, reason=Reason.DIGEST_MATCH)


# --- the precedence table ----------------------------------------------------------------------------------------


def test_precedence_is_the_spec_order() -> None:
    assert PRECEDENCE == (
        Verdict.MISMATCH,
        Verdict.FAIL,
        Verdict.UNKNOWN,
        Verdict.NOT_RUN,
        Verdict.PENDING,
        Verdict.PASS,
    )


@pytest.mark.parametrize(
    ("higher", "lower"),
    [(PRECEDENCE[i], PRECEDENCE[j]) for i, j in itertools.combinations(range(len(PRECEDENCE)), 2)],
)
def test_fold_takes_the_higher_of_every_pair(higher: Verdict, lower: Verdict) -> None:
    assert fold_verdicts([higher, lower]) is higher
    assert fold_verdicts([lower, higher]) is higher
    assert fold([_as_check(lower), _as_check(higher)]) is higher


@pytest.mark.parametrize("verdict", list(Verdict))
def test_fold_of_a_single_verdict_is_itself(verdict: Verdict) -> None:
    assert fold_verdicts([verdict]) is verdict


def test_the_empty_set_folds_to_not_run_never_pass() -> None:
    assert fold_verdicts([]) is Verdict.NOT_RUN
    assert fold([]) is Verdict.NOT_RUN
    assert deciding_check([]) is None


def test_one_unresolved_check_sinks_an_otherwise_clean_set() -> None:
    clean = [_check(Verdict.PASS) for _ in range(5)]
    assert fold(clean) is Verdict.PASS
    assert fold([*clean, _as_check(Verdict.PENDING)]) is Verdict.PENDING
    assert fold([*clean, _check(Verdict.NOT_RUN)]) is Verdict.NOT_RUN


# --- fold laws (properties) --------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.lists(checks(), max_size=8).flatmap(lambda xs: st.tuples(st.just(xs), st.permutations(xs))))
def test_fold_is_order_independent(pair: tuple[list[Check], list[Check]]) -> None:
    original, shuffled = pair
    assert fold(original) is fold(shuffled)
    decided = deciding_check(original)
    other = deciding_check(shuffled)
    assert (decided is None) == (other is None)
    if decided is not None and other is not None:
        assert decided.verdict is other.verdict is fold(original)


@settings(max_examples=300)
@given(st.lists(checks(), max_size=8))
def test_fold_is_idempotent(xs: list[Check]) -> None:
    folded = fold(xs)
    assert fold([_as_check(folded)]) is folded
    assert fold([*xs, _as_check(folded)]) is folded


@settings(max_examples=300)
@given(st.lists(checks(), max_size=8))
def test_fold_is_pass_only_if_every_check_passes_from_an_allow_listed_authority(xs: list[Check]) -> None:
    every_pass = bool(xs) and all(c.verdict is Verdict.PASS and c.authority in PASS_AUTHORITIES for c in xs)
    assert (fold(xs) is Verdict.PASS) is every_pass


@settings(max_examples=200)
@given(st.lists(st.sampled_from(list(Verdict)), max_size=8), st.lists(st.sampled_from(list(Verdict)), max_size=8))
def test_fold_is_associative(a: list[Verdict], b: list[Verdict]) -> None:
    assert fold_verdicts([fold_verdicts(a), fold_verdicts(b)] if a and b else a + b) is fold_verdicts(a + b)


# --- the authority allow-list ------------------------------------------------------------------------------------


def test_pass_authorities_is_exactly_deterministic_and_human() -> None:
    assert frozenset({Authority.DETERMINISTIC, Authority.HUMAN}) == PASS_AUTHORITIES
    assert may_carry_pass(Authority.DETERMINISTIC) and may_carry_pass(Authority.HUMAN)
    assert not may_carry_pass(Authority.SEMANTIC) and not may_carry_pass(Authority.IMPORTED)


@pytest.mark.parametrize("authority", [Authority.SEMANTIC, Authority.IMPORTED])
def test_pass_from_an_untrusted_authority_counts_as_unknown(authority: Authority) -> None:
    check = _check(Verdict.PASS, authority)
    counted = effective(check)
    assert counted.verdict is Verdict.UNKNOWN
    assert counted.reason is Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS
    assert fold([check]) is Verdict.UNKNOWN
    decided = deciding_check([_check(Verdict.PASS), check])
    assert decided is not None and decided.reason is Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS
    assert decided.authority is authority


@pytest.mark.parametrize("authority", [Authority.DETERMINISTIC, Authority.HUMAN])
def test_pass_from_a_trusted_authority_stays_pass(authority: Authority) -> None:
    check = _check(Verdict.PASS, authority)
    assert effective(check) == check
    assert fold([check]) is Verdict.PASS


@pytest.mark.parametrize("verdict", [v for v in Verdict if v is not Verdict.PASS])
@pytest.mark.parametrize("authority", [Authority.SEMANTIC, Authority.IMPORTED])
def test_the_allow_list_only_touches_pass(verdict: Verdict, authority: Authority) -> None:
    check = Check(
        criterion="c1",
        authority=authority,
        verdict=verdict,
        reason=Reason.IMPORTED_RESULT,
        origin=Origin.ORACLE_SEAM,
        pending=Pending(deadline=T0) if verdict is Verdict.PENDING else None,
    )
    assert effective(check) is check


def test_a_check_with_an_authority_outside_the_enum_is_refused() -> None:
    with pytest.raises(InvariantError) as exc:
        oracle: Any = "oracle"
        Check(criterion="c1", authority=oracle, verdict=Verdict.PASS, reason=Reason.DIGEST_MATCH)
    assert exc.value.reason is Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS


# --- PENDING and its expiry --------------------------------------------------------------------------------------


def test_expiry_verdict_cannot_hold_pass() -> None:
    assert {e.value for e in ExpiryVerdict} == {"UNKNOWN", "FAIL", "MISMATCH", "NOT_RUN"}
    with pytest.raises(ValueError):
        ExpiryVerdict("PASS")


@pytest.mark.parametrize("on_expiry", [Verdict.PASS, "PASS", Verdict.UNKNOWN])
def test_pending_refuses_an_expiry_outside_the_expiry_type(on_expiry: object) -> None:
    with pytest.raises(InvariantError) as exc:
        Pending(deadline=T0, on_expiry=on_expiry)  # type: ignore[arg-type]
    assert exc.value.reason is Reason.EXPIRY_VERDICT_CANNOT_PASS


def test_pending_defaults_to_unknown_and_needs_an_aware_deadline() -> None:
    assert Pending(deadline=T0).on_expiry is ExpiryVerdict.UNKNOWN
    with pytest.raises(InvariantError) as exc:
        Pending(deadline=T0.replace(tzinfo=None))
    assert exc.value.reason is Reason.MALFORMED_RUBRIC


def test_pending_verdict_and_deadline_go_together() -> None:
    with pytest.raises(InvariantError) as exc:
        Check(criterion="c1", authority=Authority.IMPORTED, verdict=Verdict.PENDING, reason=Reason.RESULT_AWAITED)
    assert exc.value.reason is Reason.MALFORMED_RECORD
    with pytest.raises(InvariantError) as exc:
        Check(
            criterion="c1",
            authority=Authority.IMPORTED,
            verdict=Verdict.FAIL,
            reason=Reason.RESULT_AWAITED,
            pending=Pending(deadline=T0),
        )
    assert exc.value.reason is Reason.MALFORMED_RECORD


def _pending(on_expiry: ExpiryVerdict = ExpiryVerdict.UNKNOWN, origin: Origin = Origin.EVALUATOR) -> Check:
    return Check(
        criterion="c1",
        authority=Authority.IMPORTED,
        verdict=Verdict.PENDING,
        reason=Reason.RESULT_AWAITED,
        origin=origin,
        pending=Pending(deadline=T0, on_expiry=on_expiry),
    )


def test_pending_before_its_deadline_stays_pending() -> None:
    check = _pending()
    assert resolve_pending(check, T0 - timedelta(microseconds=1)) is check


@pytest.mark.parametrize("on_expiry", [ExpiryVerdict.UNKNOWN, ExpiryVerdict.FAIL, ExpiryVerdict.NOT_RUN])
def test_pending_at_or_after_its_deadline_answers_its_expiry_verdict(on_expiry: ExpiryVerdict) -> None:
    check = _pending(on_expiry)
    for now in (T0, T0 + timedelta(days=3)):
        read = resolve_pending(check, now)
        assert read.verdict is on_expiry.as_verdict()
        assert read.reason is Reason.PENDING_EXPIRED
        assert read.pending is None
    # Resolved when read, never written back: the stored check still says PENDING.
    assert check.verdict is Verdict.PENDING and check.pending is not None


def test_mismatch_on_expiry_only_for_the_oracle_seam() -> None:
    with pytest.raises(InvariantError) as exc:
        _pending(ExpiryVerdict.MISMATCH)
    assert exc.value.reason is Reason.MISMATCH_NOT_FROM_ORACLE
    read = resolve_pending(_pending(ExpiryVerdict.MISMATCH, Origin.ORACLE_SEAM), T0)
    assert read.verdict is Verdict.MISMATCH and read.origin is Origin.ORACLE_SEAM


@settings(max_examples=300)
@given(checks(), aware_datetimes)
def test_no_pending_ever_resolves_to_pass(check: Check, now: datetime) -> None:
    read = resolve_pending(check, now)
    if check.verdict is Verdict.PENDING:
        assert read.verdict is not Verdict.PASS
        assert read.verdict is Verdict.PENDING or read.reason is Reason.PENDING_EXPIRED
    else:
        assert read is check


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(aware_datetimes, st.sampled_from(list(ExpiryVerdict)), st.sampled_from(list(Authority))),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.one_of(st.none(), aware_datetimes),
)
def test_no_pending_set_rolls_up_to_pass(
    pendings: list[tuple[datetime, ExpiryVerdict, Authority]], extra_pass: list[bool], now: datetime | None
) -> None:
    proof = recheck([StoredItem("e1", sha256_digest(b"x"), b"x")])
    results = []
    for i, (deadline, on_expiry, authority) in enumerate(pendings):
        cid = f"c{i}"
        pending = Check(
            criterion=cid,
            authority=authority,
            verdict=Verdict.PENDING,
            reason=Reason.RESULT_AWAITED,
            origin=Origin.ORACLE_SEAM,
            pending=Pending(deadline=deadline, on_expiry=on_expiry),
        )
        passes = [
            Check(criterion=cid, authority=Authority.DETERMINISTIC, verdict=Verdict.PASS, reason=Reason.DIGEST_MATCH)
        ]
        results.append(criterion_result(cid, checks=[pending, *(passes if extra_pass[i] else [])]))
    outcome = roll_up(results, integrity=proof, now=now)
    assert outcome.verdict is not Verdict.PASS
    assert outcome.determination is not Determination.MET


# --- the oracle seam ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("authority", list(Authority))
def test_mismatch_outside_the_oracle_seam_is_refused(authority: Authority) -> None:
    with pytest.raises(InvariantError) as exc:
        Check(criterion="c1", authority=authority, verdict=Verdict.MISMATCH, reason=Reason.BASELINE_CHANGED)
    assert exc.value.reason is Reason.MISMATCH_NOT_FROM_ORACLE
    with pytest.raises(InvariantError) as exc:
        Check(
            criterion="c1",
            authority=authority,
            verdict=Verdict.MISMATCH,
            reason=Reason.BASELINE_CHANGED,
            origin=Origin.EVALUATOR,
        )
    assert exc.value.reason is Reason.MISMATCH_NOT_FROM_ORACLE


def test_mismatch_from_the_oracle_seam_is_accepted() -> None:
    check = Check(
        criterion="c1",
        authority=Authority.DETERMINISTIC,
        verdict=Verdict.MISMATCH,
        reason=Reason.BASELINE_CHANGED,
        origin=Origin.ORACLE_SEAM,
    )
    assert fold([check, _check(Verdict.FAIL)]) is Verdict.MISMATCH


def test_a_check_reason_is_coerced_to_the_registry() -> None:
    as_text: Any = "digest-match"
    check = Check(criterion="c1", authority=Authority.DETERMINISTIC, verdict=Verdict.PASS, reason=as_text)
    assert check.reason is Reason.DIGEST_MATCH
    with pytest.raises(ValueError):
        made_up: Any = "made-up"
        Check(criterion="c1", authority=Authority.DETERMINISTIC, verdict=Verdict.PASS, reason=made_up)


# --- the evidence-integrity proof --------------------------------------------------------------------------------

GOOD = b"the artifact"
GOOD_DIGEST = sha256_digest(GOOD)


def test_recheck_intact() -> None:
    proof = recheck([StoredItem("e1", GOOD_DIGEST, GOOD)])
    (entry,) = proof.entries
    assert entry.status is IntegrityStatus.INTACT
    assert entry.recomputed == GOOD_DIGEST
    assert entry.reason is None
    assert entry.raises_finding is False
    assert proof.complete is True
    assert proof.first_failure() is None
    assert proof.as_payload() == [{"evidence_id": "e1", "recorded": GOOD_DIGEST, "recomputed": GOOD_DIGEST}]


def test_recheck_missing_bytes() -> None:
    proof = recheck([StoredItem("e1", GOOD_DIGEST, None)])
    (entry,) = proof.entries
    assert entry.status is IntegrityStatus.MISSING
    assert entry.recomputed is None
    assert entry.reason is Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
    assert entry.raises_finding is True
    assert proof.complete is False
    assert proof.as_payload() == [{"evidence_id": "e1", "recorded": GOOD_DIGEST, "recomputed": None}]


def test_recheck_changed_bytes() -> None:
    proof = recheck([StoredItem("e1", GOOD_DIGEST, GOOD + b" tampered")])
    (entry,) = proof.entries
    assert entry.status is IntegrityStatus.CHANGED
    assert entry.recomputed == sha256_digest(GOOD + b" tampered")
    assert entry.reason is Reason.EVIDENCE_INTEGRITY_MISMATCH
    assert entry.raises_finding is True
    assert proof.complete is False


def test_recheck_redacted_item_does_not_raise_a_finding() -> None:
    # Redacted wins even if bytes are still present.
    proof = recheck([StoredItem("e1", GOOD_DIGEST, GOOD, redacted=True)])
    (entry,) = proof.entries
    assert entry.status is IntegrityStatus.REDACTED
    assert entry.recomputed is None
    assert entry.reason is Reason.EVIDENCE_REDACTED
    assert entry.raises_finding is False
    assert proof.complete is False


def test_recheck_orders_by_evidence_id_and_finds_the_first_failure() -> None:
    proof = recheck(
        [
            StoredItem("e3", GOOD_DIGEST, None),
            StoredItem("e1", GOOD_DIGEST, GOOD),
            StoredItem("e2", GOOD_DIGEST, b"other"),
        ]
    )
    assert [e.evidence_id for e in proof.entries] == ["e1", "e2", "e3"]
    failure = proof.first_failure()
    assert failure is not None and failure.evidence_id == "e2"
    only_e3 = proof.first_failure(["e3", "e1"])
    assert only_e3 is not None and only_e3.reason is Reason.MISSING_EVIDENCE_INTEGRITY_PROOF
    assert proof.first_failure(["e1"]) is None
    assert proof.entry("e9") is None


def test_an_empty_proof_is_not_complete() -> None:
    assert recheck([]).complete is False
    assert IntegrityProof(()).complete is False


def test_gate_pass_refuses_pass_without_a_complete_proof() -> None:
    intact = recheck([StoredItem("e1", GOOD_DIGEST, GOOD)])
    assert gate_pass(Verdict.PASS, intact) == (Verdict.PASS, None)
    assert gate_pass(Verdict.PASS, recheck([])) == (Verdict.UNKNOWN, Reason.MISSING_EVIDENCE_INTEGRITY_PROOF)
    changed = recheck([StoredItem("e1", GOOD_DIGEST, GOOD), StoredItem("e2", GOOD_DIGEST, b"x")])
    assert gate_pass(Verdict.PASS, changed) == (Verdict.UNKNOWN, Reason.EVIDENCE_INTEGRITY_MISMATCH)
    redacted = recheck([StoredItem("e1", GOOD_DIGEST, GOOD, redacted=True)])
    assert gate_pass(Verdict.PASS, redacted) == (Verdict.UNKNOWN, Reason.EVIDENCE_REDACTED)
    for verdict in Verdict:
        if verdict is not Verdict.PASS:
            assert gate_pass(verdict, recheck([])) == (verdict, None)


# --- the roll-up is PASS exactly when everything passes and the proof is complete -------------------------------


@st.composite
def criteria_and_proof(draw: st.DrawFn) -> tuple[list[list[Check]], IntegrityProof]:
    proof = draw(proofs())
    cited = tuple(e.evidence_id for e in proof.entries)
    n = draw(st.integers(min_value=1, max_value=4))
    groups = [draw(st.lists(checks(criterion=f"c{i}", evidence=cited), min_size=1, max_size=4)) for i in range(n)]
    return groups, proof


@settings(max_examples=400)
@given(criteria_and_proof(), st.one_of(st.none(), aware_datetimes))
def test_roll_up_is_pass_iff_every_check_passes_trusted_and_the_proof_is_complete(
    case: tuple[list[list[Check]], IntegrityProof], now: datetime | None
) -> None:
    groups, proof = case
    results = [criterion_result(f"c{i}", hard=True, checks=group) for i, group in enumerate(groups)]
    outcome = roll_up(results, integrity=proof, now=now)
    every_pass = all(c.verdict is Verdict.PASS and c.authority in PASS_AUTHORITIES for g in groups for c in g)
    proof_ok = proof.complete and bool(proof.entries)
    assert (outcome.verdict is Verdict.PASS) is (every_pass and proof_ok)
    if every_pass and not proof_ok:
        assert outcome.verdict is Verdict.UNKNOWN
        assert outcome.flagged is True
        assert outcome.reason in {
            Reason.MISSING_EVIDENCE_INTEGRITY_PROOF,
            Reason.EVIDENCE_INTEGRITY_MISMATCH,
            Reason.EVIDENCE_REDACTED,
        }

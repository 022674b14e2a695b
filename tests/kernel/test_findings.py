"""Findings (SPEC §10): disagreement detection and who may close a finding."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.actors import Actor, ActorKind
from verification.kernel.digests import sha256_digest
from verification.kernel.errors import InvariantError
from verification.kernel.findings import (
    FINDING_REASON,
    Disagreement,
    Finding,
    FindingKind,
    VerificationRecord,
    check_closure,
    detect_disagreements,
    disagreement_finding,
    evidence_integrity_findings,
    may_close,
)
from verification.kernel.integrity import StoredItem, recheck
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Verdict

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
RUBRIC = "sha256:" + "a" * 64
E1, E2 = sha256_digest(b"one"), sha256_digest(b"two")


def rec(
    vid: str,
    verdict: Verdict,
    *,
    minutes: int = 0,
    subject: str = "task-1@1",
    rubric: str = RUBRIC,
    digests: frozenset[str] = frozenset({E1, E2}),
    authority: Authority = Authority.DETERMINISTIC,
    superseded: bool = False,
) -> VerificationRecord:
    return VerificationRecord(
        verification_id=vid,
        subject=subject,
        rubric_hash=rubric,
        evidence_digests=digests,
        verdict=verdict,
        authority_of_decision=authority,
        superseded_by_human=superseded,
        created_at=T0 + timedelta(minutes=minutes),
    )


def test_same_inputs_different_automated_verdicts_disagree() -> None:
    found = detect_disagreements([rec("v2", Verdict.PASS, minutes=5), rec("v1", Verdict.FAIL)])
    assert found == [Disagreement("task-1@1", RUBRIC, frozenset({E1, E2}), "v1", Verdict.FAIL, "v2", Verdict.PASS)]


def test_same_verdicts_do_not_disagree() -> None:
    assert detect_disagreements([rec("v1", Verdict.FAIL), rec("v2", Verdict.FAIL, minutes=1)]) == []


@pytest.mark.parametrize(
    "other",
    [
        rec("v2", Verdict.PASS, digests=frozenset({E1})),  # repaired evidence: a different input, not a flake
        rec("v2", Verdict.PASS, digests=frozenset({E1, sha256_digest(b"three")})),
        rec("v2", Verdict.PASS, rubric="sha256:" + "b" * 64),
        rec("v2", Verdict.PASS, subject="task-1@2"),  # a reopened task is another subject
        rec("v2", Verdict.PASS, subject="task-2@1"),
    ],
)
def test_different_inputs_do_not_disagree(other: VerificationRecord) -> None:
    assert detect_disagreements([rec("v1", Verdict.FAIL), other]) == []


def test_a_human_decision_superseding_is_not_a_disagreement() -> None:
    # v1's run said FAIL; a reviewer's decision in the same chain said PASS.
    run = rec("v1", Verdict.FAIL, superseded=True)
    decision = rec("v1", Verdict.PASS, minutes=3, authority=Authority.HUMAN)
    assert detect_disagreements([run, decision]) == []
    # A human verdict is never compared, even across verifications.
    assert detect_disagreements([run, rec("v2", Verdict.PASS, minutes=4, authority=Authority.HUMAN)]) == []


def test_records_of_one_verification_never_pair() -> None:
    assert detect_disagreements([rec("v1", Verdict.FAIL), rec("v1", Verdict.UNKNOWN, minutes=1)]) == []


def test_a_superseded_runs_automated_verdict_still_counts() -> None:
    # v1 ran FAIL and a person later decided it; v2 re-ran the same inputs and said PASS: the runs disagree.
    found = detect_disagreements([rec("v1", Verdict.FAIL, superseded=True), rec("v2", Verdict.PASS, minutes=9)])
    assert [(d.first_id, d.second_id) for d in found] == [("v1", "v2")]


def test_pending_has_concluded_nothing() -> None:
    assert detect_disagreements([rec("v1", Verdict.PENDING), rec("v2", Verdict.FAIL, minutes=1)]) == []


def test_other_automated_authorities_are_compared() -> None:
    found = detect_disagreements(
        [
            rec("v1", Verdict.UNKNOWN, authority=Authority.SEMANTIC),
            rec("v2", Verdict.FAIL, authority=Authority.IMPORTED),
        ]
    )
    assert len(found) == 1


def test_every_differing_pair_is_reported_in_a_deterministic_order() -> None:
    records = [
        rec("v1", Verdict.PASS, minutes=0),
        rec("v2", Verdict.FAIL, minutes=1),
        rec("v3", Verdict.PASS, minutes=2),
        rec("w1", Verdict.FAIL, subject="task-0@1"),
        rec("w2", Verdict.UNKNOWN, subject="task-0@1", minutes=1),
    ]
    expected = [("w1", "w2"), ("v1", "v2"), ("v2", "v3")]
    for seed in range(5):
        shuffled = records[:]
        random.Random(seed).shuffle(shuffled)
        assert [(d.first_id, d.second_id) for d in detect_disagreements(shuffled)] == expected


@settings(max_examples=200)
@given(
    st.lists(
        st.builds(
            rec,
            st.sampled_from(["v1", "v2", "v3", "v4"]),
            st.sampled_from(list(Verdict)),
            minutes=st.integers(0, 3),
            subject=st.sampled_from(["t@1", "t@2"]),
            digests=st.sampled_from([frozenset({E1}), frozenset({E1, E2})]),
            authority=st.sampled_from(list(Authority)),
            superseded=st.booleans(),
        ),
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_disagreements_are_exactly_the_differing_automated_pairs(
    records: list[VerificationRecord], rnd: random.Random
) -> None:
    found = detect_disagreements(records)
    shuffled = records[:]
    rnd.shuffle(shuffled)
    assert detect_disagreements(shuffled) == found
    for d in found:
        assert d.first_verdict is not d.second_verdict and d.first_id != d.second_id
        assert Verdict.PENDING not in (d.first_verdict, d.second_verdict)
    automated = [
        r for r in records if r.authority_of_decision is not Authority.HUMAN and r.verdict is not Verdict.PENDING
    ]
    expected = sum(
        1
        for i, a in enumerate(automated)
        for b in automated[i + 1 :]
        if (a.subject, a.rubric_hash, a.evidence_digests) == (b.subject, b.rubric_hash, b.evidence_digests)
        and a.verification_id != b.verification_id
        and a.verdict is not b.verdict
    )
    assert len(found) == expected


def test_record_validation() -> None:
    with pytest.raises(InvariantError) as exc:
        rec("v1", Verdict.PASS, digests=frozenset({"md5:abc"}))
    assert exc.value.reason is Reason.MALFORMED_RECORD
    with pytest.raises(InvariantError):
        rec("", Verdict.PASS)
    with pytest.raises(InvariantError):
        VerificationRecord("v", "s", RUBRIC, frozenset(), "PASS", Authority.HUMAN, False, T0)  # type: ignore[arg-type]
    with pytest.raises(InvariantError):
        VerificationRecord("v", "s", RUBRIC, frozenset(), Verdict.PASS, Authority.HUMAN, False, datetime(2025, 1, 1))  # noqa: DTZ001


# --- findings as records ----------------------------------------------------------------------------------------------


def test_disagreement_finding() -> None:
    (d,) = detect_disagreements([rec("v1", Verdict.FAIL), rec("v2", Verdict.PASS, minutes=1)])
    finding = disagreement_finding(d)
    assert finding.kind is FindingKind.DISAGREEMENT and finding.reason is Reason.FINDING_DISAGREEMENT
    assert finding.refs == ("task-1@1", "v1", "v2")


def test_finding_reason_is_its_kinds_code() -> None:
    for kind, reason in FINDING_REASON.items():
        assert Finding(kind, ("x",)).reason is reason
    assert Finding(FindingKind.REVOKED_KEY, ("ed25519-abc",)).reason is Reason.FINDING_REVOKED_KEY
    with pytest.raises(InvariantError):
        Finding(FindingKind.TAMPER, ("x",), reason=Reason.FINDING_DISAGREEMENT)
    with pytest.raises(InvariantError):
        Finding(FindingKind.TAMPER, ())
    with pytest.raises(InvariantError):
        Finding("leak", ("x",))  # type: ignore[arg-type]


def test_evidence_integrity_findings_for_gone_or_changed_bytes_only() -> None:
    proof = recheck(
        [
            StoredItem("ok", sha256_digest(b"a"), b"a"),
            StoredItem("gone", sha256_digest(b"b"), None),
            StoredItem("changed", sha256_digest(b"c"), b"C"),
            StoredItem("redacted", sha256_digest(b"d"), None, redacted=True),
        ]
    )
    findings = evidence_integrity_findings(proof=proof, subject="task-1@1")
    assert [f.refs for f in findings] == [("task-1@1", "changed"), ("task-1@1", "gone")]
    assert all(f.reason is Reason.FINDING_EVIDENCE_INTEGRITY for f in findings)


# --- only a human closes a finding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [k for k in ActorKind if k is not ActorKind.HUMAN])
def test_no_automated_actor_closes_a_finding(kind: ActorKind) -> None:
    assert may_close(kind) is Reason.FINDING_CLOSE_REQUIRES_HUMAN
    assert check_closure(actor=Actor("bot", kind), rationale="looks fine") is Reason.FINDING_CLOSE_REQUIRES_HUMAN


def test_a_human_closes_with_a_rationale() -> None:
    assert may_close(ActorKind.HUMAN) is None
    assert may_close("model") is Reason.FINDING_CLOSE_REQUIRES_HUMAN  # type: ignore[arg-type]
    person = Actor("alice", ActorKind.HUMAN)
    assert check_closure(actor=person, rationale="flaky runner, re-ran on a clean host") is None
    assert check_closure(actor=person, rationale="  ") is Reason.FINDING_CLOSE_NEEDS_RATIONALE
    assert check_closure(actor=Actor(None, ActorKind.HUMAN), rationale="ok") is Reason.UNNAMED_ACTOR

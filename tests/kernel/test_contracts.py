"""Actors, assigned authority, claims and contracts (SPEC §1, §9 rail 3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.actors import (
    DECLARED_AUTHORITY_MAX_CHARS,
    Actor,
    ActorKind,
    authority_for,
    distinct,
    record_declared_authority,
)
from verification.kernel.contracts import (
    Claim,
    ContractAcceptance,
    accept_contract,
    claimants,
    contract_gate,
    current_contract,
    first_claim_at,
    subject_key,
)
from verification.kernel.errors import InvariantError
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
RUBRIC_A = "sha256:" + "a" * 64
RUBRIC_B = "sha256:" + "b" * 64


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


# --- actors ---------------------------------------------------------------------------------------------------------


def test_actor_named_and_unnamed() -> None:
    assert Actor("a1", ActorKind.AGENT, frozenset({"box-1"})).named
    assert not Actor(None, ActorKind.AGENT).named
    # A blank id is no stable identity: unnamed.
    assert Actor("  ", ActorKind.AGENT).actor_id is None
    assert Actor("", ActorKind.HUMAN).named is False


def test_actor_coerces_kind_and_boundaries() -> None:
    actor = Actor("c1", "collector", {"host-9"})  # type: ignore[arg-type]
    assert actor.kind is ActorKind.COLLECTOR
    assert actor.boundaries == frozenset({"host-9"})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"actor_id": 7, "kind": ActorKind.AGENT},
        {"actor_id": "a", "kind": "robot"},
        {"actor_id": "a", "kind": ActorKind.AGENT, "boundaries": "box-1"},
        {"actor_id": "a", "kind": ActorKind.AGENT, "boundaries": frozenset({""})},
        {"actor_id": "a", "kind": ActorKind.AGENT, "boundaries": frozenset({3})},
    ],
)
def test_actor_cannot_be_built_invalid(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvariantError) as exc:
        Actor(**kwargs)  # type: ignore[arg-type]
    assert exc.value.reason is Reason.MALFORMED_RECORD


def test_distinct_never_holds_for_unnamed() -> None:
    assert distinct("a", "b")
    assert not distinct("a", "a")
    assert not distinct(None, "a")
    assert not distinct("a", None)
    assert not distinct(None, None)
    assert not distinct("", "a")


@pytest.mark.parametrize(
    ("kind", "portal_computed", "expected"),
    [
        (ActorKind.SERVICE, True, Authority.DETERMINISTIC),
        (ActorKind.HUMAN, False, Authority.HUMAN),
        (ActorKind.SEMANTIC_WORKER, False, Authority.SEMANTIC),
        (ActorKind.EXTERNAL_VERIFIER, False, Authority.IMPORTED),
        ("external_verifier", False, Authority.IMPORTED),
    ],
)
def test_authority_is_assigned_from_the_kind(kind: ActorKind, portal_computed: bool, expected: Authority) -> None:
    assert authority_for(kind, portal_computed=portal_computed) is expected


@pytest.mark.parametrize(
    ("kind", "portal_computed"),
    [
        (ActorKind.AGENT, False),
        (ActorKind.COLLECTOR, False),
        (ActorKind.CONTRACT_OWNER, False),
        (ActorKind.SERVICE, False),  # a service token is not the portal computing over stored bytes
        (ActorKind.AGENT, True),
        (ActorKind.SEMANTIC_WORKER, True),
        (ActorKind.HUMAN, True),
        ("deterministic", False),
    ],
)
def test_other_kinds_cannot_author_a_result(kind: ActorKind, portal_computed: bool) -> None:
    with pytest.raises(InvariantError) as exc:
        authority_for(kind, portal_computed=portal_computed)
    assert exc.value.reason is Reason.ACTOR_CANNOT_AUTHOR_RESULT


def test_authority_for_takes_no_declared_authority() -> None:
    with pytest.raises(TypeError):
        authority_for(ActorKind.SEMANTIC_WORKER, declared="deterministic")  # type: ignore[call-arg]


def test_declared_authority_is_kept_as_text_only() -> None:
    assert record_declared_authority(None) is None
    assert record_declared_authority("deterministic") == "deterministic"
    assert record_declared_authority({"authority": "human"}) == "{'authority': 'human'}"
    assert record_declared_authority(42) == "42"
    assert len(record_declared_authority("x" * 10_000) or "") == DECLARED_AUTHORITY_MAX_CHARS


@settings(max_examples=200)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_declared_authority_never_raises(declared: object) -> None:
    text = record_declared_authority(declared)
    assert text is None if declared is None else isinstance(text, str) and len(text) <= DECLARED_AUTHORITY_MAX_CHARS


# --- claims and contracts -------------------------------------------------------------------------------------------


def test_claim_validation() -> None:
    assert Claim("", 1, T0).actor_id is None
    for bad in ({"cycle": -1}, {"cycle": True}, {"cycle": "1"}, {"claimed_at": datetime(2025, 1, 1)}):  # noqa: DTZ001 (naive on purpose)
        args: dict[str, object] = {"actor_id": "w", "cycle": 1, "claimed_at": T0, **bad}
        with pytest.raises(InvariantError) as exc:
            Claim(**args)  # type: ignore[arg-type]
        assert exc.value.reason is Reason.MALFORMED_RECORD


def test_acceptance_validation() -> None:
    assert ContractAcceptance("c" * 64, "owner", 0, T0).rubric_hash == "c" * 64
    with pytest.raises(InvariantError) as exc:
        ContractAcceptance("sha256:XYZ", "owner", 0, T0)
    assert exc.value.reason is Reason.MALFORMED_RECORD
    with pytest.raises(InvariantError) as exc:
        ContractAcceptance(RUBRIC_A, "", 0, T0)
    assert exc.value.reason is Reason.UNNAMED_ACTOR


def test_subject_key() -> None:
    assert subject_key(task_id="task-7", cycle=2) == "task-7@2"
    with pytest.raises(InvariantError):
        subject_key(task_id="", cycle=2)


CLAIMS = (Claim("worker", 1, at(5)), Claim("helper", 1, at(2)), Claim("old", 0, at(-60)))


def test_claimants_and_first_claim_are_per_cycle() -> None:
    assert claimants(cycle=1, claims=CLAIMS) == frozenset({"worker", "helper"})
    assert claimants(cycle=0, claims=CLAIMS) == frozenset({"old"})
    assert first_claim_at(cycle=1, claims=CLAIMS) == at(2)
    assert first_claim_at(cycle=0, claims=CLAIMS) == at(-60)
    assert first_claim_at(cycle=2, claims=CLAIMS) is None


def test_accept_contract_by_a_non_claimant() -> None:
    assert accept_contract(actor=Actor("owner", ActorKind.CONTRACT_OWNER), cycle=1, claims=CLAIMS) is None
    # A claimant of an earlier cycle may accept the new cycle's contract (it did not claim this one).
    assert accept_contract(actor=Actor("old", ActorKind.AGENT), cycle=1, claims=CLAIMS) is None


def test_worker_cannot_accept_its_own_contract() -> None:
    for who in ("worker", "helper"):
        reason = accept_contract(actor=Actor(who, ActorKind.AGENT), cycle=1, claims=CLAIMS)
        assert reason is Reason.SELF_CONTRACT_ACCEPTANCE


def test_unnamed_acceptor_is_refused() -> None:
    assert accept_contract(actor=Actor(None, ActorKind.CONTRACT_OWNER), cycle=1, claims=()) is Reason.UNNAMED_ACTOR


def test_acceptor_cannot_be_proven_distinct_from_an_unnamed_claimant() -> None:
    claims = (*CLAIMS, Claim(None, 1, at(9)))
    actor = Actor("owner", ActorKind.CONTRACT_OWNER)
    assert accept_contract(actor=actor, cycle=1, claims=claims) is Reason.UNNAMED_ACTOR
    # ...but an unnamed claimant of another cycle does not matter.
    assert accept_contract(actor=actor, cycle=2, claims=claims) is None


def test_current_contract_is_the_latest_of_the_current_cycle_only() -> None:
    acceptances = [
        ContractAcceptance(RUBRIC_A, "owner", 0, at(0)),
        ContractAcceptance(RUBRIC_A, "owner", 1, at(10)),
        ContractAcceptance(RUBRIC_B, "owner", 1, at(20)),
        ContractAcceptance(RUBRIC_A, "owner", 1, at(15)),
    ]
    assert current_contract(cycle=1, acceptances=acceptances) == acceptances[2]
    assert current_contract(cycle=0, acceptances=acceptances) == acceptances[0]
    # After a reopen, nothing accepted for an earlier cycle counts.
    assert current_contract(cycle=2, acceptances=acceptances) is None


def test_current_contract_tie_goes_to_the_later_record() -> None:
    first = ContractAcceptance(RUBRIC_A, "owner", 1, at(10))
    second = ContractAcceptance(RUBRIC_B, "owner", 1, at(10))
    assert current_contract(cycle=1, acceptances=[first, second]) is second


def test_contract_gate() -> None:
    assert contract_gate(None) is Reason.NO_ACCEPTED_CONTRACT
    assert contract_gate(ContractAcceptance(RUBRIC_A, "owner", 1, at(10))) is None
    reopened = current_contract(cycle=2, acceptances=[ContractAcceptance(RUBRIC_A, "owner", 1, at(10))])
    assert contract_gate(reopened) is Reason.NO_ACCEPTED_CONTRACT

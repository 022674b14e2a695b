"""The kernel's rules over a cycle's workers (SPEC §1, §9 rail 3): contracts once per cycle and never by a worker,
the acceptor never a worker, and a run whose acceptor works on the cycle judged by nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from verification.kernel.actors import Actor, ActorKind
from verification.kernel.contracts import Claim, ContractAcceptance, accept_contract, may_claim
from verification.kernel.criteria import register_rubric
from verification.kernel.digests import sha256_digest
from verification.kernel.evaluation import BoundEvidence, RunContext, evaluate_run
from verification.kernel.evidence import Accessibility, EvidenceFacts, TrustTier
from verification.kernel.integrity import StoredItem
from verification.kernel.rails import RAIL_REASONS, check_contract_acceptor, check_verifier
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
RUBRIC = "a" * 64
CLAIMANT = Actor("claimant", ActorKind.AGENT, frozenset({"box-c"}))
SUBMITTER = Actor("submitter", ActorKind.AGENT, frozenset({"box-s"}))
OWNER = Actor("owner", ActorKind.CONTRACT_OWNER)
CLAIMS = (Claim("claimant", 1, T0),)


def contract(by: str = "owner", cycle: int = 1) -> ContractAcceptance:
    return ContractAcceptance(RUBRIC, by, cycle, T0)


# --- accepting a contract -------------------------------------------------------------------------------------------


def test_a_submitter_that_never_claimed_is_a_worker_and_cannot_accept() -> None:
    assert accept_contract(actor=OWNER, cycle=1, claims=CLAIMS, workers=(CLAIMANT, SUBMITTER)) is None
    refused = accept_contract(actor=Actor("submitter", ActorKind.CONTRACT_OWNER), cycle=1, claims=CLAIMS,
                              workers=(CLAIMANT, SUBMITTER))
    assert refused is Reason.SELF_CONTRACT_ACCEPTANCE


def test_an_unnamed_worker_means_no_acceptor_is_provably_distinct() -> None:
    unnamed = Actor(None, ActorKind.AGENT)
    assert accept_contract(actor=OWNER, cycle=1, claims=(), workers=(unnamed,)) is Reason.UNNAMED_ACTOR


def test_a_cycle_with_a_contract_takes_no_second_one_but_a_new_cycle_does() -> None:
    assert accept_contract(actor=OWNER, cycle=1, claims=CLAIMS, contract=contract()) is (
        Reason.CONTRACT_ALREADY_ACCEPTED
    )
    # Even by a worker: the first refusal is that the contract never changes.
    assert accept_contract(actor=CLAIMANT, cycle=1, claims=CLAIMS, contract=contract()) is (
        Reason.CONTRACT_ALREADY_ACCEPTED
    )
    assert accept_contract(actor=OWNER, cycle=2, claims=CLAIMS, contract=contract(cycle=1)) is None


# --- claiming -------------------------------------------------------------------------------------------------------


def test_the_acceptor_never_claims_its_cycle() -> None:
    assert may_claim(actor=OWNER, cycle=1, contract=contract()) is Reason.SELF_CONTRACT_ACCEPTANCE
    assert may_claim(actor=CLAIMANT, cycle=1, contract=contract()) is None
    assert may_claim(actor=OWNER, cycle=2, contract=contract(cycle=1)) is None  # after a reopen
    assert may_claim(actor=OWNER, cycle=1, contract=None) is None
    assert may_claim(actor=Actor(None, ActorKind.AGENT), cycle=1, contract=None) is Reason.UNNAMED_ACTOR


# --- the acceptor among the workers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("acceptor", "refused"),
    [("claimant", True), ("submitter", True), ("owner", False), (None, False)],
)
def test_the_acceptor_among_the_workers_is_refused_on_rail_3(acceptor: str | None, refused: bool) -> None:
    refusal = check_contract_acceptor(acceptor=acceptor, cycle=1, claims=CLAIMS, workers=(CLAIMANT, SUBMITTER))
    if not refused:
        assert refusal is None
        return
    assert refusal is not None and (refusal.rail, refusal.reason) == (3, Reason.SELF_CONTRACT_ACCEPTANCE)
    assert refusal.reason in RAIL_REASONS[3]


def test_a_submitter_among_the_workers_may_not_verify() -> None:
    refusal = check_verifier(verifier=SUBMITTER, cycle=1, claims=CLAIMS, links=(), workers=(CLAIMANT, SUBMITTER))
    assert refusal is not None and refusal.reason is Reason.WORKER_SELF_VERIFICATION
    neighbour = Actor("neighbour", ActorKind.HUMAN, frozenset({"box-s"}))
    refusal = check_verifier(verifier=neighbour, cycle=1, claims=CLAIMS, links=(), workers=(CLAIMANT, SUBMITTER))
    assert refusal is not None and refusal.reason is Reason.SHARED_EXECUTION_BOUNDARY


def _run(acceptor: str | None) -> Verdict:
    notes = b"release notes\n"
    registered = register_rubric(
        {"name": "r", "criteria": [{"id": "d", "kind": "digest", "observable": "evidence.content-digest",
                                    "expression": f'(= notes "{sha256_digest(notes)}")'}]}
    )
    ctx = RunContext(
        subject="t@1",
        cycle=1,
        contract_rubric_hash=registered.rubric_hash,
        claims=CLAIMS,
        links=(),
        workers=(CLAIMANT, SUBMITTER),
        producer=CLAIMANT,
        service_actor=Actor("portal", ActorKind.SERVICE, frozenset({"portal"})),
        baselines={},
        baseline_secret=b"s" * 32,
        submitted_at=T0,
        now=T0 + timedelta(seconds=1),
    )
    item = BoundEvidence(
        symbol="notes",
        facts=EvidenceFacts(evidence_id="e1", trust_tier=TrustTier.T0, collected_at=T0,
                            accessibility=Accessibility.ACCESSIBLE),
        stored=StoredItem("e1", sha256_digest(notes), notes),
    )
    result = evaluate_run(criteria=registered.criteria, ctx=replace(ctx, contract_acceptor=acceptor),
                          bound={"notes": item}, arrived={})
    if acceptor == "submitter":
        assert result.outcome.reason is Reason.SELF_CONTRACT_ACCEPTANCE and result.outcome.flagged
    return result.outcome.verdict


def test_a_run_whose_contract_acceptor_is_a_worker_is_unknown() -> None:
    assert _run("owner") is Verdict.PASS
    assert _run("submitter") is Verdict.UNKNOWN

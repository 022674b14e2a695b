"""The anti-gaming rails (SPEC §9): each accepted and each refused with its exact code."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.actors import Actor, ActorKind
from verification.kernel.baselines import Baseline, capture_baseline
from verification.kernel.contracts import Claim, first_claim_at
from verification.kernel.criteria import evaluate_unchanged, register_rubric
from verification.kernel.digests import sha256_digest
from verification.kernel.errors import DecisionRefused, InvariantError, RubricError
from verification.kernel.rails import (
    RAIL_REASONS,
    ChangeManifest,
    Link,
    RailRefusal,
    check_approval_cycle,
    check_change_manifest,
    check_verifier,
    rail_check_for_run,
    raise_for_decision,
)
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Verdict, fold

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

WORKER = Actor("worker", ActorKind.AGENT, frozenset({"box-w"}))
PORTAL = Actor("portal", ActorKind.SERVICE, frozenset({"portal-1"}))
REVIEWER = Actor("reviewer", ActorKind.HUMAN)
CLAIMS = (Claim("worker", 2, T0), Claim("earlier", 1, T0 - timedelta(days=1)))
LINKS = (Link("c1", "worker"), Link("c0", "worker", superseded=True))


def verify(
    verifier: Actor,
    *,
    cycle: int = 2,
    claims: Sequence[Claim] = CLAIMS,
    links: Sequence[Link] = LINKS,
    workers: Sequence[Actor] = (WORKER,),
) -> RailRefusal | None:
    return check_verifier(verifier=verifier, cycle=cycle, claims=claims, links=links, workers=workers)


# --- accepted -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("verifier", [PORTAL, REVIEWER, Actor("ext", ActorKind.EXTERNAL_VERIFIER, frozenset({"x"}))])
def test_distinct_verifier_in_its_own_boundary_is_accepted(verifier: Actor) -> None:
    assert verify(verifier) is None


def test_claimant_of_an_earlier_cycle_may_verify_after_a_reopen() -> None:
    # Rail 1 is scoped to the current cycle: "earlier" never claimed cycle 2 and committed nothing.
    assert verify(Actor("earlier", ActorKind.AGENT, frozenset({"box-e"}))) is None


def test_task_without_claims_or_links() -> None:
    assert verify(PORTAL, claims=(), links=(), workers=()) is None


# --- rail 1: no self-verification -----------------------------------------------------------------------------------


def test_unnamed_verifier_is_refused() -> None:
    refusal = verify(Actor(None, ActorKind.SERVICE, frozenset({"portal-1"})))
    assert refusal is not None and (refusal.rail, refusal.reason) == (1, Reason.UNNAMED_ACTOR)


def test_worker_verifying_its_own_claim_is_refused() -> None:
    refusal = verify(WORKER)
    assert refusal is not None and (refusal.rail, refusal.reason) == (1, Reason.WORKER_SELF_VERIFICATION)


def test_worker_token_of_another_kind_is_still_the_same_actor() -> None:
    # A person can be a worker on a task and try to review it: same actor id, so self-verification.
    refusal = verify(Actor("worker", ActorKind.HUMAN))
    assert refusal is not None and refusal.reason is Reason.WORKER_SELF_VERIFICATION


def test_unnamed_claimant_means_no_verifier_is_provably_distinct() -> None:
    refusal = verify(PORTAL, claims=(*CLAIMS, Claim(None, 2, T0)))
    assert refusal is not None and (refusal.rail, refusal.reason) == (1, Reason.UNNAMED_ACTOR)
    # An unnamed claim in another cycle does not matter.
    assert verify(PORTAL, claims=(*CLAIMS, Claim(None, 1, T0))) is None


def test_stale_cycle_approval() -> None:
    assert check_approval_cycle(approval_cycle=2, current_cycle=2) is None
    assert check_approval_cycle(approval_cycle=1, current_cycle=2) is Reason.STALE_CYCLE
    assert check_approval_cycle(approval_cycle=3, current_cycle=2) is Reason.STALE_CYCLE
    with pytest.raises(InvariantError):
        check_approval_cycle(approval_cycle=-1, current_cycle=2)


# --- rail 2: no verifying code you wrote ----------------------------------------------------------------------------


def test_verifier_who_committed_a_link_is_refused() -> None:
    author = Actor("author", ActorKind.EXTERNAL_VERIFIER, frozenset({"x"}))
    refusal = verify(author, links=(Link("c9", "author"),))
    assert refusal is not None and (refusal.rail, refusal.reason) == (2, Reason.VERIFIER_AUTHORED_WORK)


def test_superseded_link_still_counts() -> None:
    author = Actor("author", ActorKind.HUMAN)
    refusal = verify(author, links=(Link("c2", "worker"), Link("c1-before-rebase", "author", superseded=True)))
    assert refusal is not None and refusal.reason is Reason.VERIFIER_AUTHORED_WORK
    assert "c1-before-rebase" in refusal.detail


def test_link_with_unnamed_committer_is_refused() -> None:
    refusal = verify(PORTAL, links=(Link("c1", None),))
    assert refusal is not None and (refusal.rail, refusal.reason) == (2, Reason.UNNAMED_ACTOR)


def test_link_validation() -> None:
    assert Link("c", "").committing_actor is None
    with pytest.raises(InvariantError):
        Link("", "a")
    with pytest.raises(InvariantError):
        Link("c", "a", superseded="yes")  # type: ignore[arg-type]


# --- rail 3: no shared execution boundary ---------------------------------------------------------------------------


def test_verifier_in_the_workers_boundary_is_refused() -> None:
    neighbour = Actor("neighbour", ActorKind.EXTERNAL_VERIFIER, frozenset({"other", "box-w"}))
    refusal = verify(neighbour)
    assert refusal is not None and (refusal.rail, refusal.reason) == (3, Reason.SHARED_EXECUTION_BOUNDARY)
    assert "box-w" in refusal.detail


def test_verifier_among_workers_is_self_verification() -> None:
    # A worker record passed without a claim in this cycle: same actor is still worker-self-verification.
    helper = Actor("helper", ActorKind.AGENT, frozenset({"box-h"}))
    refusal = verify(helper, workers=(WORKER, helper))
    assert refusal is not None and (refusal.rail, refusal.reason) == (3, Reason.WORKER_SELF_VERIFICATION)


def test_unnamed_worker_record_is_refused() -> None:
    refusal = verify(PORTAL, workers=(WORKER, Actor(None, ActorKind.AGENT, frozenset({"z"}))))
    assert refusal is not None and (refusal.rail, refusal.reason) == (3, Reason.UNNAMED_ACTOR)


def test_claimant_without_a_worker_record_has_unknown_boundaries() -> None:
    refusal = verify(PORTAL, workers=())
    assert refusal is not None and (refusal.rail, refusal.reason) == (3, Reason.SHARED_EXECUTION_BOUNDARY)
    assert "worker" in refusal.detail


def test_actor_without_boundaries_shares_none() -> None:
    assert verify(REVIEWER, workers=(WORKER,)) is None
    bare_worker = Actor("worker", ActorKind.AGENT)
    assert verify(PORTAL, workers=(bare_worker,)) is None


# --- order of the rails ---------------------------------------------------------------------------------------------


def test_first_refusal_wins() -> None:
    # Claimant, author and neighbour at once: rail 1's code is reported.
    worker_author = Actor("worker", ActorKind.AGENT, frozenset({"box-w"}))
    refusal = verify(worker_author, links=(Link("c", "worker"),))
    assert refusal is not None and refusal.reason is Reason.WORKER_SELF_VERIFICATION
    # Author and neighbour: rail 2 before rail 3.
    author = Actor("author", ActorKind.AGENT, frozenset({"box-w"}))
    refusal = verify(author, links=(Link("c", "author"),))
    assert refusal is not None and refusal.reason is Reason.VERIFIER_AUTHORED_WORK


NAMES = st.sampled_from(["a", "b", "c", "d", None])
BOUNDS = st.frozensets(st.sampled_from(["b1", "b2", "b3"]), max_size=2)


@settings(max_examples=300)
@given(
    verifier=st.builds(Actor, NAMES, st.just(ActorKind.SERVICE), BOUNDS),
    claims=st.lists(st.builds(Claim, NAMES, st.integers(0, 2), st.just(T0)), max_size=4),
    links=st.lists(st.builds(Link, st.sampled_from(["c1", "c2"]), NAMES, st.booleans()), max_size=3),
    workers=st.lists(st.builds(Actor, NAMES, st.just(ActorKind.AGENT), BOUNDS), max_size=3),
)
def test_accepted_verifier_is_named_distinct_and_separate(
    verifier: Actor, claims: list[Claim], links: list[Link], workers: list[Actor]
) -> None:
    refusal = check_verifier(verifier=verifier, cycle=1, claims=claims, links=links, workers=workers)
    if refusal is not None:
        assert refusal.reason in RAIL_REASONS[refusal.rail]
        return
    # Rail 1's positive condition and rails 2-3, restated.
    current = [c.actor_id for c in claims if c.cycle == 1]
    assert verifier.actor_id is not None and verifier.actor_id not in current and None not in current
    assert all(link.committing_actor not in (None, verifier.actor_id) for link in links)
    assert all(
        w.actor_id not in (None, verifier.actor_id) and not (w.boundaries & verifier.boundaries) for w in workers
    )
    assert {c for c in current} <= {w.actor_id for w in workers}


# --- how a refusal lands ----------------------------------------------------------------------------------------------


def test_refusal_in_an_automated_run_is_an_unknown_check() -> None:
    refusal = verify(WORKER)
    assert refusal is not None
    check = rail_check_for_run(criterion_id="tests-pass", refusal=refusal, authority=Authority.DETERMINISTIC)
    assert (check.criterion, check.verdict, check.reason) == (
        "tests-pass",
        Verdict.UNKNOWN,
        Reason.WORKER_SELF_VERIFICATION,
    )
    assert check.authority is Authority.DETERMINISTIC
    assert check.detail.startswith("rail 1:")
    assert fold([check]) is Verdict.UNKNOWN


def test_refusal_in_a_human_decision_raises() -> None:
    raise_for_decision(None)  # no refusal, nothing raised
    refusal = verify(Actor("author", ActorKind.HUMAN), links=(Link("c1", "author", superseded=True),))
    with pytest.raises(DecisionRefused) as exc:
        raise_for_decision(refusal)
    assert exc.value.reason is Reason.VERIFIER_AUTHORED_WORK
    assert exc.value.details == {"rail": 2}


def test_rail_refusal_cannot_carry_another_rails_code() -> None:
    with pytest.raises(InvariantError):
        RailRefusal(1, Reason.VERIFIER_AUTHORED_WORK)
    with pytest.raises(InvariantError):
        RailRefusal(7, Reason.UNNAMED_ACTOR)
    assert RailRefusal(3, Reason.SELF_CONTRACT_ACCEPTANCE).rail == 3


# --- rail 4: a producer's account of what changed is not evidence ---------------------------------------------------

PRODUCER = Actor("worker", ActorKind.AGENT, frozenset({"box-w"}))
COLLECTOR = Actor("collector", ActorKind.COLLECTOR, frozenset({"store-1"}))


def manifest(reporter: Actor, *, producer: Actor = PRODUCER, declared: bool = False) -> RailRefusal | None:
    m = ChangeManifest("manifest-1", reporter, producer, producer_declared=declared)
    return check_change_manifest(criterion_id="only-docs-changed", manifest=m)


def test_independently_observed_manifest_is_accepted() -> None:
    assert manifest(COLLECTOR) is None


@pytest.mark.parametrize(
    ("reporter", "producer", "declared"),
    [
        (PRODUCER, PRODUCER, False),  # the producer's own account
        (Actor("worker", ActorKind.COLLECTOR, frozenset({"store-1"})), PRODUCER, False),  # producer's collector token
        (Actor("agent-2", ActorKind.AGENT, frozenset({"box-2"})), PRODUCER, False),  # not a collector
        (Actor("collector", ActorKind.COLLECTOR, frozenset({"box-w"})), PRODUCER, False),  # mounted in the boundary
        (Actor("collector", ActorKind.COLLECTOR), PRODUCER, False),  # no recorded boundary: no basis
        (COLLECTOR, Actor("worker", ActorKind.AGENT), False),  # producer's boundary unknown
        (Actor(None, ActorKind.COLLECTOR, frozenset({"store-1"})), PRODUCER, False),  # unnamed reporter
        (COLLECTOR, Actor(None, ActorKind.AGENT, frozenset({"box-w"})), False),  # unnamed producer
        (COLLECTOR, PRODUCER, True),  # arrived as part of the producer's account
    ],
)
def test_producer_declared_manifest_is_refused(reporter: Actor, producer: Actor, declared: bool) -> None:
    refusal = manifest(reporter, producer=producer, declared=declared)
    assert refusal is not None
    assert (refusal.rail, refusal.reason) == (4, Reason.CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED)
    check = rail_check_for_run(criterion_id="only-docs-changed", refusal=refusal, authority=Authority.DETERMINISTIC)
    assert (check.verdict, check.reason) == (Verdict.UNKNOWN, Reason.CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED)


# --- rails 5 and 6 live in criteria; here they meet the cycle's first claim and registration -----------------------

SECRET = b"s" * 32


def test_rail5_baseline_must_precede_the_cycles_first_claim() -> None:
    claims = (Claim("worker", 2, T0), Claim("worker", 1, T0 - timedelta(days=3)))
    started = first_claim_at(cycle=2, claims=claims)
    assert started == T0

    def baseline(captured: datetime) -> Baseline:
        return capture_baseline(
            SECRET,
            subject="task-1@2",
            artifact_key="config",
            digest=sha256_digest(b"v1"),
            captured_at=captured,
            reporter_actor="collector",
            reporter_boundaries=frozenset({"store-1"}),
            reporter_is_collector=True,
        )

    def unchanged(b: Baseline | None) -> tuple[Verdict, Reason]:
        check = evaluate_unchanged(
            "config-unchanged",
            b"v1",
            b,
            evidence_id="config",
            secret=SECRET,
            subject="task-1@2",
            artifact_key="config",
            producer_actor="worker",
            producer_boundaries=frozenset({"box-w"}),
            first_claim_at=started,
        )
        return check.verdict, check.reason

    assert unchanged(baseline(T0 - timedelta(minutes=1))) == (Verdict.PASS, Reason.BASELINE_UNCHANGED)
    assert unchanged(baseline(T0)) == (Verdict.UNKNOWN, Reason.MISSING_BASELINE)
    assert unchanged(None) == (Verdict.UNKNOWN, Reason.MISSING_BASELINE)
    assert RailRefusal(5, Reason.BASELINE_AFTER_FIRST_CLAIM).rail == 5


def test_rail6_an_obligation_that_cannot_fail_is_refused() -> None:
    doc = {"name": "r", "criteria": [{"id": "c1", "kind": "digest", "observable": "evidence.present"}]}
    with pytest.raises(RubricError) as exc:
        register_rubric(doc)
    assert exc.value.reason is Reason.OBLIGATION_NOT_FALSIFIABLE
    assert exc.value.details["sub_reason"] in {r.value for r in RAIL_REASONS[6]}

"""``cycle_workers`` in one query (issue 15): the same record as the row sources read one by one (claims, submitters,
links, the workers' token boundaries, the contract, the task's current cycle), in one round trip; and the decision
rails over it in one query, so "Next item" checks its candidate with one."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, example, given, settings

from tests.portal.conftest import Queue
from tests.reviews.test_claim_filter import _build, _cases, _one_rule
from verification.actors.models import Actor
from verification.actors.services.actors import actor_for_user, boundaries_for, kernel_actor
from verification.kernel.contracts import Claim as KernelClaim
from verification.kernel.rails import Link as KernelLink
from verification.reviews.services.claims import _rail_refusal, _rails_over, review_claim_next
from verification.runs.cycle_workers import CycleWorkers, cycle_workers
from verification.runs.models import Claim, Link, Task, Verification
from verification.runs.selectors import contract_of, current_cycle

pytestmark = pytest.mark.django_db

ACTOR_FIELDS = ("pk", "name", "kind", "user_id", "created_at")


def _fields(actors: Any) -> list[tuple[Any, ...]]:
    return [tuple(getattr(a, f) for f in ACTOR_FIELDS) for a in actors]


def _one_by_one(task: Task, cycle: int) -> dict[str, Any]:
    """The record as the sources give it read one query each (``cycle_workers`` before issue 15)."""
    claims = list(Claim.objects.filter(task=task).select_related("actor").order_by("claimed_at", "id"))
    claimants: dict[int, Actor] = {}
    for claim in claims:
        if claim.cycle == cycle:
            claimants.setdefault(claim.actor.pk, claim.actor)
    submitters: dict[int, Actor] = {}
    rows = Verification.objects.filter(task=task, cycle=cycle, submitted_by__isnull=False)
    for verification in rows.select_related("submitted_by").order_by("submitted_at", "id"):
        if verification.submitted_by.pk not in claimants:
            submitters.setdefault(verification.submitted_by.pk, verification.submitted_by)
    actors = (*claimants.values(), *submitters.values())
    boundaries = boundaries_for(actors)
    links = Link.objects.filter(task=task).select_related("committing_actor").order_by("created_at", "id")
    contract = contract_of(task, cycle)
    return {
        "claims": tuple(KernelClaim(row.actor.name, row.cycle, row.claimed_at) for row in claims),
        "claimants": _fields(claimants.values()),
        "submitters": _fields(submitters.values()),
        "workers": tuple(kernel_actor(a, boundaries[a.pk]) for a in actors),
        "links": tuple(
            KernelLink(row.commit_id, row.committing_actor.name if row.committing_actor else None, row.superseded)
            for row in links
        ),
        "contract": None
        if contract is None
        else (contract.pk, contract.rubric_id, contract.cycle, contract.accepted_at, contract.accepted_by.name),
        "current_cycle": current_cycle(task),
    }


def _in_one(task: Task, cycle: int) -> tuple[dict[str, Any], CycleWorkers]:
    with CaptureQueriesContext(connection) as queries:
        found = cycle_workers(task, cycle)
        contract = found.contract
        record = {
            "claims": found.claims,
            "claimants": _fields(found.claimants),
            "submitters": _fields(found.submitters),
            "workers": found.workers,
            "links": found.links,
            "contract": None
            if contract is None
            else (contract.pk, contract.rubric_id, contract.cycle, contract.accepted_at, contract.accepted_by.name),
            "current_cycle": found.current_cycle,
        }
    assert len(queries) == 1, [q["sql"] for q in queries]
    return record, found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases)
@example(case=_one_rule(tokens=[(0, "ctr-1"), (1, "ctr-1"), (2, "ctr-2"), (4, "portal")], submissions=[(4, 1)]))
@example(case=_one_rule(cycles=3, claims=[(2, 1), (1, 2), (2, 3)], links=[(None, True), (0, False)]))
def test_one_query_reads_what_the_sources_give_one_by_one(case: dict[str, Any]) -> None:
    with transaction.atomic():
        verifications, _ = _build(case)
        task = verifications[0].task
        for cycle in range(1, 4):
            record, _ = _in_one(task, cycle)
            assert record == _one_by_one(task, cycle), (case, cycle)
        transaction.set_rollback(True)


def test_the_contract_and_its_acceptor_come_with_the_workers(queue: Queue) -> None:
    """A real cycle: contract accepted by the owner, claimed and submitted by the agent through its token."""
    verification = queue.unknown("with a contract")
    record, found = _in_one(verification.task, verification.cycle)
    assert record == _one_by_one(verification.task, verification.cycle)
    assert found.contract is not None and found.acceptor == queue.world.owner.actor
    assert found.acceptor_id == queue.world.owner.actor.name
    assert found.is_worker(queue.world.agent.actor) and found.workers[0].boundaries


def test_the_rails_on_a_candidate_take_one_query(queue: Queue, reviewer: Any) -> None:
    """ "Next item"'s check of a candidate: the workers and the reviewer's actor with its boundaries in one query,
    with the outcome of the rails over the actor read by itself; allowed or barred."""
    plain = queue.unknown("plain")
    own = queue.self_review_trap(reviewer)  # the reviewer's actor claimed it through its token (a boundary)
    actor = actor_for_user(reviewer)
    for verification, barred in ((plain, False), (own, True)):
        with CaptureQueriesContext(connection) as queries:
            found = cycle_workers(Task(pk=verification.task_id), verification.cycle, reviewer=reviewer)
            refusal = _rails_over(found, found.verifier)
        assert len(queries) == 1
        assert found.reviewer == actor and found.verifier == kernel_actor(actor) and found.verifier.boundaries
        again = _rail_refusal(Verification.objects.get(pk=verification.pk), actor)
        assert (None if refusal is None else (refusal.reason, refusal.detail)) == (
            None if again is None else (again.reason, again.detail)
        )
        assert (refusal is not None) == barred
    assert refusal is not None and refusal.reason == "worker-self-verification"


def test_a_reviewer_without_an_actor_reads_none_and_claims_with_a_new_one(queue: Queue, make_user: Any) -> None:
    """A reviewer's first claim: the query finds no actor for it; "Next item" creates it (as ``actor_for_user``)."""
    plain = queue.unknown("plain")
    newcomer = make_user("newcomer", "reviewer")
    found = cycle_workers(plain.task, plain.cycle, reviewer=newcomer)
    assert found.reviewer is None and found.verifier is None
    assert review_claim_next(user=newcomer) == plain
    assert Actor.objects.filter(user=newcomer).exists()


def test_a_cycle_resubmitted_many_times_reads_one_row_per_submitter() -> None:
    """Every resubmission of a cycle makes no new worker: the query sends one row per submitter (its first submission
    orders it), not one per verification, so a cycle resubmitted a thousand times costs what it did at the first."""
    from verification.runs import cycle_workers as module

    with transaction.atomic():
        verifications, _ = _build(_one_rule(claims=[], submissions=[(1, 1), (2, 1), (1, 1), (4, 1), (2, 1)] * 6))
        task = verifications[0].task
        rows = list(module._rows(task=task.pk, cycle=1))
        submitted = [row[4] for row in rows if row[0] == module._SUBMISSION]
        first = {v.submitted_by_id: None for v in verifications if v.submitted_by_id is not None}
        assert submitted == list(first) and len(submitted) == 3  # bob, cy, the portal: first submission first
        record, _ = _in_one(task, 1)
        assert record == _one_by_one(task, 1)
        transaction.set_rollback(True)


def test_the_workers_of_a_verification_read_by_its_key_are_those_of_its_subject(queue: Queue, reviewer: Any) -> None:
    """``workers_of_verification_query`` (a decision sends it with its lock, knowing only the key) reads what
    ``cycle_workers`` reads for the verification's task and cycle, the reviewer's actor and boundaries included."""
    from verification.compiled import pipelined
    from verification.runs.cycle_workers import workers_from_rows, workers_of_verification_query

    for verification in (queue.unknown("plain"), queue.self_review_trap(reviewer)):
        task = Task(pk=verification.task_id)
        (rows,) = pipelined(workers_of_verification_query(verification.pk, reviewer))
        by_key = workers_from_rows(task, verification.cycle, rows)
        by_subject = cycle_workers(task, verification.cycle, reviewer=reviewer)
        for name in ("claims", "links", "workers", "current_cycle", "verifier"):
            assert getattr(by_key, name) == getattr(by_subject, name), name
        for name in ("claimants", "submitters"):
            assert _fields(getattr(by_key, name)) == _fields(getattr(by_subject, name)), name
        assert by_key.reviewer == by_subject.reviewer and by_key.acceptor_id == by_subject.acceptor_id

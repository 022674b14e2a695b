"""Issue 11 items 1–3 as an adversary tried them (SPEC §1 workers of a cycle and contracts, §9 rails 1 and 3).

Each refusal asserts its code and the rows before/after: a refused write leaves nothing behind.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps

from tests.api.conftest import Api, api  # noqa: F401 - the fixture
from tests.portal.conftest import make_user  # noqa: F401 - the fixture
from tests.verification.service_world import (
    CONFIG_AFTER,
    NOTES,
    Party,
    World,
    digest_entry,
    inline,
    unchanged_entry,
)
from verification.actors.services.actors import actor_create, actor_for_user, token_issue
from verification.errors import ServiceError
from verification.kernel.digests import sha256_digest
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.reviews.models import ReviewDecision
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_decide
from verification.runs.cycle_workers import cycle_workers
from verification.runs.models import Claim, ContractAcceptance, Verification
from verification.runs.services.rubrics import rubric_register
from verification.runs.services.tasks import claim_record, contract_accept, link_record, task_create, task_reopen
from verification.trust.selectors import head_of, receipt_payload

pytestmark = pytest.mark.django_db


def row_counts() -> dict[str, int]:
    """Every table of the verification app, counted: a refused write must leave each one as it was."""
    return {m.__name__: m.objects.count() for m in apps.get_app_config("verification").get_models()}


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def party(name: str, kind: str, boundary: str) -> Party:
    actor = actor_create(name=name, kind=kind)
    token, raw = token_issue(actor=actor, boundary=boundary, scopes=["claims:write", "contracts:write",
                                                                     "verifications:write", "tasks:write",
                                                                     "rubrics:write", "verifications:read"])
    return Party(actor, token, raw)


# --- item 1: a reviewer approves their own work --------------------------------------------------------------------


def test_item1_a_reviewer_who_submitted_but_never_claimed_cannot_pass_their_own_work(
    signing_key: Any, api: Api, make_user: Any  # noqa: F811 - fixtures
) -> None:
    world = World.build()
    world.contract(unchanged_entry(), claim=False)  # the task is never claimed
    reviewer = make_user("rita", "reviewer")
    _, raw = token_issue(actor=actor_for_user(reviewer), boundary="laptop-rita", scopes=["verifications:write"])

    body = {"task": str(world.task.pk), "evidence": [inline("config", CONFIG_AFTER)]}
    submitted = api.post("/v1/verifications", body, **bearer(raw))
    assert submitted.status_code in (200, 202), submitted.content
    verification = Verification.objects.get(pk=submitted.json()["id"])
    world.run(verification)
    verification.refresh_from_db()
    assert (verification.verdict, verification.reason, verification.flagged) == ("UNKNOWN", "missing-baseline", True)
    assert not Claim.objects.filter(task=world.task).exists()
    assert verification.submitted_by == actor_for_user(reviewer)

    review_claim(user=reviewer, verification=verification)  # the same person claims it in the portal
    evidence_id = str(receipt_payload(head_of(verification))["evidence"][0]["id"])  # type: ignore[arg-type]
    before = row_counts()
    with pytest.raises(KernelError) as info:
        review_decide(user=reviewer, verification=verification, verdict="PASS", rationale="looks right to me",
                      cited_evidence_ids=[evidence_id], request_key=new_request_key())
    assert info.value.reason is Reason.WORKER_SELF_VERIFICATION
    after = row_counts()
    assert after["Receipt"] == before["Receipt"] and after["ReviewDecision"] == before["ReviewDecision"] == 0
    assert not ReviewDecision.objects.filter(verification=verification).exists()


# --- item 2: a worker picks its own contract ------------------------------------------------------------------------


def test_item2_an_agent_cannot_accept_the_contract_of_a_task_it_does_not_own(signing_key: Any) -> None:
    world = World.build()
    controlled = rubric_register(actor=world.agent.actor, document={"name": "mine", "criteria": [digest_entry()]})
    before = row_counts()
    with pytest.raises(ServiceError) as info:
        contract_accept(actor=world.agent.actor, task=world.task, rubric_hash=controlled.rubric_hash)
    assert (info.value.reason, info.value.http_status) == (Reason.NOT_TASK_OWNER, 403)
    assert row_counts() == before


def test_item2_through_the_api_an_agent_accepting_another_owners_contract_is_403(
    signing_key: Any, api: Api  # noqa: F811 - the fixture
) -> None:
    world = World.build()
    registered = api.post("/v1/rubrics", {"name": "mine", "criteria": [digest_entry()]}, **bearer(world.agent.raw))
    assert registered.status_code in (200, 201), registered.content
    before = row_counts()
    response = api.post(f"/v1/tasks/{world.task.pk}/contract", {"rubric_hash": registered.json()["rubric_hash"]},
                        **bearer(world.agent.raw))
    assert response.status_code == 403 and response.json()["error"]["code"] == "not-task-owner"
    assert row_counts() == before


def _agent_owned_task(world: World) -> tuple[Party, Any]:
    """An agent creates its own task and accepts a rubric over bytes it controls as the contract (it owns the task)."""
    agent = world.agent
    world.task = task_create(actor=agent.actor, title="my own task")
    rubric = rubric_register(actor=agent.actor, document={"name": "mine", "criteria": [digest_entry()]})
    contract_accept(actor=agent.actor, task=world.task, rubric_hash=rubric.rubric_hash)
    return agent, rubric


def test_item2_the_acceptor_can_never_claim_that_cycle(signing_key: Any, api: Api) -> None:  # noqa: F811
    world = World.build()
    agent, _ = _agent_owned_task(world)
    before = row_counts()
    with pytest.raises(ServiceError) as info:
        claim_record(actor=agent.actor, token=agent.token, task=world.task)
    assert (info.value.reason, info.value.http_status) == (Reason.SELF_CONTRACT_ACCEPTANCE, 403)
    assert row_counts() == before
    response = api.post(f"/v1/tasks/{world.task.pk}/claims", {}, **bearer(agent.raw))
    assert response.status_code == 403 and response.json()["error"]["code"] == "self-contract-acceptance"
    assert row_counts() == before


def test_item2_a_verification_the_acceptor_submits_answers_unknown_self_contract_acceptance(signing_key: Any) -> None:
    world = World.build()
    agent, _ = _agent_owned_task(world)
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]}, party=agent)  # never claimed
    assert (verification.verdict, verification.reason, verification.flagged) == (
        "UNKNOWN", "self-contract-acceptance", True
    )
    assert verification.determination != "met"
    payload = receipt_payload(head_of(verification))  # type: ignore[arg-type]
    assert payload["checks"][0]["reason"] == "self-contract-acceptance"
    assert payload["flag_reason"] == "needs_review: self-contract-acceptance"


def test_item2_a_submitter_of_the_cycle_is_a_worker_and_cannot_accept_its_contract(signing_key: Any) -> None:
    world = World.build()
    rubric = world.rubric(digest_entry())
    # A contract owner submits work in this cycle (no contract yet: it answers no-accepted-contract) ...
    world.submit_and_run({"evidence": [inline("notes", NOTES)]}, party=world.owner)
    before = row_counts()
    # ... and is then a worker of the cycle: it may not accept the contract that judges its own attempt.
    with pytest.raises(ServiceError) as info:
        contract_accept(actor=world.owner.actor, task=world.task, rubric_hash=rubric.rubric_hash)
    assert (info.value.reason, info.value.http_status) == (Reason.SELF_CONTRACT_ACCEPTANCE, 403)
    assert row_counts() == before


# --- item 3: anyone can swap a contract mid-cycle -------------------------------------------------------------------


def test_item3_a_second_contract_in_the_same_cycle_is_409_and_nothing_changes(
    signing_key: Any, api: Api  # noqa: F811 - the fixture
) -> None:
    world = World.build()
    first = world.contract(digest_entry())
    other = world.rubric(digest_entry(literal=sha256_digest(b"whatever I like")))
    before = row_counts()
    response = api.post(f"/v1/tasks/{world.task.pk}/contract", {"rubric_hash": other.rubric_hash},
                        **bearer(world.owner.raw))
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "contract-already-accepted"
    assert row_counts() == before
    # Even the same rubric again is a second acceptance.
    with pytest.raises(ServiceError) as info:
        contract_accept(actor=world.owner.actor, task=world.task, rubric_hash=first.rubric_hash)
    assert (info.value.reason, info.value.http_status) == (Reason.CONTRACT_ALREADY_ACCEPTED, 409)
    assert row_counts() == before
    # The next run is judged by the first rubric.
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    assert (verification.rubric_hash, verification.determination) == (first.rubric_hash, "met")
    # To judge by another rubric, reopen: the new cycle takes its own contract.
    task_reopen(actor=world.owner.actor, task=world.task)
    world.accept(other)
    assert ContractAcceptance.objects.filter(task=world.task).count() == 2


def test_item3_the_database_refuses_a_second_acceptance_row_of_a_cycle(signing_key: Any) -> None:
    from django.db import IntegrityError, transaction

    world = World.build()
    rubric = world.contract(digest_entry())
    with pytest.raises(IntegrityError), transaction.atomic():
        ContractAcceptance.objects.create(task=world.task, cycle=1, rubric=rubric, accepted_by=world.owner.actor)
    assert ContractAcceptance.objects.filter(task=world.task).count() == 1


# --- the one selector ---------------------------------------------------------------------------------------------


def test_the_selector_names_claimants_submitters_committers_and_the_acceptor(signing_key: Any) -> None:
    world = World.build()
    world.contract(digest_entry())  # the owner accepts; the agent claims
    helper = party("helper-h", "agent", "ctr-helper")
    world.submit_and_run({"evidence": [inline("notes", NOTES)]}, party=helper)  # submits without claiming
    link_record(actor=world.collector.actor, token=world.collector.token, task=world.task, commit_id="c0",
                committing_actor="agent-w", superseded=True)
    link_record(actor=world.collector.actor, token=world.collector.token, task=world.task, commit_id="c1",
                committing_actor="nobody-we-know")
    found = cycle_workers(world.task, 1)
    assert [a.name for a in found.claimants] == ["agent-w"]
    assert [a.name for a in found.submitters] == ["helper-h"]
    assert [w.actor_id for w in found.workers] == ["agent-w", "helper-h"]
    assert {w.actor_id: w.boundaries for w in found.workers} == {
        "agent-w": frozenset({"ctr-worker"}), "helper-h": frozenset({"ctr-helper"})
    }
    assert [(lk.commit_id, lk.committing_actor, lk.superseded) for lk in found.links] == [
        ("c0", "agent-w", True), ("c1", None, False)
    ]
    assert found.acceptor is not None and found.acceptor.name == "owner-o"
    assert found.is_worker(helper.actor) and not found.is_worker(world.owner.actor)
    # Another cycle has its own workers and no contract.
    task_reopen(actor=world.owner.actor, task=world.task)
    again = cycle_workers(world.task, 2)
    assert (again.workers, again.acceptor) == ((), None)
    assert [lk.commit_id for lk in again.links] == ["c0", "c1"]  # links anchor the task's work in every cycle

"""The claim query's filter for the rails (issue 15): ``cycle_workers.rails_certainly_refuse`` is the SQL form of
the decision rails (``services.claims._rail_refusal``: the approval's cycle, then rails 1-3 over ``cycle_workers``).

"Next item" passes over what that condition bars in its one query and runs the exact rails only on the item it is
about to lease. The condition must never bar an item the rails allow (else a reviewer would be offered less than the
rails permit), and should bar every item they refuse (else each one costs a round of the exact rails). Both are
checked here over generated rows, against the rails themselves; then the claim is tried as each attacker of the
brief, through the real services.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.portal.conftest import Queue
from tests.verification.service_world import CONFIG_AFTER, Party, inline, unchanged_entry
from verification.actors.models import Actor, ApiToken
from verification.actors.services.actors import actor_for_user, portal_service_actor, token_issue
from verification.reviews.models import ReviewLease
from verification.reviews.services.claims import _rail_refusal, review_claim_next
from verification.runs.cycle_workers import rails_certainly_refuse, rails_uncertain
from verification.runs.models import Claim, Link, Task, TaskCycle, Verification
from verification.runs.services.tasks import claim_record, contract_accept, link_record, task_create, task_reopen
from verification.trust.models import SecurityLogEntry

pytestmark = pytest.mark.django_db

HEX = "0" * 64
#: Names of the generated actors: " " is unnamed to the kernel (a blank id); "portal" is the portal's own actor.
NAMES = ("ann", "bob", "cy", " ", "portal")
BOUNDARIES = ("ctr-1", "ctr-2", "portal")

_actor = st.sampled_from(range(len(NAMES)))
_cases = st.fixed_dictionaries(
    {
        "tokens": st.lists(st.tuples(_actor, st.sampled_from(BOUNDARIES)), max_size=5),
        "cycles": st.integers(1, 3),  # the task's cycles: 1..cycles
        "claims": st.lists(st.tuples(_actor, st.integers(1, 3)), max_size=3),
        "submissions": st.lists(st.tuples(st.none() | _actor, st.integers(1, 3)), min_size=1, max_size=3),
        "links": st.lists(st.tuples(st.none() | _actor, st.booleans()), max_size=2),
        "verifier": _actor,
    }
)


def _actors(names: tuple[str, ...] = NAMES) -> list[Actor]:
    made = []
    for name in names:
        if name == "portal":
            made.append(portal_service_actor())
        else:
            made.append(Actor.objects.create(name=name, kind="human" if name == "ann" else "agent"))
    return made


def _build(case: dict[str, Any], names: tuple[str, ...] = NAMES) -> tuple[list[Verification], Actor]:
    """The case's rows, written directly (the rails read nothing else): actors and their tokens, a task with its
    cycles, claims, verifications (some without a submitter), links (some without a known committer)."""
    actors = _actors(names)
    for who, boundary in case["tokens"]:
        ApiToken.objects.create(actor=actors[who], boundary=boundary, token_hash=secrets.token_hex(32), prefix="t")
    task = Task.objects.create(title="generated")
    for number in range(1, case["cycles"] + 1):
        TaskCycle.objects.get_or_create(task=task, number=number)
    for who, cycle in case["claims"]:
        Claim.objects.create(task=task, cycle=min(cycle, case["cycles"]), actor=actors[who], boundary="ctr-1")
    for i, (who, committer) in enumerate(case["links"]):
        Link.objects.create(
            task=task,
            commit_id=f"c{i}",
            committing_actor=None if who is None else actors[who],
            reported_by=actors[0],
            reported_boundary="ctr-1",
            superseded=committer,
        )
    verifications = [
        Verification.objects.create(
            rubric_hash=HEX,
            submission_hash=HEX,
            task=task,
            cycle=min(cycle, case["cycles"]),
            submitted_by=None if who is None else actors[who],
        )
        for who, cycle in case["submissions"]
    ]
    verifications.append(Verification.objects.create(rubric_hash=HEX, submission_hash=HEX))  # no subject
    return verifications, actors[case["verifier"]]


def _one_rule(**changes: Any) -> dict[str, Any]:
    """A case where only the rule ``changes`` sets up can refuse: "cy" claimed cycle 1, "bob" submitted, "ann"
    verifies; no links, no tokens."""
    case = {"tokens": [], "cycles": 1, "claims": [(2, 1)], "submissions": [(1, 1)], "links": [], "verifier": 0}
    return {**case, **changes}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cases)
@example(case=_one_rule())  # nothing refuses
@example(case=_one_rule(tokens=[(0, "ctr-1"), (1, "ctr-1")]))  # a submitter's boundary
@example(case=_one_rule(tokens=[(0, "ctr-2"), (2, "ctr-2")]))  # a claimant's boundary
@example(case=_one_rule(tokens=[(0, "portal")], submissions=[(4, 1)]))  # the portal's own boundary
@example(case=_one_rule(tokens=[(4, "ctr-1"), (1, "portal")], verifier=4))  # the portal as the verifier
@example(case=_one_rule(links=[(0, True)]))  # a superseded link of the verifier's
@example(case=_one_rule(links=[(None, False)]))  # an unknown committer
@example(case=_one_rule(claims=[(3, 1)]))  # an unnamed claimant
@example(case=_one_rule(submissions=[(3, 1)]))  # an unnamed submitter
@example(case=_one_rule(verifier=3))  # an unnamed verifier
@example(case=_one_rule(cycles=2))  # cycle 1 of 2: stale
@example(case=_one_rule(claims=[(0, 1)]))  # the verifier claimed
@example(case=_one_rule(submissions=[(0, 1), (None, 1)]))  # the verifier submitted; a verification without one
def test_the_sql_form_bars_exactly_what_the_rails_refuse(case: dict[str, Any]) -> None:
    with transaction.atomic():
        verifications, verifier = _build(case)
        barred_in_sql = set(
            Verification.objects.filter(rails_certainly_refuse(verifier.pk)).values_list("pk", flat=True)
        )
        for verification in verifications:
            refusal = _rail_refusal(Verification.objects.get(pk=verification.pk), verifier)
            assert (verification.pk in barred_in_sql) == (refusal is not None), (case, refusal)
        transaction.set_rollback(True)


#: Names and boundaries the SQL form reads less exactly than the kernel: a tab (blank to ``strip``, not to a trim of
#: spaces), spaces around a name, a name that does not start with printable ASCII.
ODD_NAMES = (*NAMES, "\t", " dee ", "\u00e9va")
ODD_BOUNDARIES = (*BOUNDARIES, "\t", " ctr-1 ", "ctr-1\n")
_odd_actor = st.sampled_from(range(len(ODD_NAMES)))
_odd_cases = st.fixed_dictionaries(
    {
        "tokens": st.lists(st.tuples(_odd_actor, st.sampled_from(ODD_BOUNDARIES)), max_size=5),
        "cycles": st.integers(1, 3),
        "claims": st.lists(st.tuples(_odd_actor, st.integers(1, 3)), max_size=3),
        "submissions": st.lists(st.tuples(st.none() | _odd_actor, st.integers(1, 4)), min_size=1, max_size=3),
        "links": st.lists(st.tuples(st.none() | _odd_actor, st.booleans()), max_size=2),
        "verifier": _odd_actor,
    }
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_odd_cases)
@example(case=_one_rule(claims=[(5, 1)]))  # a claimant named by a tab: unnamed, not barred by the SQL form
@example(case=_one_rule(tokens=[(0, "\t"), (1, "\t")]))  # a shared tab boundary: blank, so not shared
@example(case=_one_rule(tokens=[(0, " ctr-1 "), (1, " ctr-1 ")]))  # a shared boundary with spaces around it
@example(case=_one_rule(verifier=6))  # a verifier with spaces around its name: named
@example(case=_one_rule(submissions=[(1, 2)], cycles=1))  # a verification of a cycle the task does not have yet
def test_the_sql_form_refuses_only_what_the_rails_refuse_and_vouches_only_for_what_they_allow(
    case: dict[str, Any],
) -> None:
    """With names and boundaries the SQL form cannot read as the kernel does: where it bars an item
    (``rails_certainly_refuse``) the rails refuse, and where it neither bars it nor doubts it (``rails_uncertain``)
    the rails allow; the claim leases an item without running the rails only then (``claims._judged_queryset``)."""
    with transaction.atomic():
        verifications, verifier = _build(case, ODD_NAMES)
        barred = set(Verification.objects.filter(rails_certainly_refuse(verifier.pk)).values_list("pk", flat=True))
        unsure = set(Verification.objects.filter(rails_uncertain(verifier.pk)).values_list("pk", flat=True))
        for verification in verifications:
            refusal = _rail_refusal(Verification.objects.get(pk=verification.pk), verifier)
            if verification.pk in barred:
                assert refusal is not None, case
            elif verification.pk not in unsure:
                assert refusal is None, (case, refusal)
        transaction.set_rollback(True)


def test_whitespace_other_than_spaces_is_left_to_the_exact_rails() -> None:
    """The SQL form trims spaces only; a name of other whitespace is unnamed to the kernel. It does not bar it (so it
    never bars more than the rails) and the rails still refuse it."""
    task = Task.objects.create(title="tab")
    TaskCycle.objects.get_or_create(task=task, number=1)
    tab = Actor.objects.create(name="\t", kind="agent")
    verifier = Actor.objects.create(name="vera", kind="human")
    Claim.objects.create(task=task, cycle=1, actor=tab, boundary="ctr-1")
    verification = Verification.objects.create(rubric_hash=HEX, submission_hash=HEX, task=task, cycle=1)
    assert not Verification.objects.filter(rails_certainly_refuse(verifier.pk), pk=verification.pk).exists()
    assert _rail_refusal(verification, verifier) is not None


# --- the claim as each attacker ----------------------------------------------------------------------------------


def _claims_logged(verification: Verification) -> int:
    return SecurityLogEntry.objects.filter(kind="claim", target=str(verification.pk)).count()


def _never_leased(verification: Verification) -> bool:
    return not ReviewLease.objects.filter(verification=verification).exists() and _claims_logged(verification) == 0


def _worker_of_the_cycle(queue: Queue, user: Any) -> Verification:
    return queue.self_review_trap(user)


def _submitter_via_api_token(queue: Queue, user: Any) -> Verification:
    """The reviewer's own actor (the same human, through an API token) submitted the work without claiming it."""
    queue._task("submitted with the reviewer's token")
    queue.world.contract(unchanged_entry(), claim=False)
    actor = actor_for_user(user)
    token, raw = token_issue(actor=actor, boundary="laptop-own", scopes=["verifications:write"])
    verification, _ = queue.world.submit_and_run(
        {"evidence": [inline("config", CONFIG_AFTER)]}, party=Party(actor, token, raw)
    )
    return queue._done(verification)


def _contract_acceptor_who_submitted(queue: Queue, user: Any) -> Verification:
    """The reviewer's actor owns the task, accepted its cycle's contract and then submitted the work itself (the run
    answers UNKNOWN ``self-contract-acceptance``, and the submitter is a worker of the cycle)."""
    actor = actor_for_user(user)
    queue.world.task = task_create(actor=actor, title="accepted, then submitted")
    token, raw = token_issue(actor=actor, boundary="laptop-acceptor", scopes=["verifications:write"])
    contract_accept(actor=actor, task=queue.world.task, rubric_hash=queue.world.rubric(unchanged_entry()).rubric_hash)
    verification, _ = queue.world.submit_and_run(
        {"evidence": [inline("config", CONFIG_AFTER)]}, party=Party(actor, token, raw)
    )
    return queue._done(verification)


def _stale_cycle(queue: Queue, user: Any) -> Verification:
    """Flagged in cycle 1; the owner reopened the task since: an approval of it would be ``stale-cycle``."""
    verification = queue.unknown("reopened since")
    task_reopen(actor=queue.world.owner.actor, task=queue.world.task)
    return verification


def _committed_a_link(queue: Queue, user: Any) -> Verification:
    return queue.authored_by(user)


ATTACKERS = {
    "a worker of the cycle (claimed it through its own token)": _worker_of_the_cycle,
    "the submitter, through an API token of the same human": _submitter_via_api_token,
    "the contract acceptor that then submitted": _contract_acceptor_who_submitted,
    "anyone, on an approval of a stale cycle": _stale_cycle,
    "the committer of a superseded link": _committed_a_link,
}


@pytest.mark.parametrize("attacker", list(ATTACKERS))
def test_next_item_never_claims_for_an_attacker_and_an_unrelated_reviewer_claims_it(
    queue: Queue, reviewer: Any, reviewer2: Any, attacker: str
) -> None:
    barred = ATTACKERS[attacker](queue, reviewer)
    assert Verification.objects.filter(rails_certainly_refuse(actor_for_user(reviewer).pk), pk=barred.pk).exists()
    assert review_claim_next(user=reviewer) is None  # the only item: the rails bar it, the SQL form agrees
    assert _never_leased(barred)
    if attacker.startswith("anyone"):
        assert review_claim_next(user=reviewer2) is None  # stale for everyone
        assert _never_leased(barred)
    else:
        assert review_claim_next(user=reviewer2) == barred  # an unrelated reviewer may take it


def test_a_current_link_committed_by_the_reviewer_bars_it(queue: Queue, reviewer: Any) -> None:
    """A collector's link naming the reviewer's actor as the committer of a current link bars it too."""
    plain = queue.unknown("plain")
    link_record(
        actor=queue.world.collector.actor,
        token=queue.world.collector.token,
        task=plain.task,
        commit_id="def456",
        committing_actor=actor_for_user(reviewer).name,
    )
    assert review_claim_next(user=reviewer) is None
    assert _never_leased(plain)


def test_a_claim_recorded_later_bars_the_item_at_once(queue: Queue, reviewer: Any, reviewer2: Any) -> None:
    """The filter reads the rows as they are now: a claim recorded after the item was queued bars it at once."""
    item = queue.unknown("claimed later")
    actor = actor_for_user(reviewer)
    token, _ = token_issue(actor=actor, boundary="laptop-late", scopes=["claims:write"])
    claim_record(actor=actor, token=token, task=item.task)
    assert review_claim_next(user=reviewer) is None and _never_leased(item)
    assert review_claim_next(user=reviewer2) == item


def _count_rails(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The tasks the exact rails run on during a claim (``claims._rails_over``), in order."""
    from verification.reviews.services import claims as reviews

    runs: list[Any] = []
    rails = reviews._rails_over

    def counted(found: Any, verifier: Any) -> Any:
        runs.append(found.task.pk)
        return rails(found, verifier)

    monkeypatch.setattr(reviews, "_rails_over", counted)
    return runs


def test_barred_items_at_the_front_are_passed_over_by_the_sql_form_without_the_rails(
    queue: Queue, reviewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three items at the front the reviewer worked on, then a plain one: the rails' SQL form judges each candidate in
    the claim's own round trip (issue 15), so the three are passed over as barred and the plain one is leased as
    certainly allowed; the exact rails never run. (Before, they ran on the first barred item and on the plain one.)"""
    barred = [queue.self_review_trap(reviewer, title=f"own work {i}") for i in range(3)]
    plain = queue.unknown("after them")
    runs = _count_rails(monkeypatch)
    assert review_claim_next(user=reviewer) == plain
    assert runs == []
    assert all(_never_leased(item) for item in barred)


def test_the_exact_rails_decide_where_the_sql_form_cannot_vouch(
    queue: Queue, reviewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claimant named by a tab only: unnamed to the kernel (``strip``), not blank to the SQL form (it trims spaces),
    so the SQL form neither bars the item nor vouches for it: the exact rails run on it and refuse it, and nothing is
    leased. The next item is certainly allowed: leased without them."""
    odd = queue.unknown("a claimant named by a tab")
    tab = Actor.objects.create(name="\t", kind="agent")
    Claim.objects.create(task=odd.task, cycle=odd.cycle, actor=tab, boundary="ctr-1")
    plain = queue.unknown("plain")
    actor_for_user(reviewer)  # its actor exists (a first claim's verifier is unknown to the SQL form: never sure)
    runs = _count_rails(monkeypatch)
    assert review_claim_next(user=reviewer) == plain
    assert runs == [odd.task_id]
    assert _never_leased(odd)


def test_the_exact_rails_allow_what_the_sql_form_cannot_vouch_for(
    queue: Queue, reviewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewer holds a token whose boundary has spaces around it (not plain: the SQL form compares only plain
    boundaries). Nobody on the item shares it, so the exact rails, which run because the SQL form cannot vouch, allow
    it: leased, one run of the rails."""
    item = queue.unknown("plain")
    ApiToken.objects.create(
        actor=actor_for_user(reviewer), boundary=" own laptop ", token_hash=secrets.token_hex(32), prefix="t"
    )
    runs = _count_rails(monkeypatch)
    assert review_claim_next(user=reviewer) == item
    assert runs == [item.task_id]
    assert ReviewLease.objects.get(verification=item).holder == reviewer
    assert _claims_logged(item) == 1

"""Workers of a cycle (SPEC §1): the ONE place that says who worked on a task's cycle.

The workers of a cycle are every actor that claimed the task in that cycle and every actor that submitted a
verification of it in that cycle (the producer of the work, whether or not it claimed). With them come each worker's
execution boundaries (those named by its tokens), the links anchoring the work with their committing actors
(superseded links included: a rebase does not erase an author) and the cycle's contract with its acceptor.

Every rule about who did the work reads this selector and nothing else: the rails of an automated run
(``services.facts``), the rails of a human decision (``services.reviews``), the contract rules
(``services.tasks.contract_accept``: a worker never accepts its own contract) and the claim rule
(``services.tasks.claim_record``: the acceptor never becomes a worker). The kernel gets the plain records
(``workers``, ``links``, ``claims``, ``acceptor_id``); the Django rows are kept for the callers that need them.

``rails_certainly_refuse`` is the same definition as SQL, for a query that must pass over many items at once (the
reviewer's "Next item", issue 15): built from the same row sources, and compared with the rails over ``cycle_workers``
by a property test (tests/reviews/test_claim_filter.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Trim
from django.db.models.lookups import Exact

from verification.actors.models import Actor, ApiToken
from verification.actors.services.actors import PORTAL_ACTOR_NAME, PORTAL_BOUNDARY, boundaries_for, kernel_actor
from verification.kernel import actors as kactors
from verification.kernel.contracts import Claim as KernelClaim
from verification.kernel.rails import Link as KernelLink
from verification.runs.models import Claim, ContractAcceptance, Link, Task, TaskCycle, Verification
from verification.runs.selectors import contract_of


def _claims_of(task: Any, cycle: Any) -> QuerySet[Claim]:
    """The claims that make their actors claimants of ``task``'s ``cycle`` (values or outer references)."""
    return Claim.objects.filter(task=task, cycle=cycle)


def _submissions_of(task: Any, cycle: Any) -> QuerySet[Verification]:
    """The verifications that make their submitters workers of ``task``'s ``cycle`` (values or outer references)."""
    return Verification.objects.filter(task=task, cycle=cycle, submitted_by__isnull=False)


def _links_of(task: Any) -> QuerySet[Link]:
    """The links anchoring ``task``'s work, in every cycle, superseded ones included (rail 2)."""
    return Link.objects.filter(task=task)


@dataclass(frozen=True)
class CycleWorkers:
    """Who worked on ``task``'s ``cycle``, as domain records (no view models)."""

    task: Task
    cycle: int
    #: Every claim of the task, all cycles, as kernel records (the kernel keeps those of the cycle it asks about).
    claims: tuple[KernelClaim, ...]
    #: The actors that claimed the task in this cycle, first claim first.
    claimants: tuple[Actor, ...]
    #: The actors that submitted a verification of this cycle without claiming it, first submission first.
    submitters: tuple[Actor, ...]
    #: Claimants then submitters as the kernel's actor records, each with the boundaries of its tokens.
    workers: tuple[kactors.Actor, ...]
    #: Every link anchoring the task's work, superseded ones included, oldest first.
    links: tuple[KernelLink, ...]

    @cached_property
    def contract(self) -> ContractAcceptance | None:
        """The cycle's contract (one per cycle), or None while none is accepted; read on first use (the rails of a
        decision never need it)."""
        return contract_of(self.task, self.cycle)

    @property
    def actors(self) -> tuple[Actor, ...]:
        """The workers as stored actors (claimants, then submitters that did not claim)."""
        return (*self.claimants, *self.submitters)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(a.name for a in self.actors)

    @property
    def acceptor(self) -> Actor | None:
        """The actor that accepted the cycle's contract, or None."""
        return self.contract.accepted_by if self.contract is not None else None

    @property
    def acceptor_id(self) -> str | None:
        acceptor = self.acceptor
        return acceptor.name if acceptor is not None else None

    def is_worker(self, actor: Actor) -> bool:
        return any(a.pk == actor.pk for a in self.actors)

    def producer_of(self, submitter: Actor | None) -> Actor | None:
        """The producer of a verification (rails 3–5): its submitter when it claimed the task in this cycle or nobody
        did; otherwise the cycle's first claimant."""
        if submitter is None:
            return self.claimants[0] if self.claimants else None
        if not self.claimants or any(a.pk == submitter.pk for a in self.claimants):
            return submitter
        return self.claimants[0]


def cycle_workers(task: Task, cycle: int) -> CycleWorkers:
    """The workers of ``task``'s ``cycle`` with their boundaries, the link committers and the contract (SPEC §1)."""
    claimants: dict[int, Actor] = {}
    # Every claim of the task in one query: this cycle's claimants and the kernel's records of all cycles.
    all_claims = list(Claim.objects.filter(task=task).select_related("actor").order_by("claimed_at", "id"))
    for claim in all_claims:
        if claim.cycle == cycle:  # _claims_of(task, cycle), read from the one query
            claimants.setdefault(claim.actor.pk, claim.actor)
    submitters: dict[int, Actor] = {}
    rows = _submissions_of(task, cycle).select_related("submitted_by").order_by("submitted_at", "id")
    for verification in rows:
        submitter = verification.submitted_by
        if submitter is not None and submitter.pk not in claimants:
            submitters.setdefault(submitter.pk, submitter)
    actors = (*claimants.values(), *submitters.values())
    links = tuple(
        KernelLink(row.commit_id, row.committing_actor.name if row.committing_actor else None, row.superseded)
        for row in _links_of(task).select_related("committing_actor").order_by("created_at", "id")
    )
    boundaries = boundaries_for(actors)
    return CycleWorkers(
        task=task,
        cycle=cycle,
        claims=tuple(KernelClaim(row.actor.name, row.cycle, row.claimed_at) for row in all_claims),
        claimants=tuple(claimants.values()),
        submitters=tuple(submitters.values()),
        workers=tuple(kernel_actor(a, boundaries[a.pk]) for a in actors),
        links=links,
    )


# --- the same rules as SQL, for choosing among many items at once ----------------------------------------------------


def _blank(column: str) -> Q:
    """``column`` holds only spaces (names and boundaries are never empty; the kernel's ``strip`` also drops other
    whitespace, such rare values are left to the exact check)."""
    return Q(Exact(Trim(column), Value("")))


def _unnamed(actor: str | None = None) -> Q:
    """The actor (this row, or the one in foreign key ``actor``) has no stable name: none at all, or a blank one."""
    if actor is None:
        return _blank("name")
    return Q(**{f"{actor}__isnull": True}) | _blank(f"{actor}__name")


def rails_certainly_refuse(verifier: Any) -> Q:
    """A condition on ``Verification`` rows: the decision rails (``services.reviews._rail_refusal``, i.e.
    ``check_approval_cycle`` and ``check_verifier`` over ``cycle_workers``) certainly refuse the actor whose pk is
    ``verifier`` on that verification. Built from the same row sources as ``cycle_workers`` (``_claims_of``,
    ``_submissions_of``, ``_links_of``, the tokens' boundaries and the portal's own), so that one query can pass over
    every item an actor may not decide instead of running the rails item by item (tests/reviews/test_claim_filter.py
    compares the two over generated cases).

    It only ever answers for a refusal, never "may decide": the caller still runs the rails on the item it picks.
    Each condition is a refusal of the rails:

    - no subject (no task or no cycle), or the approval's cycle is older than the task's latest (``stale-cycle``);
    - the verifier is unnamed, or a worker of the cycle or a link's committer is unnamed (``unnamed-actor``);
    - the verifier is a worker of the cycle (``worker-self-verification``) or committed a link of the task,
      superseded or not (``verifier-authored-work``);
    - the verifier shares a boundary with a worker (``shared-execution-boundary``): a token's, or the portal's.

    One ``EXISTS`` per source (each planned subquery costs the claim query planning time on every call).
    """
    task, cycle = OuterRef("task"), OuterRef("cycle")
    # The verifier's own facts do not depend on the row: the database answers them once per query.
    verifier_boundaries = ApiToken.objects.filter(actor=verifier).exclude(_blank("boundary")).values("boundary")
    verifier_is_portal = Exists(Actor.objects.filter(pk=verifier, name=PORTAL_ACTOR_NAME))
    verifier_in_portal = verifier_is_portal | Exists(ApiToken.objects.filter(actor=verifier, boundary=PORTAL_BOUNDARY))

    def bars(actor: str) -> Q:
        """The worker at ``actor`` makes the rails refuse: it is the verifier, unnamed, or shares a boundary."""
        return (
            Q(**{actor: verifier})
            | _unnamed(actor)
            | Q(**{f"{actor}__tokens__boundary__in": verifier_boundaries})
            | (Q(**{f"{actor}__name": PORTAL_ACTOR_NAME}) & Q(verifier_in_portal))
            | (Q(**{f"{actor}__tokens__boundary": PORTAL_BOUNDARY}) & Q(verifier_is_portal))
        )

    return (
        Q(task__isnull=True)
        | Q(cycle__isnull=True)
        | Exists(TaskCycle.objects.filter(task=task, number__gt=cycle))
        | Exists(Actor.objects.filter(Q(pk=verifier) & _unnamed()))
        | Exists(_claims_of(task, cycle).filter(bars("actor")))
        | Exists(_submissions_of(task, cycle).filter(bars("submitted_by")))
        | Exists(_links_of(task).filter(Q(committing_actor=verifier) | _unnamed("committing_actor")))
    )


__all__ = ["CycleWorkers", "cycle_workers", "rails_certainly_refuse"]

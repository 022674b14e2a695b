"""Workers of a cycle (SPEC §1): the ONE place that says who worked on a task's cycle.

The workers of a cycle are every actor that claimed the task in that cycle and every actor that submitted a
verification of it in that cycle (the producer of the work, whether or not it claimed). With them come each worker's
execution boundaries (those named by its tokens), the links anchoring the work with their committing actors
(superseded links included: a rebase does not erase an author) and the cycle's contract with its acceptor.

Every rule about who did the work reads this selector and nothing else: the rails of an automated run
(``services.verifications``), the rails of a human decision (``services.reviews``), the contract rules
(``services.tasks.contract_accept``: a worker never accepts its own contract) and the claim rule
(``services.tasks.claim_record``: the acceptor never becomes a worker). The kernel gets the plain records
(``workers``, ``links``, ``claims``, ``acceptor_id``); the Django rows are kept for the callers that need them.
"""

from __future__ import annotations

from dataclasses import dataclass

from verification.kernel import actors as kactors
from verification.kernel.contracts import Claim as KernelClaim
from verification.kernel.rails import Link as KernelLink
from verification.models import Actor, Claim, ContractAcceptance, Link, Task, Verification
from verification.selectors import contract_of
from verification.services.actors import boundaries_for, kernel_actor


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
    #: The cycle's contract (one per cycle), or None while none is accepted.
    contract: ContractAcceptance | None

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
        if claim.cycle == cycle:
            claimants.setdefault(claim.actor.pk, claim.actor)
    submitters: dict[int, Actor] = {}
    rows = (
        Verification.objects.filter(task=task, cycle=cycle, submitted_by__isnull=False)
        .select_related("submitted_by")
        .order_by("submitted_at", "id")
    )
    for verification in rows:
        submitter = verification.submitted_by
        if submitter is not None and submitter.pk not in claimants:
            submitters.setdefault(submitter.pk, submitter)
    actors = (*claimants.values(), *submitters.values())
    links = tuple(
        KernelLink(row.commit_id, row.committing_actor.name if row.committing_actor else None, row.superseded)
        for row in Link.objects.filter(task=task).select_related("committing_actor").order_by("created_at", "id")
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
        contract=contract_of(task, cycle),
    )


__all__ = ["CycleWorkers", "cycle_workers"]

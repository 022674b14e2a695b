"""The six anti-gaming rails as pure functions over typed records (SPEC §9).

Each refusal carries its reason code, for automated verifiers and human reviewers alike: for an automated run it
makes the affected check UNKNOWN with the code (and the run is flagged and routed to review, SPEC §3); for a human
decision it is an error shown to the reviewer and no receipt is issued.

Where each rail lives:
1–3. here: ``check_verifier`` (no self-verification, no verifying code you wrote, no shared execution boundary),
     ``check_approval_cycle`` (stale approvals), ``check_contract_acceptor`` (the acceptor of a cycle's contract is
     never one of its workers) and ``contracts.accept_contract`` / ``contracts.may_claim`` (a worker cannot accept
     the contract for its own attempt; the acceptor cannot claim).

"Workers" are every actor that claimed the task in the cycle and every actor that submitted a verification of it in
the cycle (SPEC §1): the Django layer computes them in one selector (``verification.runs.cycle_workers``) and hands them
here as ``workers``.
4.   the refusal ``check_change_manifest`` here; the observation rule itself is ``criteria.manifest_check``.
5.   ``criteria.is_authoritative`` / ``criteria.evaluate_unchanged`` (authoritative baselines, captured before the
     cycle's first claim, under the capture step's HMAC token ``criteria.mint_baseline_token``).
6.   ``criteria.register_rubric`` (registration refuses an obligation that cannot fail, by witness).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NoReturn

from verification.kernel.actors import Actor, ActorKind, distinct, normalize_actor_id
from verification.kernel.contracts import Claim, claimants, validate_cycle
from verification.kernel.criteria import manifest_check
from verification.kernel.errors import DecisionRefused, InvariantError
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Check, Verdict

# The codes each rail may refuse with (SPEC §9); a RailRefusal outside this table cannot be built.
RAIL_REASONS: Final[dict[int, frozenset[Reason]]] = {
    1: frozenset({Reason.UNNAMED_ACTOR, Reason.WORKER_SELF_VERIFICATION, Reason.STALE_CYCLE}),
    2: frozenset({Reason.VERIFIER_AUTHORED_WORK, Reason.UNNAMED_ACTOR}),
    3: frozenset(
        {
            Reason.WORKER_SELF_VERIFICATION,
            Reason.SHARED_EXECUTION_BOUNDARY,
            Reason.SELF_CONTRACT_ACCEPTANCE,
            Reason.UNNAMED_ACTOR,
        }
    ),
    4: frozenset({Reason.CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED}),
    5: frozenset(
        {
            Reason.MISSING_BASELINE,
            Reason.INVALID_BASELINE_TOKEN,
            Reason.BASELINE_NOT_INDEPENDENT,
            Reason.BASELINE_AFTER_FIRST_CLAIM,
            Reason.UNNAMED_ACTOR,
        }
    ),
    6: frozenset(
        {
            Reason.OBLIGATION_NOT_FALSIFIABLE,
            Reason.VACUOUS_PREDICATE,
            Reason.UNDECIDABLE_KIND,
            Reason.UNSUPPORTED_OBSERVABLE,
            Reason.MALFORMED_EXPRESSION,
            Reason.EVIDENCE_PRESENT_DECLINED,
        }
    ),
}


@dataclass(frozen=True)
class RailRefusal:
    """A rail refused: which rail (1–6), its reason code, and the specific detail."""

    rail: int
    reason: Reason
    detail: str = ""

    def __post_init__(self) -> None:
        allowed = RAIL_REASONS.get(self.rail) if isinstance(self.rail, int) else None
        if allowed is None or self.reason not in allowed:
            raise InvariantError(Reason.MALFORMED_RECORD, f"rail {self.rail!r} does not refuse with {self.reason!r}")


@dataclass(frozen=True)
class Link:
    """A commit anchoring the work, with its committing actor, as reported by a collector (SPEC §1).

    ``committing_actor`` None means the committer could not be tied to an authenticated actor (unnamed).
    Superseded links (e.g. rewritten by a rebase) keep counting for rail 2.
    """

    commit_id: str
    committing_actor: str | None
    superseded: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.commit_id, str) or not self.commit_id:
            raise InvariantError(Reason.MALFORMED_RECORD, "commit_id must be a non-empty string")
        object.__setattr__(self, "committing_actor", normalize_actor_id(self.committing_actor))
        if not isinstance(self.superseded, bool):
            raise InvariantError(Reason.MALFORMED_RECORD, "superseded must be a bool")


def check_verifier(
    *,
    verifier: Actor,
    cycle: int,
    claims: Sequence[Claim],
    links: Sequence[Link],
    workers: Sequence[Actor],
) -> RailRefusal | None:
    """Rails 1–3 for whoever performs a verification of ``cycle`` (SPEC §9). None when it may verify.

    ``claims`` are the task's claims (other cycles are ignored), ``links`` every link anchoring the work
    (superseded included), ``workers`` the actor records of the cycle's workers — its claimants and its submitters
    (SPEC §1) — with their boundaries.
    Checked in this order, the first refusal wins:

    1. the verifier is unnamed → ``unnamed-actor``;
    2. the verifier claimed the task in this cycle → ``worker-self-verification``;
    3. a claimant of this cycle is unnamed: the verifier cannot be proven distinct from it → ``unnamed-actor``;
    4. (rail 2) the verifier committed a link, superseded or not → ``verifier-authored-work``; a link whose
       committer is unnamed cannot be proven not to be the verifier's → ``unnamed-actor``;
    5. (rail 3) a worker record is unnamed → ``unnamed-actor``; the verifier is one of ``workers`` →
       ``worker-self-verification``;
    6. (rail 3) a named claimant of this cycle has no worker record, so its boundaries are unknown, or the verifier
       shares a boundary with a worker → ``shared-execution-boundary``. Every recorded boundary counts as mutable;
       an actor with no boundary (a person in the browser) shares none.

    Passing all of them is rail 1's positive condition: a named actor who never claimed the task in the current
    cycle performs the verification.
    """
    validate_cycle(cycle)
    who = claimants(cycle=cycle, claims=claims)
    # Rail 1: no self-verification, and an unnamed actor never counts as distinct (SPEC §1, §9).
    if not verifier.named:
        return RailRefusal(1, Reason.UNNAMED_ACTOR, "the verifier has no authenticated identity")
    if verifier.actor_id in who:
        return RailRefusal(1, Reason.WORKER_SELF_VERIFICATION, f"{verifier.actor_id} claimed the task in cycle {cycle}")
    if None in who:
        return RailRefusal(1, Reason.UNNAMED_ACTOR, f"an unnamed actor claimed the task in cycle {cycle}")
    # Rail 2: no verifying code you wrote; a rebase does not erase the original author.
    for link in links:
        if link.committing_actor is None:
            return RailRefusal(2, Reason.UNNAMED_ACTOR, f"the committer of {link.commit_id} is unnamed")
        if link.committing_actor == verifier.actor_id:
            what = f"superseded link {link.commit_id}" if link.superseded else f"link {link.commit_id}"
            return RailRefusal(2, Reason.VERIFIER_AUTHORED_WORK, f"{verifier.actor_id} committed {what}")
    # Rail 3: same actor, then same mutable execution boundary.
    for worker in workers:
        if not worker.named:
            return RailRefusal(3, Reason.UNNAMED_ACTOR, "a worker on the task has no authenticated identity")
        if worker.actor_id == verifier.actor_id:
            return RailRefusal(3, Reason.WORKER_SELF_VERIFICATION, f"{verifier.actor_id} is a worker on the task")
    known = {w.actor_id for w in workers}
    for actor_id in sorted(a for a in who if a is not None):
        if actor_id not in known:
            return RailRefusal(
                3, Reason.SHARED_EXECUTION_BOUNDARY, f"the boundaries of claimant {actor_id} are not known"
            )
    for worker in workers:
        shared = verifier.boundaries & worker.boundaries
        if shared:
            return RailRefusal(
                3,
                Reason.SHARED_EXECUTION_BOUNDARY,
                f"{verifier.actor_id} and worker {worker.actor_id} share {', '.join(sorted(shared))}",
            )
    return None


@dataclass(frozen=True)
class ChangeManifest:
    """A change manifest bound as evidence, with who reported it and who produced the change (SPEC §1, §5).

    ``reported_by`` is the actor whose token reported the manifest (from authentication, never the body);
    ``producer`` the actor who produced the change. ``producer_declared`` marks a manifest that arrived as part of
    the producer's own account (e.g. inside its submission); it can only make the manifest count less.
    """

    evidence_id: str
    reported_by: Actor
    producer: Actor
    producer_declared: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.evidence_id, str) or not self.evidence_id:
            raise InvariantError(Reason.MALFORMED_RECORD, "evidence_id must be a non-empty string")
        if not isinstance(self.reported_by, Actor) or not isinstance(self.producer, Actor):
            raise InvariantError(Reason.MALFORMED_RECORD, "reported_by and producer must be actors")
        if not isinstance(self.producer_declared, bool):
            raise InvariantError(Reason.MALFORMED_RECORD, "producer_declared must be a bool")


def check_change_manifest(*, criterion_id: str, manifest: ChangeManifest) -> RailRefusal | None:
    """Rail 4: a producer's account of what changed is not evidence (SPEC §9; rule in ``criteria.manifest_check``).

    The facts are computed from the actor records, failing closed: an unnamed reporter or producer cannot be shown
    not to be the producer; a side with no recorded boundary cannot be shown not to share one.
    """
    reporter, producer = manifest.reported_by, manifest.producer
    separate = (
        bool(reporter.boundaries) and bool(producer.boundaries) and reporter.boundaries.isdisjoint(producer.boundaries)
    )
    reason = manifest_check(
        criterion_id,
        reported_by_collector=reporter.kind is ActorKind.COLLECTOR and not manifest.producer_declared,
        reporter_is_producer=not distinct(reporter.actor_id, producer.actor_id),
        shares_boundary_with_producer=not separate,
    )
    if reason is None:
        return None
    who = reporter.actor_id or "an unnamed actor"
    return RailRefusal(4, reason, f"manifest {manifest.evidence_id} reported by {who} ({reporter.kind})")


def check_contract_acceptor(
    *, acceptor: str | None, cycle: int, claims: Sequence[Claim], workers: Sequence[Actor]
) -> RailRefusal | None:
    """The acceptor of ``cycle``'s contract must never be a worker of it (SPEC §1, §9 rail 3). None when it is not.

    ``acceptor`` is the actor id that accepted the cycle's contract (None: no contract, nothing to check). When it
    claimed the task in this cycle or is one of ``workers`` (it submitted work), the work would be judged by a
    contract its own worker picked: ``self-contract-acceptance``, and for an automated run every check answers
    UNKNOWN with it (flagged, routed to review).
    """
    validate_cycle(cycle)
    if acceptor is None:
        return None
    who = set(claimants(cycle=cycle, claims=claims)) | {w.actor_id for w in workers}
    if acceptor in who:
        return RailRefusal(
            3, Reason.SELF_CONTRACT_ACCEPTANCE, f"{acceptor} accepted the contract of cycle {cycle} and works on it"
        )
    return None


def check_approval_cycle(*, approval_cycle: int, current_cycle: int) -> Reason | None:
    """An approval counts only in the cycle it was given: after a reopen it is ``stale-cycle`` (SPEC §9 rail 1)."""
    validate_cycle(approval_cycle)
    validate_cycle(current_cycle)
    return None if approval_cycle == current_cycle else Reason.STALE_CYCLE


def rail_check_for_run(*, criterion_id: str, refusal: RailRefusal, authority: Authority) -> Check:
    """For an automated run, a refusal makes the affected check UNKNOWN with the rail's code (SPEC §9).

    The caller flags the run and routes it to review (SPEC §3: every rail refusal is flagged).
    """
    return Check(
        criterion=criterion_id,
        authority=authority,
        verdict=Verdict.UNKNOWN,
        reason=refusal.reason,
        detail=f"rail {refusal.rail}: {refusal.detail}" if refusal.detail else f"rail {refusal.rail}",
    )


def raise_for_decision(refusal: RailRefusal | None) -> None:
    """For a human decision, a refusal is an error shown to the reviewer; no receipt is issued (SPEC §9)."""
    if refusal is not None:
        _refuse(refusal)


def _refuse(refusal: RailRefusal) -> NoReturn:
    raise DecisionRefused(refusal.reason, f"rail {refusal.rail}: {refusal.detail}", details={"rail": refusal.rail})

"""Tasks, cycles, claims and contracts (SPEC §1).

The subject of a verification is a task and its current cycle. Each cycle has one contract: a registered rubric
accepted for that cycle by an actor who is not a worker of it (claimants and submitters alike), and never changed
once accepted. The acceptor can never become a worker of that cycle (SPEC §1). Reopening a task starts a new
cycle, which needs its own contract; nothing accepted for an earlier cycle counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from verification.kernel.actors import Actor, normalize_actor_id
from verification.kernel.errors import InvariantError
from verification.kernel.reasons import Reason

# A rubric hash is the sha256 of the rubric's canonical JSON: ``sha256:<hex>`` or bare lowercase hex.
_RUBRIC_HASH_RE: Final = re.compile(r"\A(sha256:)?[0-9a-f]{64}\Z")


def validate_cycle(cycle: object) -> int:
    """A cycle number: a non-negative int (not a bool)."""
    if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < 0:
        raise InvariantError(Reason.MALFORMED_RECORD, f"cycle must be a non-negative integer, got {cycle!r}")
    return cycle


def _aware(value: object, name: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvariantError(Reason.MALFORMED_RECORD, f"{name} must be a timezone-aware datetime")
    return value


def subject_key(*, task_id: str, cycle: int) -> str:
    """The subject of a verification as one string: task id and cycle (SPEC §1), e.g. ``task-7@2``."""
    if not isinstance(task_id, str) or not task_id:
        raise InvariantError(Reason.MALFORMED_RECORD, "task id must be a non-empty string")
    return f"{task_id}@{validate_cycle(cycle)}"


@dataclass(frozen=True)
class Claim:
    """A task claim in one cycle, reported by the claiming actor's own token (SPEC §1).

    ``actor_id`` None is an unnamed claimant: no verifier or acceptor can be proven distinct from it.
    """

    actor_id: str | None
    cycle: int
    claimed_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "actor_id", normalize_actor_id(self.actor_id))
        validate_cycle(self.cycle)
        _aware(self.claimed_at, "claimed_at")


@dataclass(frozen=True)
class ContractAcceptance:
    """A registered rubric accepted as the contract of one cycle by a named actor."""

    rubric_hash: str
    accepted_by: str
    cycle: int
    accepted_at: datetime

    def __post_init__(self) -> None:
        if not isinstance(self.rubric_hash, str) or _RUBRIC_HASH_RE.match(self.rubric_hash) is None:
            raise InvariantError(Reason.MALFORMED_RECORD, f"rubric_hash {self.rubric_hash!r} is not a sha256 digest")
        if normalize_actor_id(self.accepted_by) is None:
            raise InvariantError(Reason.UNNAMED_ACTOR, "a contract is accepted by a named actor")
        validate_cycle(self.cycle)
        _aware(self.accepted_at, "accepted_at")


def claims_in_cycle(*, cycle: int, claims: Iterable[Claim]) -> tuple[Claim, ...]:
    """The claims made in ``cycle`` only; claims of other cycles never count for it."""
    validate_cycle(cycle)
    return tuple(c for c in claims if c.cycle == cycle)


def claimants(*, cycle: int, claims: Iterable[Claim]) -> frozenset[str | None]:
    """The ids of the actors who claimed the task in ``cycle`` (None marks an unnamed claimant)."""
    return frozenset(c.actor_id for c in claims_in_cycle(cycle=cycle, claims=claims))


def first_claim_at(*, cycle: int, claims: Iterable[Claim]) -> datetime | None:
    """When the work of ``cycle`` started: its earliest claim, or None when nobody claimed it yet.

    A baseline is authoritative only if captured before this instant (SPEC §1, §9 rail 5).
    """
    times = [c.claimed_at for c in claims_in_cycle(cycle=cycle, claims=claims)]
    return min(times) if times else None


def accept_contract(
    *,
    actor: Actor,
    cycle: int,
    claims: Sequence[Claim],
    workers: Sequence[Actor] = (),
    contract: ContractAcceptance | None = None,
) -> Reason | None:
    """May ``actor`` accept the contract of ``cycle``? None if so, else the refusal's code (SPEC §1, §9 rail 3).

    ``workers`` are the cycle's workers (claimants and submitters, from the one selector of the Django layer);
    ``contract`` the cycle's accepted contract, if any. In order: a cycle that has its contract already →
    ``contract-already-accepted`` (a contract never changes; reopen to judge by another rubric); an unnamed acceptor
    → ``unnamed-actor``; an actor who claimed the task in that cycle or is one of ``workers`` →
    ``self-contract-acceptance``; a cycle with an unnamed claimant or worker → ``unnamed-actor`` (the acceptor cannot
    be proven distinct from it). Claims of other cycles do not matter.
    """
    validate_cycle(cycle)
    if contract is not None and contract.cycle == cycle:
        return Reason.CONTRACT_ALREADY_ACCEPTED
    if not actor.named:
        return Reason.UNNAMED_ACTOR
    who = set(claimants(cycle=cycle, claims=claims)) | {w.actor_id for w in workers}
    if actor.actor_id in who:
        return Reason.SELF_CONTRACT_ACCEPTANCE
    if None in who:
        return Reason.UNNAMED_ACTOR
    return None


def may_claim(*, actor: Actor, cycle: int, contract: ContractAcceptance | None) -> Reason | None:
    """May ``actor`` claim the task in ``cycle``? The contract's acceptor never becomes a worker of its cycle (SPEC §1):
    ``self-contract-acceptance``. An unnamed claimant is refused (``unnamed-actor``). None when it may claim."""
    validate_cycle(cycle)
    if not actor.named:
        return Reason.UNNAMED_ACTOR
    if contract is not None and contract.cycle == cycle and contract.accepted_by == actor.actor_id:
        return Reason.SELF_CONTRACT_ACCEPTANCE
    return None


def current_contract(*, cycle: int, acceptances: Iterable[ContractAcceptance]) -> ContractAcceptance | None:
    """The contract of ``cycle``: its latest acceptance, or None (SPEC §1).

    A cycle has at most one acceptance (``accept_contract`` refuses a second one and the database holds one row per
    cycle); should more be handed in, the latest decides. Acceptances of earlier cycles do not count after a reopen.
    Ties on ``accepted_at`` go to the later record in the given order (records are append-only: the later write).
    """
    validate_cycle(cycle)
    latest: ContractAcceptance | None = None
    for acceptance in acceptances:
        if acceptance.cycle == cycle and (latest is None or acceptance.accepted_at >= latest.accepted_at):
            latest = acceptance
    return latest


def contract_gate(contract: ContractAcceptance | None) -> Reason | None:
    """Without an accepted contract every check answers UNKNOWN ``no-accepted-contract`` (SPEC §1)."""
    return Reason.NO_ACCEPTED_CONTRACT if contract is None else None

"""Actors and the authority the server assigns them (SPEC §1).

Nothing a request body says about who did what is trusted: the actor comes from authentication, and the
authority of a check result comes from the actor's kind, never from a field the submitter filled in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from verification.kernel.errors import InvariantError
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority


class ActorKind(StrEnum):
    AGENT = "agent"
    SERVICE = "service"
    COLLECTOR = "collector"
    SEMANTIC_WORKER = "semantic_worker"
    EXTERNAL_VERIFIER = "external_verifier"
    CONTRACT_OWNER = "contract_owner"
    HUMAN = "human"


def normalize_actor_id(actor_id: object) -> str | None:
    """An actor id as the kernel keeps it: a non-blank string, or None for an unnamed actor.

    A blank id is not a stable identity, so it is unnamed (SPEC §1); anything that is not a string is refused.
    """
    if actor_id is None:
        return None
    if not isinstance(actor_id, str):
        raise InvariantError(Reason.MALFORMED_RECORD, f"actor id must be a string, got {type(actor_id).__name__}")
    return actor_id if actor_id.strip() else None


def _boundaries(values: Iterable[object]) -> frozenset[str]:
    if isinstance(values, (str, bytes)):
        raise InvariantError(Reason.MALFORMED_RECORD, "boundaries must be a set of ids, not one string")
    out: set[str] = set()
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise InvariantError(Reason.MALFORMED_RECORD, f"boundary id {value!r} is not a non-blank string")
        out.add(value)
    return frozenset(out)


@dataclass(frozen=True)
class Actor:
    """An authenticated actor (SPEC §1).

    ``actor_id`` None means unnamed: no stable, authenticated identity, and never distinct from anyone.
    ``boundaries`` are the execution boundaries (container or host ids) named by the actor's tokens; every
    recorded boundary is treated as mutable (fail closed). A person using only the browser has none.
    """

    actor_id: str | None
    kind: ActorKind
    boundaries: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "actor_id", normalize_actor_id(self.actor_id))
        try:
            object.__setattr__(self, "kind", ActorKind(self.kind))
        except ValueError:
            raise InvariantError(Reason.MALFORMED_RECORD, f"unknown actor kind {self.kind!r}") from None
        object.__setattr__(self, "boundaries", _boundaries(self.boundaries))

    @property
    def named(self) -> bool:
        return self.actor_id is not None


def distinct(a: str | None, b: str | None) -> bool:
    """True only when both actors are named and their ids differ: an unnamed actor is never distinct (SPEC §1)."""
    a, b = normalize_actor_id(a), normalize_actor_id(b)
    return a is not None and b is not None and a != b


# SPEC §1 "Authority is assigned, never declared": kind -> authority of the check results it may author.
_AUTHORITY_BY_KIND: Final[dict[ActorKind, Authority]] = {
    ActorKind.HUMAN: Authority.HUMAN,
    ActorKind.SEMANTIC_WORKER: Authority.SEMANTIC,
    ActorKind.EXTERNAL_VERIFIER: Authority.IMPORTED,
}


def authority_for(kind: ActorKind, *, portal_computed: bool = False) -> Authority:
    """The authority of a check result authored by an actor of ``kind`` (SPEC §1).

    ``portal_computed`` is set only by the portal's own workers computing over stored bytes (its service actor):
    that is ``deterministic``. A logged-in person is ``human``, a semantic worker's token ``semantic``, an external
    verifier's token ``imported``. Every other kind (agent, collector, contract owner, a service token that is not
    the portal computing) cannot author a check result at all: InvariantError ``actor-cannot-author-result``.
    There is deliberately no parameter for a body-declared authority.
    """
    try:
        kind = ActorKind(kind)
    except ValueError:
        raise InvariantError(Reason.ACTOR_CANNOT_AUTHOR_RESULT, f"unknown actor kind {kind!r}") from None
    if portal_computed:
        if kind is ActorKind.SERVICE:
            return Authority.DETERMINISTIC
        raise InvariantError(Reason.ACTOR_CANNOT_AUTHOR_RESULT, f"only the portal's service computes; not a {kind}")
    authority = _AUTHORITY_BY_KIND.get(kind)
    if authority is None:
        raise InvariantError(Reason.ACTOR_CANNOT_AUTHOR_RESULT, f"an actor of kind {kind} cannot author a check result")
    return authority


DECLARED_AUTHORITY_MAX_CHARS: Final = 200


def record_declared_authority(declared: object) -> str | None:
    """Keep a body-declared authority only as the submitter's claim, as text (SPEC §1); it decides nothing.

    None stays None; anything else is stringified and clipped to ``DECLARED_AUTHORITY_MAX_CHARS`` characters.
    """
    if declared is None:
        return None
    try:
        text = declared if isinstance(declared, str) else repr(declared)
    except (TypeError, ValueError, RecursionError):  # an odd value must not break the record
        text = f"<unprintable {type(declared).__name__}>"
    return text[:DECLARED_AUTHORITY_MAX_CHARS]

"""Actors and API tokens (SPEC §1: every fact about who did what comes from authentication, never from a body).

A token is bound to one actor and to the execution boundary its holder runs in; only its sha256 is stored, the
plaintext (``rpt_`` + 43 URL-safe characters) is returned once by ``token_issue``. Each portal user is one human
actor (``actor_for_user``). The portal's own service actor performs the deterministic checks and never claims a task.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from typing import Any, Final

from django.db import IntegrityError, transaction
from django.utils import timezone

from verification.actors.models import Actor, ActorKind, ApiToken
from verification.compiled import Compiled, Probe, Related
from verification.errors import ServiceError
from verification.kernel import actors as kactors
from verification.kernel.errors import InvariantError
from verification.kernel.reasons import Reason

TOKEN_PREFIX: Final = "rpt_"  # noqa: S105 - a public prefix, not a secret
TOKEN_RE: Final = re.compile(r"rpt_[A-Za-z0-9_-]{43}")
DISPLAY_PREFIX_CHARS: Final = 12

PORTAL_ACTOR_NAME: Final = "portal"  # created by migration 0004 (and lazily, after a test flush)
PORTAL_BOUNDARY: Final = "portal"  # the boundary the portal's own workers run in
USER_ACTOR_PREFIX: Final = "user:"  # human actors of portal users are named user:<username>

SCOPES: Final = frozenset(
    {
        "rubrics:write",
        "tasks:write",
        "claims:write",
        "contracts:write",
        "links:write",
        "manifests:write",
        "baselines:write",
        "evidence:write",
        "verifications:write",
        "verifications:read",
        "results:write",
        "events:read",
    }
)
MAX_NAME_CHARS: Final = 200


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _check_kind(kind: str) -> ActorKind:
    try:
        return ActorKind(kind)
    except ValueError:
        raise ServiceError(
            Reason.INVALID_REQUEST, f"unknown actor kind {kind!r}; one of {', '.join(ActorKind.values)}"
        ) from None


@transaction.atomic
def actor_create(*, name: str, kind: str, user: Any = None) -> Actor:
    """Create a named actor. ``user`` binds a portal user (then ``kind`` must be ``human``).

    Refusals: ``invalid-request`` (blank or overlong name, unknown kind, a user for a non-human, a ``user:`` name
    without its user), ``actor-name-taken`` (409).
    """
    actor_kind = _check_kind(kind)
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS or name != name.strip():
        raise ServiceError(Reason.INVALID_REQUEST, f"an actor name is 1-{MAX_NAME_CHARS} characters, no edge spaces")
    if user is not None and actor_kind is not ActorKind.HUMAN:
        raise ServiceError(Reason.INVALID_REQUEST, "an actor bound to a portal user is a human")
    if user is None and name.startswith(USER_ACTOR_PREFIX):
        raise ServiceError(Reason.INVALID_REQUEST, f"names starting with {USER_ACTOR_PREFIX!r} belong to portal users")
    if name == PORTAL_ACTOR_NAME:
        raise ServiceError(Reason.ACTOR_NAME_TAKEN, f"{PORTAL_ACTOR_NAME!r} is the portal's own actor", status=409)
    if Actor.objects.filter(name=name).exists():
        raise ServiceError(Reason.ACTOR_NAME_TAKEN, f"an actor named {name!r} exists", status=409)
    try:
        with transaction.atomic():
            return Actor.objects.create(name=name, kind=actor_kind.value, user=user)
    except IntegrityError:
        raise ServiceError(Reason.ACTOR_NAME_TAKEN, f"an actor named {name!r} exists", status=409) from None


def actor_for_user(user: Any) -> Actor:
    """The human actor of a portal user, created on first use (SPEC §1: every portal user is one human actor)."""
    existing = Actor.objects.filter(user=user).first()
    if existing is not None:
        return existing
    name = f"{USER_ACTOR_PREFIX}{user.get_username()}"
    try:
        with transaction.atomic():
            actor, _ = Actor.objects.get_or_create(user=user, defaults={"name": name, "kind": ActorKind.HUMAN})
    except IntegrityError:  # a concurrent request created it
        actor = Actor.objects.get(user=user)
    return actor


def portal_service_actor() -> Actor:
    """The portal's own service actor (kind ``service``, boundary ``portal``): the verifier of deterministic checks."""
    actor = Actor.objects.filter(name=PORTAL_ACTOR_NAME).first()
    if actor is None:
        try:
            with transaction.atomic():
                actor = Actor.objects.create(name=PORTAL_ACTOR_NAME, kind=ActorKind.SERVICE)
        except IntegrityError:
            actor = Actor.objects.get(name=PORTAL_ACTOR_NAME)
    if actor.kind != ActorKind.SERVICE:
        raise InvariantError(Reason.MALFORMED_RECORD, f"the actor named {PORTAL_ACTOR_NAME!r} is not a service")
    return actor


@transaction.atomic
def token_issue(
    *, actor: Actor, boundary: str, scopes: list[str], created_by: Any = None
) -> tuple[ApiToken, str]:
    """Issue a token for ``actor`` in ``boundary`` with ``scopes``; returns the row and the plaintext (shown once).

    Refusals: ``invalid-request`` (blank boundary), ``unknown-scope``; ``permission-denied`` for the portal's own
    actor (it authenticates as itself, never with a token).
    """
    if not isinstance(boundary, str) or not boundary.strip() or len(boundary) > MAX_NAME_CHARS:
        raise ServiceError(Reason.INVALID_REQUEST, "a token names the execution boundary its holder runs in")
    if not isinstance(scopes, (list, tuple)) or not all(isinstance(s, str) for s in scopes):
        raise ServiceError(Reason.INVALID_REQUEST, "scopes is a list of strings")
    unknown = sorted(set(scopes) - SCOPES)
    if unknown:
        raise ServiceError(Reason.UNKNOWN_SCOPE, f"unknown scopes {unknown}; known: {sorted(SCOPES)}")
    if actor.name == PORTAL_ACTOR_NAME:
        raise ServiceError(Reason.PERMISSION_DENIED, "the portal's service actor holds no API tokens", status=403)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        actor=actor,
        boundary=boundary.strip(),
        scopes=sorted(set(scopes)),
        token_hash=_hash(raw),
        prefix=raw[:DISPLAY_PREFIX_CHARS],
        created_by=created_by,
    )
    return token, raw


#: A token with its actor and the actor's user (``select_related``'s), from one row.
_TOKEN_ROW: Final = Related(ApiToken, ("actor", "actor__user"))

#: The token lookup every API request makes, compiled once and sent prepared (``verification.compiled``): compiling
#: it through the ORM cost more than running it (issue 15).
_TOKEN_BY_HASH: Final = Compiled(
    "token-by-hash",
    ApiToken,
    lambda token_hash: ApiToken.objects.filter(token_hash=token_hash).order_by().values_list(*_TOKEN_ROW.columns()),
    {"token_hash": Probe("0" * 64, "1" * 64)},
    prepared=True,
)


def token_authenticate(raw: str) -> ApiToken | None:
    """The active token whose plaintext is ``raw``, or None (unknown, malformed, revoked, or its user inactive).

    The lookup is by the sha256 of the plaintext (an equality on a unique index), so no comparison leaks a prefix.
    """
    if not isinstance(raw, str) or TOKEN_RE.fullmatch(raw) is None:
        return None
    rows = _TOKEN_BY_HASH.rows(token_hash=_hash(raw))  # a unique index: at most one
    token = _TOKEN_ROW.first(rows)
    if token is None or token.revoked_at is not None:
        return None
    user = token.actor.user
    if user is not None and not user.is_active:
        return None
    return token


@transaction.atomic
def token_revoke(*, token: ApiToken, by: Any = None) -> ApiToken:
    """Revoke a token for good (idempotent: a revoked token keeps its first revocation)."""
    locked = ApiToken.objects.select_for_update().get(pk=token.pk)
    if locked.revoked_at is None:
        locked.revoked_at = timezone.now()
        locked.revoked_by = by
        locked.save(update_fields=["revoked_at", "revoked_by"])
    return locked


def require_token_of(actor: Actor, token: ApiToken | None) -> str:
    """The boundary of ``token``, after checking it belongs to ``actor`` ("" for a person in the browser)."""
    if token is None:
        return ""
    if token.actor_id != actor.pk:
        raise ServiceError(Reason.PERMISSION_DENIED, "the token does not belong to this actor", status=403)
    if token.revoked_at is not None:
        raise ServiceError(Reason.NOT_AUTHENTICATED, "the token was revoked", status=401)
    return token.boundary


def boundaries_of(actor: Actor) -> frozenset[str]:
    """An actor's execution boundaries: those named by its tokens, revoked ones included (fail closed, SPEC §1).

    The portal's service actor runs in ``portal``.
    """
    found = set(ApiToken.objects.filter(actor=actor).values_list("boundary", flat=True))
    if actor.name == PORTAL_ACTOR_NAME:
        found.add(PORTAL_BOUNDARY)
    return frozenset(b for b in found if b.strip())


def boundaries_for(actors: Iterable[Actor]) -> dict[int, frozenset[str]]:
    """``boundaries_of`` for many actors in one query (the run path reads every worker's boundaries at once)."""
    listed = {a.pk: a for a in actors}
    tokens = ApiToken.objects.filter(actor_id__in=listed).values_list("actor_id", "boundary") if listed else ()
    return boundaries_from(listed.values(), tokens)


def boundaries_from(actors: Iterable[Actor], tokens: Iterable[tuple[int, str]]) -> dict[int, frozenset[str]]:
    """``boundaries_for`` from token rows (actor pk, boundary) the caller read already (``cycle_workers`` reads them
    in its one query); rows of other actors are ignored."""
    listed = {a.pk: a for a in actors}
    found: dict[int, set[str]] = {pk: set() for pk in listed}
    for actor_id, boundary in tokens:
        if actor_id in found:
            found[actor_id].add(boundary)
    for pk, actor in listed.items():
        if actor.name == PORTAL_ACTOR_NAME:
            found[pk].add(PORTAL_BOUNDARY)
    return {pk: frozenset(b for b in names if b.strip()) for pk, names in found.items()}


def kernel_actor(actor: Actor | None, boundaries: frozenset[str] | None = None) -> kactors.Actor:
    """The kernel's view of a stored actor (its name is its stable id; unnamed when there is none)."""
    if actor is None:
        return kactors.Actor(None, kactors.ActorKind.AGENT)
    return kactors.Actor(
        actor.name, kactors.ActorKind(actor.kind), boundaries if boundaries is not None else boundaries_of(actor)
    )

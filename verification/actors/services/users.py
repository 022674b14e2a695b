"""Users, roles, machine actors and API tokens, as an admin manages them (issue 7 §3).

Every function checks that the acting user may administer users (``reviewportal.administer_users``; the admin pages
check it too, STYLE §10), does one thing in one transaction, and puts it on the security log. Roles are the groups
of
``verification.actors.roles`` (migration ``reviewportal/0001_roles``). Deactivating a user takes effect at once: their
review leases are released (through the review service's release), their API tokens revoked, and their sessions
deleted (so reactivating them later does not revive an old cookie).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from verification.actors.models import Actor, ActorKind, ApiToken
from verification.actors.services.actors import actor_create, actor_for_user, token_issue, token_revoke
from verification.errors import PermissionRefused, ServiceError
from verification.kernel.reasons import Reason
from verification.reviews.models import ReviewLease
from verification.trust.models import SecurityEventKind
from verification.trust.services.security_log import require_permission, security_log_record

ADMINISTER_USERS: Final = "reviewportal.administer_users"
#: ``verification.actors.roles.ROLES`` and ``ADMIN`` (the verification app does not import the portal), highest first.
ROLES: Final = ("admin", "manager", "reviewer")
ADMIN: Final = "admin"
END_DEACTIVATED: Final = "user-deactivated"
MAX_REASON: Final = 2000


def _require_admin(by: Any, what: str) -> None:
    require_permission(by, ADMINISTER_USERS, what)


def _roles(roles: Sequence[str]) -> list[str]:
    chosen = list(dict.fromkeys(str(r) for r in roles))
    unknown = sorted(set(chosen) - set(ROLES))
    if unknown:
        raise ServiceError(Reason.INVALID_REQUEST, f"unknown roles {unknown}; the roles are {', '.join(ROLES)}")
    return [r for r in ROLES if r in chosen]


def roles_of(user: Any) -> list[str]:
    """The role groups ``user`` is in, highest first."""
    names = set(user.groups.values_list("name", flat=True))
    return [r for r in ROLES if r in names]


def _set_groups(user: Any, roles: list[str]) -> None:
    role_groups = list(Group.objects.filter(name__in=ROLES))
    user.groups.remove(*[g for g in role_groups if g.name not in roles])
    user.groups.add(*[g for g in role_groups if g.name in roles])


def _reason(reason: str) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ServiceError(Reason.INVALID_REQUEST, "say why (a reason goes on the security log)")
    if len(reason) > MAX_REASON:
        raise ServiceError(Reason.INVALID_REQUEST, f"a reason is at most {MAX_REASON} characters")
    return reason.strip()


def user_problems(candidate: Any, password: str) -> dict[str, list[str]]:
    """Every problem Django's validators find with a new user's fields and initial password, per field (the web form
    shows each beside its field, all at once; ``user_create`` refuses with them joined)."""
    problems: dict[str, list[str]] = {}
    try:
        candidate.full_clean(exclude=["password"], validate_unique=False)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            problems.setdefault(name, []).extend(messages)
    try:
        validate_password(password, user=candidate)
    except ValidationError as exc:
        problems.setdefault("password", []).extend(exc.messages)
    return problems


@transaction.atomic
def user_create(*, by: Any, username: str, password: str, roles: Sequence[str], email: str = "") -> Any:
    """Create a portal user with an initial password (Django's validators) and roles; their human actor with it.

    Refusals: ``invalid-request`` (a username or password the validators refuse, an unknown role), ``actor-name-taken``
    (409) for a username in use; ``permission-denied`` for a non-admin.
    """
    _require_admin(by, "create users")
    model = get_user_model()
    chosen = _roles(roles)
    candidate = model(username=(username or "").strip(), email=(email or "").strip())
    problems = user_problems(candidate, password)
    if problems:
        raise ServiceError(Reason.INVALID_REQUEST, " ".join(m for ms in problems.values() for m in ms))
    if model.objects.filter(username=candidate.username).exists():
        raise ServiceError(Reason.ACTOR_NAME_TAKEN, f"a user named {candidate.username!r} exists", status=409)
    try:
        with transaction.atomic():
            user = model.objects.create_user(username=candidate.username, email=candidate.email, password=password)
    except IntegrityError:
        raise ServiceError(Reason.ACTOR_NAME_TAKEN, f"a user named {candidate.username!r} exists", status=409) from None
    _set_groups(user, chosen)
    actor = actor_for_user(user)
    security_log_record(
        kind=SecurityEventKind.USER_CREATE, user=by, target=user.get_username(),
        detail={"user": user.pk, "roles": chosen, "actor": actor.name},
    )
    return user


@transaction.atomic
def user_set_roles(*, by: Any, user: Any, roles: Sequence[str]) -> list[str]:
    """Set a user's roles (other groups are left alone); the roles now held.

    An admin cannot take their own admin role away (someone else must): ``permission-denied``.
    """
    _require_admin(by, "set roles")
    chosen = _roles(roles)
    before = roles_of(user)
    if user.pk == by.pk and ADMIN in before and ADMIN not in chosen:
        raise PermissionRefused("you cannot remove your own admin role; another admin must")
    _set_groups(user, chosen)
    security_log_record(
        kind=SecurityEventKind.USER_ROLES, user=by, target=user.get_username(),
        detail={"user": user.pk, "before": before, "after": chosen},
    )
    return chosen


@dataclass(frozen=True)
class Deactivation:
    """What deactivating a user ended at once."""

    leases_released: int
    tokens_revoked: int
    sessions_ended: int = 0


def _end_sessions(user: Any) -> int:
    """Delete every stored session signed in as ``user`` (issue 11 item 7): an inactive user's cookie must not come
    back to life when an admin reactivates them. Only the live sessions are read (idle ones expire in
    ``SESSION_IDLE_SECONDS``), each decoded to find its user; the session engine must keep them in the database."""
    from importlib import import_module

    from django.conf import settings

    engine = import_module(settings.SESSION_ENGINE)
    store = engine.SessionStore
    if not hasattr(store, "get_model_class"):
        raise ServiceError(Reason.INVALID_REQUEST, f"sessions in {settings.SESSION_ENGINE} cannot be listed per user")
    model = store.get_model_class()
    wanted = str(user.pk)
    ended = 0
    live = model.objects.filter(expire_date__gt=timezone.now()).only("session_key", "session_data")
    for row in live.iterator():
        if str(row.get_decoded().get("_auth_user_id", "")) == wanted:
            store(session_key=row.session_key).delete()  # the row, and the cached copy for a cached engine
            ended += 1
    return ended


def _release_leases(user: Any) -> int:
    """Release every lease ``user`` holds, through the review service (it checks and records each release)."""
    from verification.reviews.services.claims import review_release

    released = 0
    for lease in ReviewLease.objects.filter(holder=user, released_at__isnull=True).select_related("verification"):
        try:
            done = review_release(user=user, verification=lease.verification, end_reason=END_DEACTIVATED)
        except PermissionRefused:
            # The holder lost the reviewer role since claiming: the review service would refuse them, so end the
            # lease directly, the way that service ends one (one conditional update).
            done = (
                ReviewLease.objects.filter(pk=lease.pk, holder=user, released_at__isnull=True).update(
                    released_at=timezone.now(), end_reason=END_DEACTIVATED
                )
                == 1
            )
        released += int(bool(done))
    return released


@transaction.atomic
def user_deactivate(*, by: Any, user: Any, reason: str) -> Deactivation:
    """Deactivate a user at once: release their review leases, revoke their API tokens, delete their sessions.

    An admin cannot deactivate themselves (``permission-denied``). Idempotent for an inactive user (nothing to end).
    """
    _require_admin(by, "deactivate users")
    why = _reason(reason)
    if user.pk == by.pk:
        raise PermissionRefused("you cannot deactivate yourself; another admin must")
    locked = type(user).objects.select_for_update().get(pk=user.pk)
    leases = _release_leases(locked) if locked.is_active else 0
    tokens = 0
    for token in ApiToken.objects.filter(actor__user=locked, revoked_at__isnull=True).order_by("id"):
        token_revoke(token=token, by=by)
        tokens += 1
    if locked.is_active:
        locked.is_active = False
        locked.save(update_fields=["is_active"])
    sessions = _end_sessions(locked)  # even when already inactive: a reactivation must find none
    security_log_record(
        kind=SecurityEventKind.USER_DEACTIVATE, user=by, target=locked.get_username(),
        detail={
            "user": locked.pk, "reason": why, "leases_released": leases, "tokens_revoked": tokens,
            "sessions_ended": sessions,
        },
    )
    user.is_active = False
    return Deactivation(leases_released=leases, tokens_revoked=tokens, sessions_ended=sessions)


@transaction.atomic
def user_reactivate(*, by: Any, user: Any) -> Any:
    """Let a deactivated user sign in again (their revoked tokens stay revoked: issue new ones)."""
    _require_admin(by, "reactivate users")
    if not user.is_active:
        user.is_active = True
        user.save(update_fields=["is_active"])
        security_log_record(
            kind=SecurityEventKind.USER_REACTIVATE, user=by, target=user.get_username(), detail={"user": user.pk}
        )
    return user


#: The kinds of machine actor an admin creates here (a human actor belongs to a portal user).
MACHINE_KINDS: Final = tuple(kind for kind in ActorKind if kind is not ActorKind.HUMAN)


@transaction.atomic
def machine_actor_create(*, by: Any, name: str, kind: str) -> Actor:
    """Create a machine actor (agent, service, collector, semantic worker, external verifier, contract owner)."""
    _require_admin(by, "create actors")
    if kind == ActorKind.HUMAN:
        raise ServiceError(Reason.INVALID_REQUEST, "a human actor is made with its portal user")
    actor = actor_create(name=(name or "").strip(), kind=kind)
    security_log_record(
        kind=SecurityEventKind.ACTOR_CREATE, user=by, target=actor.name, detail={"actor": actor.name, "kind": kind}
    )
    return actor


@transaction.atomic
def token_create(*, by: Any, actor: Actor, boundary: str, scopes: Sequence[str]) -> tuple[ApiToken, str]:
    """Issue an API token for ``actor`` in ``boundary`` with ``scopes``: the row and the plaintext, shown once.

    Refusals: those of ``services.actors.token_issue`` (``invalid-request``, ``unknown-scope``, the portal's own
    actor), and ``invalid-request`` for the actor of a deactivated user. The issue goes on the security log.
    """
    _require_admin(by, "issue API tokens")
    if actor.user is not None and not actor.user.is_active:
        raise ServiceError(Reason.INVALID_REQUEST, f"{actor.name} belongs to a deactivated user")
    return token_issue(actor=actor, boundary=boundary, scopes=list(scopes), created_by=by)


def token_revoke_as_admin(*, by: Any, token: ApiToken) -> ApiToken:
    """Revoke a token for good (idempotent); the revocation goes on the security log."""
    _require_admin(by, "revoke API tokens")
    return token_revoke(token=token, by=by)

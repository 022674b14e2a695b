"""The security log (issue 7 §4): an append-only record of sign-ins, claims, decisions, key and token events,
redactions and finding closures, filterable and exportable by admins.

One writer, ``security_log_record``. Most events reach it through signals, so every path that does the thing is on
record, whoever wrote the path:

- Django's ``user_logged_in``, ``user_logged_out`` and ``user_login_failed`` and django-axes' ``user_locked_out``
  (one row per sign-in attempt: axes keeps its own counters in its own tables, never counted here);
- a new ``PinEntry`` (pins, unpins, revocations; the portal's own key creation and rotation, by their system
  labels); a new ``ApiToken`` and a token's revocation; a new ``ReviewDecision`` (PASS, FAIL, needs more
  evidence); a new ``FindingEvent`` acknowledging or closing a finding.

Claims and releases of review leases are written by one conditional statement each (no model signal), so the review
service calls ``review_lease_recorded`` itself, or, where a claim is one statement (PostgreSQL), puts the entry's
INSERT in that statement with ``security_log_insert_sql`` (the same values, from ``_entry_values``).
The admin's own actions (users, roles, redaction, rotation from the portal) call ``security_log_record`` from
``verification.actors.services.users`` and the admin actions below.

Nothing edits or deletes an entry (``AppendOnlyModel`` and the database triggers of migration 0006).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from django.contrib.auth import signals as auth_signals
from django.db import transaction
from django.db.models.signals import post_save
from django.utils import timezone

from verification.actors import roles
from verification.actors.models import ApiToken
from verification.compiled import Insert
from verification.errors import PermissionRefused, ServiceError
from verification.evidence.models import Evidence
from verification.kernel.reasons import Reason
from verification.reviews.models import FindingAction, FindingEvent, ReviewDecision
from verification.trust.models import PinAction, PinEntry, SecurityEventKind, SecurityLogEntry, SigningKey

MAX_TARGET: Final = 300
MAX_LABEL: Final = 200
SYSTEM_LABEL: Final = "system"

#: The pin log's system labels (``services.keys``) that mean "the portal made its own key".
_SYSTEM_KIND_BY_LABEL: Final[dict[str, SecurityEventKind]] = {
    "system: create_signing_key": SecurityEventKind.KEY_CREATE,
    "system: rotate_signing_key": SecurityEventKind.KEY_ROTATE,
}
_KIND_BY_PIN_ACTION: Final[dict[str, SecurityEventKind]] = {
    PinAction.PIN: SecurityEventKind.KEY_PIN,
    PinAction.UNPIN: SecurityEventKind.KEY_UNPIN,
    PinAction.REVOKE: SecurityEventKind.KEY_REVOKE,
}


def label_of(user: Any) -> str:
    """``user: <name>`` for a portal user (the pin log's form), ``system`` without one."""
    if user is None or not getattr(user, "is_authenticated", False):
        return SYSTEM_LABEL
    return f"user: {user.get_username()}"[:MAX_LABEL]


def client_address(request: Any) -> str | None:
    """The client's address: ``REMOTE_ADDR`` only, never a forwarded header (like django-axes here)."""
    meta = getattr(request, "META", None)
    if not isinstance(meta, Mapping):
        return None
    value = meta.get("REMOTE_ADDR")
    return value if isinstance(value, str) and value else None


def _entry_values(
    *,
    kind: str,
    actor_label: str | None,
    user: Any,
    target: str,
    detail: Mapping[str, Any] | None,
    ip_address: str | None,
    at: datetime | None,
) -> dict[str, Any]:
    """The column values of one entry, checked: the one place both writers below take them from."""
    try:
        event = SecurityEventKind(kind)
    except ValueError:
        raise ServiceError(Reason.INVALID_REQUEST, f"unknown security event kind {kind!r}") from None
    stored_user = user if user is not None and getattr(user, "pk", None) is not None else None
    label = actor_label if actor_label else label_of(stored_user)
    return {
        "kind": event.value,
        "created_at": at or timezone.now(),
        "user": stored_user,
        "actor_label": label[:MAX_LABEL],
        "target": str(target or "")[:MAX_TARGET],
        "ip_address": ip_address,
        "detail": dict(detail or {}),
    }


def security_log_record(
    *,
    kind: str,
    actor_label: str | None = None,
    user: Any = None,
    target: str = "",
    detail: Mapping[str, Any] | None = None,
    ip_address: str | None = None,
    at: datetime | None = None,
    savepoint: bool = True,
) -> SecurityLogEntry:
    """Append one entry. ``actor_label`` defaults to the user's label (``user: <name>``) or ``system``.

    ``kind`` is a ``SecurityEventKind`` value (``invalid-request`` otherwise). Written in its own savepoint, so a
    caller's transaction decides whether it is kept: an action rolled back leaves no entry behind. ``savepoint=False``
    writes it straight into the caller's transaction, which must be open (``in_atomic_block``): used where the entry
    and the action must stand or fall together.
    """
    values = _entry_values(
        kind=kind, actor_label=actor_label, user=user, target=target, detail=detail, ip_address=ip_address, at=at
    )
    if not savepoint and not transaction.get_connection().in_atomic_block:
        raise ServiceError(Reason.INVALID_REQUEST, "an entry without a savepoint needs the caller's transaction")
    with transaction.atomic(savepoint=savepoint):
        entry = SecurityLogEntry(**values)
        entry.save()
    return entry


def security_log_insert_sql(
    *, kind: str, user: Any, source: str, target_column: str, at: datetime, detail: Mapping[str, Any] | None = None
) -> tuple[str, list[Any]]:
    """An ``INSERT … SELECT`` writing one entry per row of ``source`` (a name the caller's SQL defines, such as a
    data-modifying ``WITH`` query on PostgreSQL), its target the text of ``source``'s ``target_column``: SQL text and
    parameters. For an action and its entry written by one statement, which stand or fall together without a
    transaction block around them (``services.reviews``' claim). The values are ``security_log_record``'s."""
    values = _entry_values(kind=kind, actor_label=None, user=user, target="", detail=detail, ip_address=None, at=at)
    field = SecurityLogEntry._meta.get_field
    conn = transaction.get_connection()
    quote = conn.ops.quote_name
    user_pk = values["user"].pk if values["user"] is not None else None
    prepared = (  # (field, value): every value cast to its column's type, NULLs included
        ("kind", values["kind"]),
        ("created_at", field("created_at").get_db_prep_value(values["created_at"], conn)),
        ("user", user_pk),
        ("actor_label", values["actor_label"]),
        ("ip_address", values["ip_address"]),
        ("detail", field("detail").get_db_prep_value(values["detail"], conn)),
    )
    columns = ", ".join(quote(field(name).column) for name, _ in prepared)
    casts = ", ".join(f"CAST(%s AS {field(name).cast_db_type(conn)})" for name, _ in prepared)
    sql = (
        f"INSERT INTO {quote(SecurityLogEntry._meta.db_table)} ({columns}, {quote('target')}) "  # noqa: S608 - names
        f"SELECT {casts}, LEFT(CAST({source}.{quote(target_column)} AS text), {MAX_TARGET}) FROM {source}"
    )
    params = [value for _, value in prepared]
    return sql, params


def review_lease_recorded(
    *, kind: str, user: Any, verification_id: Any, detail: Mapping[str, Any] | None = None, savepoint: bool = True
) -> None:
    """The review service's hook for a claim or a release (those write no model row a signal could see).

    ``savepoint=False`` for a caller whose own transaction holds the lease write: the entry cannot fail apart from
    it (a failed INSERT fails the claim), so no savepoint is needed."""
    security_log_record(kind=kind, user=user, target=str(verification_id), detail=detail, savepoint=savepoint)


# --- admin actions on services owned elsewhere: checked here as well as in the view, and recorded --------------------

ADMINISTER_KEYS: Final = roles.ADMINISTER_KEYS
INSPECT_EVIDENCE: Final = roles.INSPECT_EVIDENCE


def require_permission(user: Any, permission: str, what: str) -> None:
    """``permission-denied`` unless ``user`` is a signed-in, active user holding ``permission`` (STYLE §10)."""
    if user is None or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        raise PermissionRefused(f"only a signed-in admin may {what}")
    if not user.has_perm(permission):
        raise PermissionRefused(f"{user.get_username()} may not {what}")


def signing_key_rotate_as_admin(*, user: Any) -> tuple[SigningKey | None, SigningKey]:
    """Rotate the portal's signing key from the admin pages (``services.keys.signing_key_rotate``); the new key's pin
    entry puts it on the security log."""
    from verification.trust.services.keys import signing_key_rotate

    require_permission(user, ADMINISTER_KEYS, "rotate the portal's signing key")
    return signing_key_rotate()


def evidence_redact_as_admin(*, user: Any, evidence: Evidence, reason: str, ip_address: str | None = None) -> Evidence:
    """Redact an evidence item (``services.evidence.evidence_redact``: bytes removed from the store, the digest kept,
    accessibility ``redacted``; later rechecks answer ``evidence-redacted``), and record who did it and why."""
    from verification.actors.services.actors import actor_for_user
    from verification.evidence.services import evidence_redact

    require_permission(user, INSPECT_EVIDENCE, "redact evidence")
    with transaction.atomic():
        already = Evidence.objects.filter(pk=evidence.pk, redacted_at__isnull=False).exists()
        redacted = evidence_redact(evidence=evidence, reason=reason, by=actor_for_user(user))
        if not already:
            security_log_record(
                kind=SecurityEventKind.REDACTION,
                user=user,
                target=str(evidence.pk),
                detail={"digest": redacted.digest, "reason": redacted.redaction_reason},
                ip_address=ip_address,
            )
    return redacted


# --- the receivers ------------------------------------------------------------------------------------------------


def _username(user: Any) -> str:
    return str(user.get_username()) if user is not None else ""


def _on_logged_in(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    security_log_record(
        kind=SecurityEventKind.LOGIN, user=user, target=_username(user), ip_address=client_address(request)
    )


def _on_logged_out(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    if user is None:  # signed out without being signed in: nothing happened
        return
    security_log_record(
        kind=SecurityEventKind.LOGOUT, user=user, target=_username(user), ip_address=client_address(request)
    )


def _tried_username(credentials: Any) -> str:
    if isinstance(credentials, Mapping):
        value = credentials.get("username")
        if isinstance(value, str):
            return value[:150]
    return ""


def _on_login_failed(sender: Any, credentials: Any = None, request: Any = None, **kwargs: Any) -> None:
    """One row per failed attempt: the username tried (never the password) and the address."""
    tried = _tried_username(credentials)
    security_log_record(
        kind=SecurityEventKind.LOGIN_FAILED,
        actor_label=f"anonymous: {tried}" if tried else "anonymous",
        target=tried,
        ip_address=client_address(request),
    )


def _on_locked_out(
    sender: Any, request: Any = None, username: Any = None, ip_address: Any = None, **kwargs: Any
) -> None:
    tried = username if isinstance(username, str) else ""
    security_log_record(
        kind=SecurityEventKind.LOGIN_LOCKED_OUT,
        actor_label=f"anonymous: {tried}" if tried else "anonymous",
        target=tried[:150],
        ip_address=ip_address if isinstance(ip_address, str) and ip_address else client_address(request),
    )


def _on_pin_entry(sender: Any, instance: PinEntry, created: bool = False, raw: bool = False, **kwargs: Any) -> None:
    if not created or raw:
        return
    kind = _KIND_BY_PIN_ACTION[instance.action]
    if instance.action == PinAction.PIN:
        kind = _SYSTEM_KIND_BY_LABEL.get(instance.actor_label, kind)
    security_log_record(
        kind=kind,
        actor_label=instance.actor_label,
        user=instance.actor_user,
        target=instance.key_id,
        at=instance.created_at,
        detail={
            "pin_entry": instance.pk,
            "purpose": instance.purpose,
            "fingerprint": instance.fingerprint,
            "channel": instance.channel,
            "note": instance.note,
            "reason": instance.reason,
        },
    )


def _token_detail(token: ApiToken) -> dict[str, Any]:
    return {
        "token": token.pk,
        "prefix": token.prefix,
        "actor": token.actor.name,
        "boundary": token.boundary,
        "scopes": list(token.scopes or []),
    }


def _on_api_token(
    sender: Any, instance: ApiToken, created: bool = False, raw: bool = False, update_fields: Any = None, **kwargs: Any
) -> None:
    if raw:
        return
    if created:
        security_log_record(
            kind=SecurityEventKind.TOKEN_ISSUE,
            user=instance.created_by,
            target=instance.prefix,
            detail=_token_detail(instance),
        )
    elif update_fields is not None and "revoked_at" in update_fields and instance.revoked_at is not None:
        security_log_record(
            kind=SecurityEventKind.TOKEN_REVOKE,
            user=instance.revoked_by,
            target=instance.prefix,
            detail=_token_detail(instance),
        )


def _decision_entry(decision: ReviewDecision) -> dict[str, Any]:
    """What a review decision's entry says (both of its writers below take it from here)."""
    return {
        "kind": SecurityEventKind.DECISION,
        "user": decision.user,
        "target": str(decision.verification_id),
        "detail": {"action": decision.action, "receipt": decision.receipt_id},
    }


def _on_review_decision(
    sender: Any, instance: ReviewDecision, created: bool = False, raw: bool = False, **kwargs: Any
) -> None:
    if not created or raw:
        return
    # A decision saved through the ORM (``review_decide`` inserts its own with ``decision_logged``): inside a
    # transaction the entry is written straight into it (the two stand or fall together); outside any, in one of its
    # own.
    security_log_record(**_decision_entry(instance), savepoint=not transaction.get_connection().in_atomic_block)


#: A decision's entry as one INSERT built once (``compiled.Insert``), queued with the decision's other writes.
_INSERT_ENTRY: Final = Insert(SecurityLogEntry)


def decision_logged(decision: ReviewDecision) -> None:
    """The entry of a decision that ``review_decide`` inserts with ``compiled.Insert`` (which sends no ``post_save``,
    so ``_on_review_decision`` does not run): written in the decision's transaction, which must be open, and queued
    with its other writes (``compiled.writes_batched``), right after the decision."""
    if not transaction.get_connection().in_atomic_block:
        raise ServiceError(Reason.INVALID_REQUEST, "a decision's entry is written in the decision's transaction")
    values = _entry_values(actor_label=None, ip_address=None, at=None, **_decision_entry(decision))
    _INSERT_ENTRY([SecurityLogEntry(**values)])


_FINDING_KINDS: Final[dict[str, SecurityEventKind]] = {
    FindingAction.ACKNOWLEDGED: SecurityEventKind.FINDING_ACKNOWLEDGE,
    FindingAction.CLOSED: SecurityEventKind.FINDING_CLOSE,
}


def _on_finding_event(
    sender: Any, instance: FindingEvent, created: bool = False, raw: bool = False, **kwargs: Any
) -> None:
    kind = _FINDING_KINDS.get(instance.action)
    if not created or raw or kind is None:
        return
    actor = instance.actor
    user = actor.user if actor is not None else None
    security_log_record(
        kind=kind,
        user=user,
        actor_label=label_of(user) if user is not None else (f"actor: {actor.name}" if actor is not None else ""),
        target=str(instance.finding_id),
        detail={"finding": instance.finding_id, "rationale": instance.rationale},
    )


def connect_signals() -> None:
    """Connect the receivers (once: ``verification.models`` calls this when the app loads)."""
    auth_signals.user_logged_in.connect(_on_logged_in, dispatch_uid="security_log.login")
    auth_signals.user_logged_out.connect(_on_logged_out, dispatch_uid="security_log.logout")
    auth_signals.user_login_failed.connect(_on_login_failed, dispatch_uid="security_log.login_failed")
    try:
        from axes.signals import user_locked_out
    except ImportError:  # pragma: no cover - django-axes is a requirement; without it there is no lockout
        pass
    else:
        user_locked_out.connect(_on_locked_out, dispatch_uid="security_log.locked_out")
    post_save.connect(_on_pin_entry, sender=PinEntry, dispatch_uid="security_log.pin_entry")
    post_save.connect(_on_api_token, sender=ApiToken, dispatch_uid="security_log.api_token")
    post_save.connect(_on_review_decision, sender=ReviewDecision, dispatch_uid="security_log.review_decision")
    post_save.connect(_on_finding_event, sender=FindingEvent, dispatch_uid="security_log.finding_event")

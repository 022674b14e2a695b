"""Keys: the portal's own signing keys (create, rotate) and the pin log (pin, unpin, revoke) (SPEC §8).

Every pin-log write goes through here and appends one ``PinEntry``; nothing edits or deletes one. Pin-log writes
are serialized (a transaction-scoped advisory lock on PostgreSQL; SQLite's IMMEDIATE transactions already are),
so "already pinned" and "not pinned" are decided on the log as it stands.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from verification.actors import roles
from verification.errors import NotFound, PermissionRefused
from verification.kernel.canonical import canonical_text
from verification.kernel.chain import format_created_at
from verification.kernel.errors import KeyRefused
from verification.kernel.keys import PrivateKey, PublicKey, fingerprint_matches
from verification.kernel.reasons import Reason
from verification.trust import root as trust
from verification.trust import signing
from verification.trust.models import PinAction, PinEntry, PinPurpose, SigningKey
from verification.trust.selectors import pin_state, pinned_key
from verification.trust.signing import SigningKeyUnavailable

SYSTEM_CREATE: Final = "system: create_signing_key"
SYSTEM_ROTATE: Final = "system: rotate_signing_key"
SYSTEM_REVOKE: Final = "system: revoke_signing_key"
CHANNEL_CREATE: Final = "local key creation"
CHANNEL_ROTATE: Final = "local key rotation"
CHANNEL_REVOKE: Final = "manage.py revoke_signing_key"
#: The permission of the portal's admin role (verification/actors/roles.py) that pinning and revoking need.
ADMINISTER_KEYS: Final = roles.ADMINISTER_KEYS

_PIN_LOG_LOCK: Final = 8_200_308_001  # pg_advisory_xact_lock key of the pin log (any fixed bigint)
_CREATE_ATTEMPTS: Final = 8


# --- helpers -------------------------------------------------------------------------------------------------------


def _lock_pin_log() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_PIN_LOG_LOCK])


def _label_of(user: Any) -> str:
    return f"user: {user.get_username()}"


def _require_key_admin(user: Any) -> None:
    """Pinning, unpinning and revoking are for the admin role (SPEC §0); checked here as well as in the view."""
    if user is None or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        raise PermissionRefused("only a signed-in admin may change the pin log")
    if not (getattr(user, "is_superuser", False) or user.has_perm(ADMINISTER_KEYS)):
        raise PermissionRefused(f"{user.get_username()} may not change the pin log")


def _require_channel(channel: str) -> str:
    cleaned = (channel or "").strip()
    if not cleaned:
        raise KeyRefused(Reason.PIN_CHANNEL_REQUIRED, "name the channel the fingerprint was confirmed through")
    return cleaned


def _append(
    *,
    action: PinAction,
    purpose: PinPurpose | None,
    key: PublicKey,
    actor_user: Any,
    actor_label: str,
    channel: str,
    note: str = "",
    reason: str = "",
    created_at: datetime | None = None,
) -> PinEntry:
    entry = PinEntry(
        action=action,
        purpose=purpose,
        key_id=key.key_id,
        jwk=canonical_text(key.to_jwk()),
        fingerprint=key.fingerprint,
        actor_user=actor_user,
        actor_label=actor_label,
        created_at=created_at or timezone.now(),
        channel=channel,
        note=note,
        reason=reason,
    )
    entry.save()
    _journal(
        {
            "action": str(action),
            "key_id": key.key_id,
            "jwk": key.to_jwk(),
            **({"purpose": str(purpose)} if purpose is not None else {}),
            "at": format_created_at(entry.created_at),
            "by": actor_label,
            "channel": channel,
            "note": note,
            **({"reason": reason} if action == PinAction.REVOKE else {}),
        }
    )
    return entry


def _journal(event: dict[str, Any], *, signer: PrivateKey | None = None) -> None:
    """Append the event to the pin journal outside the database (SPEC §8), inside the caller's transaction: when
    the journal cannot be written (no portal key, a journal that does not verify) the database write rolls back."""
    trust.journal_append(event, signer=signer)


# --- the pin log -----------------------------------------------------------------------------------------------------


@transaction.atomic
def key_pin(
    *,
    actor_user: Any,
    jwk_or_pem_text: str,
    purpose: str,
    typed_fingerprint: str,
    channel: str,
    note: str = "",
) -> PinEntry:
    """Pin a key for one purpose after checking the fingerprint the admin typed (SPEC §8).

    Refusals (``KeyRefused``): ``malformed-key``, ``small-order-key``, ``non-canonical-key``, ``kid-mismatch`` (the
    key itself), ``fingerprint-mismatch`` (neither its sha256 fingerprint nor its RFC 7638 thumbprint),
    ``pin-channel-required``, ``revoked-key``, ``key-already-pinned``; ``permission-denied`` for a non-admin.
    """
    _require_key_admin(actor_user)
    wanted = PinPurpose(purpose)
    key = PublicKey.from_text(jwk_or_pem_text)
    if not fingerprint_matches(key, typed_fingerprint):
        raise KeyRefused(Reason.FINGERPRINT_MISMATCH, f"the typed fingerprint is not that of {key.key_id}")
    confirmed_through = _require_channel(channel)
    _lock_pin_log()
    state = pin_state()
    if state.is_revoked(key.key_id):
        raise KeyRefused(Reason.REVOKED_KEY, f"{key.key_id} was revoked; a revoked key cannot be pinned again")
    if state.is_pinned(key.key_id, wanted):
        raise KeyRefused(Reason.KEY_ALREADY_PINNED, f"{key.key_id} is already pinned for {wanted}")
    return _append(
        action=PinAction.PIN,
        purpose=wanted,
        key=key,
        actor_user=actor_user,
        actor_label=_label_of(actor_user),
        channel=confirmed_through,
        note=note,
    )


@transaction.atomic
def key_unpin(*, actor_user: Any, key_id: str, purpose: str, channel: str, note: str = "") -> PinEntry:
    """Withdraw the pin of a key for one purpose; ``key-not-pinned`` when it is not pinned for it."""
    _require_key_admin(actor_user)
    wanted = PinPurpose(purpose)
    confirmed_through = _require_channel(channel)
    _lock_pin_log()
    pinned = pin_state().pinned.get((key_id, wanted))
    if pinned is None:
        raise KeyRefused(Reason.KEY_NOT_PINNED, f"{key_id} is not pinned for {wanted}")
    return _append(
        action=PinAction.UNPIN,
        purpose=wanted,
        key=pinned_key(pinned),
        actor_user=actor_user,
        actor_label=_label_of(actor_user),
        channel=confirmed_through,
        note=note,
    )


def _known_key(key_id: str) -> PublicKey | None:
    own = SigningKey.objects.filter(key_id=key_id).first()
    if own is not None:
        return own.public
    latest = PinEntry.objects.filter(key_id=key_id).order_by("-id").first()
    return pinned_key(latest) if latest is not None else None


@transaction.atomic
def key_revoke(
    *,
    key_id: str,
    reason: str,
    channel: str,
    actor_user: Any = None,
    actor_label: str | None = None,
    note: str = "",
) -> PinEntry:
    """Revoke a key for every purpose, for good (SPEC §8): a ``revoke`` entry naming time and reason.

    If the key is one of the portal's own, its ``SigningKey`` becomes ``revoked``: it leaves the JWKS, is listed
    in revoked.json, and its private key file is discarded. Without ``actor_user`` the caller is a system command
    and must name itself in ``actor_label``.
    """
    if actor_user is not None:
        _require_key_admin(actor_user)
        label = _label_of(actor_user)
    elif actor_label:
        label = actor_label
    else:
        raise PermissionRefused("a revocation names who revoked the key")
    why = (reason or "").strip()
    if not why:
        raise KeyRefused(Reason.REVOCATION_REASON_REQUIRED, "say why the key is revoked")
    confirmed_through = _require_channel(channel)
    _lock_pin_log()
    key = _known_key(key_id)
    if key is None:
        raise NotFound(f"no key {key_id!r} is known to the portal", key_id=key_id)
    if pin_state().is_revoked(key_id):
        raise KeyRefused(Reason.REVOKED_KEY, f"{key_id} is already revoked")
    now = timezone.now()
    own = SigningKey.objects.select_for_update().filter(key_id=key_id).first()
    if own is not None:
        own.status = SigningKey.Status.REVOKED
        own.revoked_at = now
        own.revoked_reason = why
        own.save(update_fields=["status", "revoked_at", "revoked_reason"])
        transaction.on_commit(lambda: signing.discard_private_key_file(key_id))
    return _append(
        action=PinAction.REVOKE,
        purpose=None,
        key=key,
        actor_user=actor_user,
        actor_label=label,
        channel=confirmed_through,
        note=note,
        reason=why,
        created_at=now,
    )


# --- the portal's own signing keys -------------------------------------------------------------------------------


def _register_active(private: PrivateKey, *, actor_label: str, channel: str, now: datetime) -> SigningKey:
    """Insert the active ``SigningKey`` row and pin it for proof-signing (inside the caller's transaction); the pin
    journal records the new key with a line it signs itself (proof of possession), then the pin."""
    key = private.public_key
    row = SigningKey(
        key_id=key.key_id,
        public_key=key.raw,
        fingerprint=key.fingerprint,
        status=SigningKey.Status.ACTIVE,
        created_at=now,
    )
    row.save(force_insert=True)
    _journal(
        {
            "action": "own-key",
            "key_id": key.key_id,
            "jwk": key.to_jwk(),
            "status": "active",
            "at": format_created_at(now),
            "by": actor_label,
            "channel": channel,
        },
        signer=private,
    )
    _append(
        action=PinAction.PIN,
        purpose=PinPurpose.PROOF_SIGNING,
        key=key,
        actor_user=None,
        actor_label=actor_label,
        channel=channel,
        note="the portal's own signing key",
        created_at=now,
    )
    return row


def _refuse_known(key: PublicKey) -> None:
    known = SigningKey.objects.filter(key_id=key.key_id).first()
    if known is not None:
        raise SigningKeyUnavailable(
            f"the configured key {key.key_id} is already {known.status}; provision a new key in "
            f"{signing.ENV_PEM} or {signing.ENV_FILE}"
        )


def _is_lost_race(exc: Exception) -> bool:
    return isinstance(exc, IntegrityError) or "locked" in str(exc).lower()


def signing_key_create() -> tuple[SigningKey, bool]:
    """Make sure the portal has an active signing key; ``(row, created)``. Idempotent (``make run`` calls it).

    The key is the one provisioned in the environment, else a new one written to ``<var>/keys/<kid>.pem`` with an
    exclusive create. Two processes racing both write a file, but only one ``active`` row can exist (a partial
    unique constraint): the loser discards its file and reports the winner's key.
    """
    for attempt in range(_CREATE_ATTEMPTS):
        row = SigningKey.objects.filter(status=SigningKey.Status.ACTIVE).first()
        if row is not None:
            signing.private_key_for(row)  # the active key must be usable here, or say why not
            return row, False
        secret = signing.configured_secret()
        written: Path | None = None
        if secret is not None:
            _refuse_known(secret.public_key)
            key = secret
        else:
            key = PrivateKey.generate()
            written = signing.write_private_key(key)
        try:
            with transaction.atomic():
                row = _register_active(
                    key, actor_label=SYSTEM_CREATE, channel=CHANNEL_CREATE, now=timezone.now()
                )
        except (IntegrityError, OperationalError) as exc:
            if written is not None:
                written.unlink(missing_ok=True)
            if not _is_lost_race(exc):
                raise
            time.sleep(0.05 * (attempt + 1))
            continue
        return row, True
    raise SigningKeyUnavailable("another process kept creating signing keys at the same time; run the command again")


def signing_key_rotate() -> tuple[SigningKey | None, SigningKey]:
    """Retire the active key and make a new one active, pinned for proof-signing; ``(retired, new)``.

    The new key is the one provisioned in the environment when set (it must be new), else a freshly generated one
    in ``<var>/keys``. The retired key stays published and its receipts keep verifying; its private key file is
    discarded, since it never signs again.
    """
    secret = signing.configured_secret()
    written: Path | None = None
    if secret is not None:
        key = secret
    else:
        key = PrivateKey.generate()
        written = signing.write_private_key(key)
    try:
        with transaction.atomic():
            now = timezone.now()
            old = SigningKey.objects.select_for_update().filter(status=SigningKey.Status.ACTIVE).first()
            if secret is not None:
                if old is not None and old.key_id == secret.public_key.key_id:
                    raise SigningKeyUnavailable(
                        f"the configured key is already the active key {old.key_id}; provision the new key in "
                        f"{signing.ENV_PEM} or {signing.ENV_FILE} first"
                    )
                _refuse_known(secret.public_key)
            if old is not None:
                old.status = SigningKey.Status.RETIRED
                old.retired_at = now
                old.save(update_fields=["status", "retired_at"])
                retired_id = old.key_id
                transaction.on_commit(lambda: signing.discard_private_key_file(retired_id))
            if old is not None and not trust.journal_exists():
                raise SigningKeyUnavailable(
                    "the pin journal does not exist yet: run 'manage.py seal_pin_journal' once before rotating"
                )
            new = _register_active(key, actor_label=SYSTEM_ROTATE, channel=CHANNEL_ROTATE, now=now)
    except BaseException:
        if written is not None:
            written.unlink(missing_ok=True)
        raise
    return old, new


def signing_key_revoke(*, key_id: str, reason: str, actor_label: str = SYSTEM_REVOKE) -> PinEntry:
    """Revoke one of the portal's own keys (``manage.py revoke_signing_key``); ``not-found`` for another key."""
    if not SigningKey.objects.filter(key_id=key_id).exists():
        raise NotFound(f"the portal has no signing key {key_id!r}", key_id=key_id)
    return key_revoke(key_id=key_id, reason=reason, channel=CHANNEL_REVOKE, actor_label=actor_label)


# --- sealing the pin log of an existing deployment into the pin journal (one time, admin-attended) -----------------


def pin_journal_seal() -> tuple[Path, list[str]]:
    """Seal the current pin log and the portal's keys into a new pin journal (``manage.py seal_pin_journal``).

    For a deployment that predates the journal: the database is trusted this once, so an admin runs it and checks
    the fingerprints it prints against the ones confirmed out of band. The active key signs every line (its private
    key comes from ``signing``); retired and revoked keys become ``own-key`` lines, then every pin-log entry in
    order. Refuses when a journal exists (``trust.JournalExists``) or without a usable active key. Returns the path
    and one line per sealed key for the operator.
    """
    row, private = signing.active_signer()
    events: list[dict[str, Any]] = []
    report = [f"active  {row.key_id}  {row.public.fingerprint_grouped}"]
    for other in SigningKey.objects.exclude(key_id=row.key_id).order_by("created_at", "key_id"):
        key = other.public
        events.append({
            "action": "own-key", "key_id": key.key_id, "jwk": key.to_jwk(), "status": "retired",
            "at": format_created_at(other.created_at), "by": "system: seal_pin_journal",
            "channel": "seal of the existing pin log",
        })
        report.append(f"{other.status:<7} {key.key_id}  {key.fingerprint_grouped}")
    for entry in PinEntry.objects.order_by("id"):
        try:
            key = pinned_key(entry)
        except KeyRefused:
            report.append(f"skipped pin entry {entry.pk}: it holds a key the kernel refuses")
            continue
        event: dict[str, Any] = {
            "action": str(entry.action), "key_id": key.key_id, "jwk": key.to_jwk(),
            "at": format_created_at(entry.created_at), "by": entry.actor_label, "channel": entry.channel,
            "note": entry.note,
        }
        if entry.action == PinAction.REVOKE:
            event["reason"] = entry.reason
        else:
            event["purpose"] = str(entry.purpose)
        events.append(event)
        foreign = not SigningKey.objects.filter(key_id=key.key_id).exists()
        if entry.action == PinAction.PIN and entry.purpose == PinPurpose.PROOF_SIGNING and foreign:
            report.append(f"pinned  {key.key_id}  {key.fingerprint_grouped} (another issuer, proof-signing)")
    return trust.seal(events, active=private, active_since=format_created_at(row.created_at)), report

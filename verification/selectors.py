"""Selectors: the reads of the domain (STYLE §9). Services write; views and commands read through here.

The trust root of each key purpose is derived from the append-only pin log, never stored beside it (SPEC §8).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from verification.kernel.canonical import loads_strict
from verification.kernel.chain import ALGO, FORMAT, Entry, build_proof, format_created_at
from verification.kernel.keys import PublicKey
from verification.kernel.verifier import TrustedKey
from verification.models import PinAction, PinEntry, PinPurpose, Receipt, SigningKey, Verification

# --- verifications and receipts -----------------------------------------------------------------------------------


def verification_get(verification_id: str | uuid.UUID) -> Verification | None:
    """The verification with this id, or None (also for a string that is not a UUID)."""
    try:
        pk = verification_id if isinstance(verification_id, uuid.UUID) else uuid.UUID(str(verification_id))
    except ValueError:
        return None
    return Verification.objects.filter(pk=pk).first()


def receipts_of(verification: Verification) -> QuerySet[Receipt]:
    """The chain of a verification, in seq order."""
    return Receipt.objects.filter(verification=verification).order_by("seq")


def head_of(verification: Verification) -> Receipt | None:
    """The last receipt of the chain (the head), or None while the chain is empty."""
    return Receipt.objects.filter(verification=verification).order_by("-seq").first()


def entry_of(receipt: Receipt) -> Entry:
    """A stored receipt as the kernel's wire entry (the envelope exactly as stored and signed)."""
    return Entry(
        seq=receipt.seq,
        key_id=receipt.key_id,
        algo=ALGO,  # the portal signs every receipt with the one algorithm and format (SPEC §7)
        format=FORMAT,
        prev_hash=receipt.prev_hash,
        content_hash=receipt.content_hash,
        signature=receipt.signature,
        envelope=receipt.envelope,
    )


_ENTRY_COLUMNS = ("seq", "key_id", "prev_hash", "content_hash", "signature", "envelope")


def proof_for(verification: Verification) -> dict[str, Any] | None:
    """The proof document of a verification (SPEC §7) with the server-served head; None while the chain is empty."""
    rows = receipts_of(verification).values_list(*_ENTRY_COLUMNS)  # only the wire columns: chains can be long
    entries = [
        Entry(seq=seq, key_id=key_id, algo=ALGO, format=FORMAT, prev_hash=prev_hash, content_hash=content_hash,
              signature=signature, envelope=envelope)
        for seq, key_id, prev_hash, content_hash, signature, envelope in rows
    ]
    if not entries:
        return None
    return build_proof(
        verification_id=str(verification.id), entries=entries, proof_head_hash=entries[-1].content_hash
    )


# --- the pin log -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PinState:
    """The pin log folded: which (key, purpose) pins are in force, and which keys are revoked (for good)."""

    pinned: Mapping[tuple[str, str], PinEntry]  # (key_id, purpose) -> the pin entry in force
    revoked: Mapping[str, PinEntry]  # key_id -> its (first) revocation entry

    def is_pinned(self, key_id: str, purpose: str) -> bool:
        return (key_id, purpose) in self.pinned

    def is_revoked(self, key_id: str) -> bool:
        return key_id in self.revoked


def pin_state() -> PinState:
    """Fold the pin log in order: the latest pin/unpin of (key, purpose) decides; any revoke is permanent."""
    pinned: dict[tuple[str, str], PinEntry] = {}
    revoked: dict[str, PinEntry] = {}
    for entry in PinEntry.objects.order_by("id").iterator():
        if entry.action == PinAction.REVOKE:
            revoked.setdefault(entry.key_id, entry)
        elif entry.purpose is None:  # pragma: no cover - a database constraint forbids it
            continue
        elif entry.action == PinAction.PIN:
            pinned[(entry.key_id, entry.purpose)] = entry
        elif entry.action == PinAction.UNPIN:
            pinned.pop((entry.key_id, entry.purpose), None)
    return PinState(pinned=pinned, revoked=revoked)


def pinned_key(entry: PinEntry) -> PublicKey:
    """The public key a pin-log entry records (checked again on the way out)."""
    return PublicKey.from_jwk(loads_strict(entry.jwk))


def trusted_keys(purpose: str) -> Mapping[str, TrustedKey]:
    """The trust root for ``purpose`` (``proof-signing`` or ``evidence-source``), with revocation state.

    A key pinned only for the other purpose is absent (so verification says ``unknown-key``); a pinned key that
    was revoked is present with ``revoked=True`` (so verification says ``revoked-key``).
    """
    wanted = PinPurpose(purpose)
    state = pin_state()
    return {
        key_id: TrustedKey(pinned_key(entry), revoked=state.is_revoked(key_id))
        for (key_id, entry_purpose), entry in state.pinned.items()
        if entry_purpose == wanted
    }


def pin_log() -> QuerySet[PinEntry]:
    """The whole pin log, oldest first (for the admin screens)."""
    return PinEntry.objects.select_related("actor_user").order_by("id")


# --- the portal's own signing keys -------------------------------------------------------------------------------


def active_signing_key() -> SigningKey | None:
    return SigningKey.objects.filter(status=SigningKey.Status.ACTIVE).first()


def published_keys() -> QuerySet[SigningKey]:
    """The keys served in the JWKS: active and retired, never revoked (SPEC §8)."""
    return SigningKey.objects.filter(
        status__in=[SigningKey.Status.ACTIVE, SigningKey.Status.RETIRED]
    ).order_by("created_at", "key_id")


def revoked_keys() -> QuerySet[SigningKey]:
    """The portal's revoked keys, listed with time and reason at revoked.json (SPEC §8)."""
    return SigningKey.objects.filter(status=SigningKey.Status.REVOKED).order_by("revoked_at", "key_id")


def jwks_document() -> dict[str, list[dict[str, str]]]:
    """``{"keys": [jwk, ...]}`` of the published keys: public members only."""
    return {"keys": [row.public.to_jwk() for row in published_keys()]}


def revoked_document() -> dict[str, list[dict[str, str]]]:
    """``{"revoked": [{"kid", "revoked_at", "reason"}, ...]}``."""
    return {
        "revoked": [
            {
                "kid": row.key_id,
                "revoked_at": format_created_at(row.revoked_at) if row.revoked_at else "",
                "reason": row.revoked_reason,
            }
            for row in revoked_keys()
        ]
    }

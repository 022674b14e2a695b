"""Appending signed receipts to a verification's chain (SPEC §7).

``receipt_issue`` is the only way a receipt comes to exist. It serializes appends to one chain by locking the
verification row (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's IMMEDIATE transactions serialize all writers),
so concurrent appends get seq 0..n-1 with valid links, and the unique (verification, seq) constraint backs it up.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Subquery
from django.utils import timezone

from verification import signing
from verification.kernel.chain import content_hash_of, is_hex_hash, sign_entry
from verification.kernel.errors import InvariantError
from verification.kernel.reasons import Reason
from verification.models import Receipt, ReceiptKind, SigningKey, Verification
from verification.services import NotFound
from verification.signing import SigningKeyUnavailable

#: Payload fields copied into indexed columns, with the column's maximum length.
_INDEXED: dict[str, int] = {"verdict": 16, "determination": 32, "authority": 32, "actor": 200}


def _refuse(detail: str) -> InvariantError:
    return InvariantError(Reason.MALFORMED_RECORD, detail)


def _indexed_copy(payload: Mapping[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if isinstance(value, Mapping):  # an actor may be given as {"id": ..., "kind": ...}
        value = value.get("id")
    if value is None:
        return None
    if not isinstance(value, str):
        raise _refuse(f"payload {name} must be a string (or an object with a string id)")
    if len(value) > _INDEXED[name]:
        raise _refuse(f"payload {name} is longer than {_INDEXED[name]} characters")
    return value


def _superseded(payload: Mapping[str, Any]) -> Receipt | None:
    receipt_id = payload.get("supersedes_receipt_id")
    if receipt_id is None:
        return None
    if not is_hex_hash(receipt_id):
        raise _refuse("supersedes_receipt_id must be a receipt id (64 lowercase hex)")
    superseded = Receipt.objects.filter(content_hash=receipt_id).first()
    if superseded is None:
        raise NotFound(f"no receipt {receipt_id} to supersede", receipt_id=receipt_id)
    return superseded


@transaction.atomic
def receipt_issue(
    *,
    verification: Verification,
    kind: str,
    payload: Mapping[str, Any],
    created_at: datetime | None = None,
) -> Receipt:
    """Sign ``payload`` as the next entry of ``verification``'s chain with the active key and store it.

    ``payload["kind"]`` is set to ``kind`` (a payload naming another kind is refused). The indexed columns
    (verdict, determination, authority, actor, supersedes_receipt_id) are copied from the payload; the envelope
    stays the record. Raises ``SigningKeyUnavailable`` (``no-signing-key``) without a usable active key.
    """
    try:
        receipt_kind = ReceiptKind(kind)
    except ValueError:
        raise _refuse(f"kind must be one of {', '.join(ReceiptKind.values)}, got {kind!r}") from None
    if not isinstance(payload, Mapping):
        raise _refuse("payload must be a mapping")
    if payload.get("kind", receipt_kind.value) != receipt_kind.value:
        raise _refuse(f"payload kind {payload.get('kind')!r} is not {receipt_kind.value!r}")
    body = {**payload, "kind": receipt_kind.value}
    when = created_at if created_at is not None else timezone.now()
    if timezone.is_naive(when):
        raise _refuse("created_at must be timezone-aware")
    superseded = _superseded(body)
    indexed = {name: _indexed_copy(body, name) for name in _INDEXED}

    # Serialize appends to this chain: lock the verification row (PostgreSQL; SQLite's IMMEDIATE transactions already
    # hold the write lock). What follows is a new statement, so under READ COMMITTED (Django's default) it sees every
    # receipt committed before the lock was granted; the unique (verification, seq) constraint backs this up.
    locked = (
        Verification.objects.select_for_update().only("id", "rubric_hash", "submission_hash").get(pk=verification.pk)
    )
    heads = Receipt.objects.filter(verification=locked).order_by("-seq")
    state = (
        SigningKey.objects.filter(status=SigningKey.Status.ACTIVE)
        .annotate(head_seq=Subquery(heads.values("seq")[:1]), head_hash=Subquery(heads.values("content_hash")[:1]))
        .values_list("key_id", "head_seq", "head_hash")
        .first()
    )
    if state is None:
        raise SigningKeyUnavailable("no active signing key")
    key_id, head_seq, head_hash = state
    seq, prev_hash = (0, None) if head_seq is None else (head_seq + 1, head_hash)
    private_key = signing.private_key_for_id(key_id)
    entry = sign_entry(
        private_key=private_key,
        verification_id=str(locked.id),
        seq=seq,
        rubric_hash=locked.rubric_hash,
        submission_hash=locked.submission_hash,
        prev_hash=prev_hash,
        payload=body,
        created_at=when,
    )
    if content_hash_of(entry.envelope) != entry.content_hash:  # pragma: no cover - sign_entry computed it so
        raise _refuse("the content hash is not the sha256 of the envelope")
    receipt = Receipt(
        content_hash=entry.content_hash,
        verification=locked,
        seq=entry.seq,
        key_id=key_id,
        prev_hash=entry.prev_hash,
        signature=entry.signature,
        envelope=entry.envelope,
        created_at=when,
        kind=receipt_kind.value,
        supersedes_receipt=superseded,
        **indexed,
    )
    receipt.save()
    return receipt

"""Appending signed receipts to a verification's chain (SPEC §7).

``receipt_issue`` is the only way a receipt comes to exist. It serializes appends to one chain by locking the
verification row (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's IMMEDIATE transactions serialize all writers),
so concurrent appends get seq 0..n-1 with valid links, and the unique (verification, seq) constraint backs it up.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from verification import signing
from verification.db_guards import AppendOnlyError
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


@dataclass(frozen=True)
class _Locked:
    id: uuid.UUID
    rubric_hash: str
    submission_hash: str


def _multi_statement(cursor: Any) -> bool:
    """True when one execute may carry two statements: PostgreSQL through psycopg's client-side binding cursor
    (Django's default; ``server_side_binding`` turns it off, and SQLite never allows it)."""
    if connection.vendor != "postgresql":
        return False
    import psycopg

    return isinstance(getattr(cursor, "cursor", None), psycopg.ClientCursor)


def _lock_chain(verification_pk: uuid.UUID) -> tuple[_Locked, str, int, str | None]:
    """Lock the chain and read its head and the active key: ``(verification, key_id, next seq, prev_hash)``.

    Serializes appends to one chain: ``SELECT ... FOR UPDATE`` on the verification row (PostgreSQL; SQLite's
    IMMEDIATE transactions already hold the database's write lock). The head is read by a second statement, after
    the lock is granted, so under READ COMMITTED (Django's default) it sees every receipt committed before; one
    statement could not (its snapshot would predate the wait). The unique (verification, seq) constraint backs this up.
    Plain SQL on the hot path: this runs once per receipt, and the ORM's query building cost more than the queries.
    """
    quote = connection.ops.quote_name
    verifications, receipts, keys = (quote(m._meta.db_table) for m in (Verification, Receipt, SigningKey))
    pk = Verification._meta.get_field("id").get_db_prep_value(verification_pk, connection)
    for_update = " FOR UPDATE" if connection.features.has_select_for_update else ""
    head = f"FROM {receipts} WHERE verification_id = %s ORDER BY seq DESC LIMIT 1"
    lock_sql = f"SELECT rubric_hash, submission_hash FROM {verifications} WHERE id = %s{for_update}"  # noqa: S608
    state_sql = f"SELECT key_id, (SELECT seq {head}), (SELECT content_hash {head}) FROM {keys} WHERE status = %s"  # noqa: S608
    active = SigningKey.Status.ACTIVE.value
    with connection.cursor() as cursor:
        if _multi_statement(cursor):
            # One round trip, still two statements: PostgreSQL runs each statement of a multi-statement query with
            # its own snapshot under READ COMMITTED, taken when the statement starts, so after the lock is held.
            cursor.execute(f"{lock_sql}; {state_sql}", [pk, pk, pk, active])
            found = cursor.fetchone()
            cursor.nextset()
            state = cursor.fetchone()
        else:
            cursor.execute(lock_sql, [pk])
            found = cursor.fetchone()
            cursor.execute(state_sql, [pk, pk, active])
            state = cursor.fetchone()
    if found is None:
        raise NotFound(f"no verification {verification_pk}", verification_id=str(verification_pk))
    if state is None:
        raise SigningKeyUnavailable("no active signing key")
    key_id, head_seq, head_hash = state
    locked = _Locked(id=verification_pk, rubric_hash=found[0], submission_hash=found[1])
    return locked, key_id, (0 if head_seq is None else head_seq + 1), head_hash


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

    locked, key_id, seq, prev_hash = _lock_chain(verification.pk)
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
        verification_id=locked.id,
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
    _insert(receipt)
    return receipt


def _insert(receipt: Receipt) -> None:
    """One INSERT of a new receipt, never an UPDATE (SPEC §7: append-only).

    Equivalent to ``receipt.save()`` (``AppendOnlyModel.save`` forces an insert) with each value prepared by its own
    model field, but without the ORM's per-call query building: this is the hot path of every verdict.
    """
    if not receipt._state.adding:  # pragma: no cover - receipt_issue only builds new receipts
        raise AppendOnlyError("a stored receipt cannot be inserted again")
    fields = Receipt._meta.concrete_fields
    quote = connection.ops.quote_name
    columns = ", ".join(quote(str(f.column)) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    values = [f.get_db_prep_save(getattr(receipt, f.attname), connection) for f in fields]
    sql = f"INSERT INTO {quote(Receipt._meta.db_table)} ({columns}) VALUES ({placeholders})"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
    receipt._state.adding = False
    receipt._state.db = connection.alias

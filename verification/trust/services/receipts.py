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

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from verification import pgwire
from verification.compiled import exchange, queue
from verification.db_guards import AppendOnlyError
from verification.errors import NotFound
from verification.kernel.chain import content_hash_of, is_hex_hash, sign_entry
from verification.kernel.errors import InvariantError
from verification.kernel.reasons import Reason
from verification.runs.models import Verification
from verification.trust import signing
from verification.trust.models import Receipt, ReceiptKind, SigningKey
from verification.trust.signing import SigningKeyUnavailable

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


@dataclass(frozen=True)
class HeldChain:
    """A chain its caller has locked (``SELECT ... FOR UPDATE`` on the verification row) and read after the lock
    was granted, in a statement of its own (the run path reads it with its other facts): the active key, the next
    seq and the head's hash. ``supersedes`` is the head of the chain the payload's ``supersedes_receipt_id`` names,
    as the caller read it (used only when it is that id; else it is looked up)."""

    key_id: str | None
    seq: int
    prev_hash: str | None
    supersedes: str | None = None


@dataclass(frozen=True)
class _Statements:
    """The hot path's SQL, built once per database vendor (plain SQL: the ORM's query building cost more than the
    queries themselves, and this runs once per receipt)."""

    lock: str
    state: str
    insert: str
    fields: tuple[Any, ...]


#: Per database vendor (the SQL depends on nothing else: the tables, the quoting, FOR UPDATE or not).
_STATEMENTS: dict[str, _Statements] = {}


def _statements(conn: BaseDatabaseWrapper) -> _Statements:
    found = _STATEMENTS.get(conn.vendor)
    if found is None:
        found = _STATEMENTS[conn.vendor] = _build_statements(conn)
    return found


def _build_statements(conn: BaseDatabaseWrapper) -> _Statements:
    quote = conn.ops.quote_name
    verifications, receipts, keys = (quote(m._meta.db_table) for m in (Verification, Receipt, SigningKey))
    for_update = " FOR UPDATE" if conn.features.has_select_for_update else ""
    head = f"FROM {receipts} WHERE verification_id = %s ORDER BY seq DESC LIMIT 1"
    fields = tuple(Receipt._meta.concrete_fields)
    columns = ", ".join(quote(str(f.column)) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    return _Statements(
        lock=f"SELECT rubric_hash, submission_hash FROM {verifications} WHERE id = %s{for_update}",  # noqa: S608
        state=f"SELECT key_id, (SELECT seq {head}), (SELECT content_hash {head}) FROM {keys} WHERE status = %s",  # noqa: S608
        insert=f"INSERT INTO {receipts} ({columns}) VALUES ({placeholders})",  # noqa: S608
        fields=fields,
    )


def _lock_chain(conn: BaseDatabaseWrapper, verification_pk: uuid.UUID) -> tuple[_Locked, str, int, str | None]:
    """Lock the chain and read its head and the active key: ``(verification, key_id, next seq, prev_hash)``.

    Serializes appends to one chain: ``SELECT ... FOR UPDATE`` on the verification row (PostgreSQL; SQLite's
    IMMEDIATE transactions already hold the database's write lock). The head is read by a second statement, after
    the lock is granted, so under READ COMMITTED (Django's default) it sees every receipt committed before; one
    statement could not (its snapshot would predate the wait). The unique (verification, seq) constraint backs this up.
    """
    sql = _statements(conn)
    pk = Verification._meta.get_field("id").get_db_prep_value(verification_pk, conn)
    active = SigningKey.Status.ACTIVE.value
    if conn.vendor == "postgresql":
        # One round trip, still two statements: pipelined, the server runs them one after the other, and the second
        # takes its READ COMMITTED snapshot when it starts, i.e. after the lock is granted. Server-side binding,
        # prepared when the connection allows it (settings: REVIEWPORTAL_DB_PREPARED_STATEMENTS): planning these two
        # statements costs more than running them.
        (locked_rows, state_rows), _ = exchange(
            conn, [pgwire.Statement(sql.lock, [pk], True), pgwire.Statement(sql.state, [pk, pk, active], True)]
        )
        found = locked_rows[0] if locked_rows else None
        head = state_rows[0] if state_rows else None
    else:
        with conn.cursor() as cursor:
            cursor.execute(sql.lock, [pk])
            found = cursor.fetchone()
            cursor.execute(sql.state, [pk, pk, active])
            head = cursor.fetchone()
    if found is None:
        raise NotFound(f"no verification {verification_pk}", verification_id=str(verification_pk))
    if head is None:
        raise SigningKeyUnavailable("no active signing key")
    key_id, head_seq, head_hash = head
    locked = _Locked(id=verification_pk, rubric_hash=found[0], submission_hash=found[1])
    return locked, key_id, (0 if head_seq is None else head_seq + 1), head_hash


@transaction.atomic
def receipt_issue(
    *,
    verification: Verification,
    kind: str,
    payload: Mapping[str, Any],
    created_at: datetime | None = None,
    superseded: Receipt | None = None,
) -> Receipt:
    """Sign ``payload`` as the next entry of ``verification``'s chain; see ``receipt_issue_held``."""
    return receipt_issue_held(
        verification=verification, kind=kind, payload=payload, created_at=created_at, superseded=superseded
    )


def receipt_issue_held(
    *,
    verification: Verification,
    kind: str,
    payload: Mapping[str, Any],
    created_at: datetime | None = None,
    superseded: Receipt | None = None,
    held: HeldChain | None = None,
) -> Receipt:
    """Sign ``payload`` as the next entry of ``verification``'s chain with the active key and store it.

    ``payload["kind"]`` is set to ``kind`` (a payload naming another kind is refused). The indexed columns
    (verdict, determination, authority, actor, supersedes_receipt_id) are copied from the payload; the envelope
    stays the record. ``superseded``: the receipt ``supersedes_receipt_id`` names when the caller has it loaded
    already (used only if its content hash is that id; else it is looked up). Raises ``SigningKeyUnavailable``
    (``no-signing-key``) without a usable active key.

    ``receipt_issue`` runs this in an atomic block of its own (a savepoint when nested); called directly, it runs in
    the transaction the caller holds (the run path: one round trip less), which must be open.
    """
    if not connections[DEFAULT_DB_ALIAS].in_atomic_block:
        raise InvariantError(Reason.MALFORMED_RECORD, "a receipt is issued inside a transaction")
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
    supersedes_id = body.get("supersedes_receipt_id")
    if held is not None and supersedes_id is not None and held.supersedes == supersedes_id:
        superseded_pk: str | None = supersedes_id  # read by the caller after its lock: no second look-up
    else:
        if superseded is None or superseded.content_hash != supersedes_id:
            superseded = _superseded(body)
        superseded_pk = superseded.content_hash if superseded is not None else None
    indexed = {name: _indexed_copy(body, name) for name in _INDEXED}

    conn = connections[DEFAULT_DB_ALIAS]  # the atomic block's connection, looked up once
    if held is None:
        locked, key_id, seq, prev_hash = _lock_chain(conn, verification.pk)
    else:
        if held.key_id is None:
            raise SigningKeyUnavailable("no active signing key")
        locked = _Locked(verification.pk, verification.rubric_hash, verification.submission_hash)
        key_id, seq, prev_hash = held.key_id, held.seq, held.prev_hash
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
        supersedes_receipt_id=superseded_pk,
        **indexed,
    )
    if superseded is not None and superseded.content_hash == superseded_pk:
        receipt.supersedes_receipt = superseded  # the loaded row, as before (no look-up on access)
    _insert(conn, receipt)
    return receipt


def _insert(conn: BaseDatabaseWrapper, receipt: Receipt) -> None:
    """One INSERT of a new receipt, never an UPDATE (SPEC §7: append-only).

    Equivalent to ``receipt.save()`` (``AppendOnlyModel.save`` forces an insert) with each value prepared by its own
    model field, but without the ORM's per-call query building: this is the hot path of every verdict. On PostgreSQL
    the values are bound server-side (the envelope is not quoted into the SQL text) and the statement is prepared
    when the connection allows it.
    """
    if not receipt._state.adding:  # pragma: no cover - receipt_issue only builds new receipts
        raise AppendOnlyError("a stored receipt cannot be inserted again")
    sql = _statements(conn)
    values = [f.get_db_prep_save(getattr(receipt, f.attname), conn) for f in sql.fields]
    queue(conn.alias, sql.insert, values, rows=False, then=None)  # with the run's other writes (``writes_batched``)
    receipt._state.adding = False
    receipt._state.db = conn.alias

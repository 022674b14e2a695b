"""The audit's Merkle tree (SPEC §8): leaf positions for receipts and records, and the streaming check against the
last trusted checkpoint (``kernel.merkle.StreamingTree``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Final

from django.db import connection, transaction
from django.db.models import Max, OuterRef, Subquery

from verification.kernel.canonical import canonicalize
from verification.kernel.chain import format_created_at
from verification.kernel.checkpoint import Checkpoint
from verification.kernel.findings import FindingKind
from verification.kernel.merkle import StreamingTree, leaf_hash, verify_consistency
from verification.kernel.reasons import Reason
from verification.reviews.models import Finding, FindingEvent
from verification.trust.models import AuditLeaf, AuditRecordLeaf, PinEntry, Receipt, SecurityLogEntry
from verification.trust.services.audit_report import CHUNK, AuditReport, Problem

#: How many changed positions a checkpoint-inconsistent finding names.
SHOWN_CHANGES: Final = 5


_AUDIT_LOCK: Final = 8_200_308_003  # pg_advisory_xact_lock key of the leaf table (any fixed bigint)


_EMPTY_LEAF_DATA: Final = b""  # the leaf of a position whose receipt is gone (never a 32-byte content hash)


def _lock_leaves() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_AUDIT_LOCK])


_REGISTER_SQL: Final = """
INSERT INTO verification_auditleaf (position, verification_id, seq, content_hash, added_at)
SELECT %s + ROW_NUMBER() OVER (ORDER BY r.created_at, r.verification_id, r.seq) - 1,
       r.verification_id, r.seq, r.content_hash, %s
FROM verification_receipt r
WHERE NOT EXISTS (
    SELECT 1 FROM verification_auditleaf l WHERE l.verification_id = r.verification_id AND l.seq = r.seq
)
"""


#: The records other than receipts that are leaves of the tree (SPEC §8: deleting or truncating them is detected like a
#: deleted receipt), and the columns of each leaf's stable encoding (``record_leaf``), fixed here so that a later
#: column does not change old leaves.
RECORD_KINDS: Final[dict[str, tuple[Any, tuple[str, ...]]]] = {
    "finding": (
        Finding,
        (
            "id",
            "kind",
            "reason",
            "subject",
            "verification_id",
            "evidence_id",
            "refs",
            "receipt_refs",
            "detail",
            "dedupe_key",
            "created_at",
        ),
    ),
    "finding-event": (FindingEvent, ("id", "finding_id", "action", "actor_id", "rationale", "created_at")),
    "security-log": (
        SecurityLogEntry,
        ("id", "kind", "created_at", "user_id", "actor_label", "target", "ip_address", "detail"),
    ),
    "pin-log": (
        PinEntry,
        (
            "id",
            "action",
            "purpose",
            "key_id",
            "jwk",
            "fingerprint",
            "actor_user_id",
            "actor_label",
            "created_at",
            "channel",
            "note",
            "reason",
        ),
    ),
}


RECORD_LEAF_DOMAIN: Final = "reviewportal/audit-record-leaf/1:"


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_created_at(value)
    if value is None or isinstance(value, (str, bool, int, list, dict)):
        return value
    return str(value)  # UUIDs, IP addresses


def record_leaf(kind: str, values: tuple[Any, ...]) -> str:
    """The leaf encoding of one record: sha256 hex of the domain, then the canonical JSON of [kind, *columns]."""
    import hashlib

    return hashlib.sha256(
        RECORD_LEAF_DOMAIN.encode("ascii") + canonicalize([kind, *(_plain(v) for v in values)])
    ).hexdigest()


def _records_now(kind: str) -> dict[int, str]:
    """Every record of ``kind`` found now, id -> leaf encoding."""
    model, columns = RECORD_KINDS[kind]
    return {
        int(row[0]): record_leaf(kind, row)
        for row in model._base_manager.order_by("id").values_list(*columns).iterator(chunk_size=CHUNK)
    }


def _register_records(position: int, now: datetime) -> int:
    """Give every record not yet in the tree the next positions (kind by kind, by id); inside the leaf lock."""
    added = 0
    rows: list[AuditRecordLeaf] = []
    for kind, (model, columns) in RECORD_KINDS.items():
        seen = AuditRecordLeaf.objects.filter(kind=kind).values("ref")
        new = model._base_manager.exclude(id__in=seen).order_by("id").values_list(*columns)
        for values in new.iterator(chunk_size=CHUNK):
            rows.append(
                AuditRecordLeaf(
                    position=position + added,
                    kind=kind,
                    ref=int(values[0]),
                    digest=record_leaf(kind, values),
                    added_at=now,
                )
            )
            added += 1
    AuditRecordLeaf.objects.bulk_create(rows, batch_size=CHUNK)
    return added


def _top_position() -> int:
    """The next free position of the tree (receipt and record leaves share one sequence)."""
    tops = [
        AuditLeaf.objects.aggregate(top=Max("position"))["top"],
        AuditRecordLeaf.objects.aggregate(top=Max("position"))["top"],
    ]
    known = [int(t) for t in tops if t is not None]
    return max(known) + 1 if known else 0


def register_leaves(now: datetime) -> int:
    """Give every receipt not yet in the tree the next positions, in (created_at, verification, seq) order.

    One ``INSERT … SELECT`` numbering the new receipts with ``ROW_NUMBER()`` (PostgreSQL, and SQLite ≥ 3.25), under
    the leaf lock, in one transaction: the database does the work, nothing is held in memory here."""
    with transaction.atomic():
        _lock_leaves()
        position = _top_position()
        added_at = AuditLeaf._meta.get_field("added_at").get_db_prep_value(now, connection)
        with connection.cursor() as cursor:
            cursor.execute(_REGISTER_SQL, [position, added_at])
            receipts = max(0, int(cursor.rowcount))
        return receipts + _register_records(_top_position(), now)


def _leaf_rows() -> Iterator[tuple[int, Any, int, str, str | None]]:
    current = Receipt.objects.filter(verification_id=OuterRef("verification_id"), seq=OuterRef("seq"))
    return (
        AuditLeaf.objects.order_by("position")
        .annotate(current=Subquery(current.values("content_hash")[:1]))
        .values_list("position", "verification_id", "seq", "content_hash", "current")
        .iterator(chunk_size=CHUNK)
    )


def _leaf_data(content_hash: str | None) -> bytes:
    if content_hash is None:
        return _EMPTY_LEAF_DATA
    try:
        return bytes.fromhex(content_hash)
    except ValueError:
        return content_hash.encode("utf-8")


def _all_leaf_rows() -> Iterator[tuple[int, Any, Any, str, str | None, bytes | None]]:
    """Every position in order: receipt leaves ``(position, vid, seq, recorded, current, None)`` merged with record
    leaves ``(position, kind, ref, recorded, current, data)`` (``data``: the leaf data, b"" for a record gone)."""
    import heapq

    now = {kind: _records_now(kind) for kind in RECORD_KINDS}

    def records() -> Iterator[tuple[int, Any, Any, str, str | None, bytes | None]]:
        rows = AuditRecordLeaf.objects.order_by("position").values_list("position", "kind", "ref", "digest")
        for position, kind, ref, digest in rows.iterator(chunk_size=CHUNK):
            current = now.get(kind, {}).get(int(ref))
            yield position, kind, ref, digest, current, bytes.fromhex(current) if current else _EMPTY_LEAF_DATA

    receipts = ((p, v, q, r, c, None) for p, v, q, r, c in _leaf_rows())
    return heapq.merge(receipts, records(), key=lambda row: row[0])


def check_tree(checkpoint: Checkpoint | None, report: AuditReport) -> bool:
    """Build the tree, check it against the last trusted checkpoint; True when a new checkpoint may be written."""
    size = AuditLeaf.objects.count() + AuditRecordLeaf.objects.count()
    old_size = checkpoint.tree_size if checkpoint is not None else 0
    tree = StreamingTree(min(old_size, size), size)
    changed: list[str] = []
    sound = True
    for index, (position, vid, seq, recorded, current, record_data) in enumerate(_all_leaf_rows()):
        if position != index:
            report.problems.append(
                Problem(
                    FindingKind.TAMPER,
                    Reason.CHECKPOINT_INCONSISTENT,
                    ("audit-tree", f"position {index}", "gap"),
                    f"the audit's leaf positions have a gap at {index} (found {position}): leaf rows were removed",
                )
            )
            sound = False
        if record_data is not None:  # a finding, finding event, security-log or pin-log entry
            if current is None:
                sound = False
                if len(changed) < SHOWN_CHANGES:
                    changed.append(f"position {index}: {vid} {seq} is gone")
            elif current != recorded and index < old_size and len(changed) < SHOWN_CHANGES:
                changed.append(f"position {index}: {vid} {seq} was changed")
            tree.append(leaf_hash(record_data))
            continue
        if current is None:
            report.problems.append(
                Problem(
                    FindingKind.TAMPER,
                    Reason.RECEIPT_MISSING,
                    (str(vid), f"seq {seq}", Reason.RECEIPT_MISSING.value),
                    f"the receipt at seq {seq} of {vid} (tree position {position}, {recorded}) is gone",
                    verification_id=str(vid),
                    seq=seq,
                    receipt_id=recorded,
                )
            )
            sound = False
        elif current != recorded and index < old_size and len(changed) < SHOWN_CHANGES:
            changed.append(f"position {index}: {vid} seq {seq} was {recorded[:16]}…, now {current[:16]}…")
        tree.append(leaf_hash(_leaf_data(current)))
    report.tree_size = tree.size
    report.root_hash = tree.root().hex()
    if checkpoint is None:
        report.consistent = None
        return sound
    if old_size > size:
        report.consistent = False
        detail = f"the checkpoint holds {old_size} leaves, the tree now only {size}"
    else:
        report.consistent = verify_consistency(old_size, size, checkpoint.root_bytes, tree.root(), tree.proof())
        detail = (
            f"the tree of {size} leaves is not an append-only extension of checkpoint line {checkpoint.line} "
            f"({old_size} leaves, root {checkpoint.root_hash})"
        )
        if changed:
            detail += "; changed: " + "; ".join(changed)
    if not report.consistent:
        report.problems.append(
            Problem(
                FindingKind.TAMPER,
                Reason.CHECKPOINT_INCONSISTENT,
                ("checkpoint", f"{old_size}:{checkpoint.root_hash}", Reason.CHECKPOINT_INCONSISTENT.value),
                detail,
            )
        )
        return False
    return sound

"""The continuous audit (issue 7 §5; SPEC §7 "Strict verification", §8 "External checkpoints", §10 findings).

``audit_run()`` is the one entry point: ``manage.py audit_chains`` and the Celery beat task
``verification.audit_chains`` only call it. One run:

1. **Leaves.** Every receipt the audit has not seen yet gets the next position of an append-only RFC 6962 Merkle tree
   (``AuditLeaf``). Order: a receipt's position is assigned once, when an audit first sees it; the receipts new to
   one run are taken in (signed ``created_at``, verification id, seq) order. Receipts can be signed with a past
   ``created_at`` (a backdated run), so the signed time alone would not give an append-only order; the first-seen
   position does, and it never changes. The leaf *data* is the 32 bytes of the content hash of the receipt found
   **now** at that position's (verification, seq) — a rewritten receipt changes its leaf, a deleted one leaves an
   empty leaf (``receipt-missing``).
2. **Chains.** Every chain is re-verified with the strict verifier (``kernel.verifier.verify_report``), streamed in
   (verification, seq) order, one chain in memory at a time: keys from the pin log (proof-signing), the stored head
   as the trusted head, the verification's own id and submission hash. The verifier is handed the pinned keys with
   their revocation marks lifted, and the audit reports revocation itself: a chain with an entry signed by a since-
   revoked key is a *revoked-key* finding (SPEC §8: not tampering), and any other failure in it is still found.
   Any failure is a *tamper* finding naming the verification, the entry (seq) and the code.
3. **Keys.** Every signing key of the portal is checked against the pin log: its id derives from its bytes
   (``kid-mismatch``), it is in the pin log for proof-signing (``unknown-key``: e.g. a key inserted straight into
   the keys table), and its revocation agrees with the pin log (``key-state-mismatch``).
4. **Checkpoint.** The tree over all leaves is computed in one streaming pass with O(log² n) memory, together with
   the RFC 6962 consistency proof from the last trusted checkpoint's size (``consistency_proof_ranges``); the proof
   is checked with ``kernel.merkle.verify_consistency`` against the checkpoint's root. Inconsistent: a tamper finding
   (``checkpoint-inconsistent``) and no new checkpoint — the audit keeps comparing with the last good one. Otherwise,
   when the tree grew, a signed tree head is appended to the checkpoint log, a file outside the database
   (``settings.REVIEWPORTAL_CHECKPOINT_LOG``, default ``<var>/checkpoints.log``).

A checkpoint line is the RFC 8785 JSON of ``{format, tree_size, root_hash, timestamp, key_id, signature}``; the
signature is Ed25519 by the portal's active key over ``acretix-verify/checkpoint-sig/1:`` followed by the canonical
JSON of the other five fields (its own domain: a checkpoint signature can never pass for a receipt's, whose domain is
``acretix-verify/proof-sig/2:``). A line is trusted when its signature verifies under one of the portal's own keys
that is pinned for proof-signing and not revoked; a malformed or forged line is a tamper finding
(``malformed-checkpoint``, ``unknown-key``, ``signature-failure``); lines signed by a since-revoked key are set aside.

Findings are raised through ``services.findings.finding_raise``, whose dedupe key is the finding's kind and refs: the
same state found again raises nothing new (the audit is idempotent). Runs are serialized by an exclusive lock on
``<checkpoint log>.lock``; a second run while one holds it returns at once with ``skipped``.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import itertools
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, OuterRef, Subquery
from django.utils import timezone

from verification.kernel.canonical import canonical_text, canonicalize, loads_strict
from verification.kernel.chain import ALGO, FORMAT, JWKS_URI, SIGNING_DOMAIN, format_created_at
from verification.kernel.contracts import subject_key
from verification.kernel.errors import KernelError
from verification.kernel.findings import Finding as KernelFinding
from verification.kernel.findings import FindingKind
from verification.kernel.journal import JournalState
from verification.kernel.keys import PrivateKey, PublicKey
from verification.kernel.merkle import CompactTree, leaf_hash, verify_consistency
from verification.kernel.reasons import Reason, explain
from verification.kernel.verifier import STEP_NAMES, TrustedKey, verify_report
from verification.reviews.models import Finding, FindingEvent
from verification.reviews.services.findings import finding_raise
from verification.runs.models import Verification
from verification.trust import root as trust
from verification.trust import signing
from verification.trust.models import (
    AuditLeaf,
    AuditRecordLeaf,
    AuditRun,
    PinEntry,
    PinPurpose,
    Receipt,
    SecurityEventKind,
    SecurityLogEntry,
    SigningKey,
)
from verification.trust.services.security_log import require_permission, security_log_record
from verification.trust.signing import SigningKeyUnavailable

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT: Final = "acretix-verify/checkpoint/1"
CHECKPOINT_DOMAIN: Final = "acretix-verify/checkpoint-sig/1:"
CHECKPOINT_FILENAME: Final = "checkpoints.log"
CHECKPOINT_FIELDS: Final = ("format", "tree_size", "root_hash", "timestamp", "key_id", "signature")
AUDIT_LABEL: Final = "system: audit_chains"
#: Rows fetched per round trip while streaming (chains, leaves).
CHUNK: Final = 2000
#: How many changed positions a checkpoint-inconsistent finding names.
SHOWN_CHANGES: Final = 5
_AUDIT_LOCK: Final = 8_200_308_003  # pg_advisory_xact_lock key of the leaf table (any fixed bigint)
_EMPTY_LEAF_DATA: Final = b""  # the leaf of a position whose receipt is gone (never a 32-byte content hash)


# --- the checkpoint log ----------------------------------------------------------------------------------------------


def checkpoint_log_path() -> Path:
    """``settings.REVIEWPORTAL_CHECKPOINT_LOG``, else ``<VAR_DIR>/checkpoints.log`` (resolved on every call)."""
    configured = getattr(settings, "REVIEWPORTAL_CHECKPOINT_LOG", None)
    if configured:
        return Path(configured)
    return Path(settings.VAR_DIR) / CHECKPOINT_FILENAME


@dataclass(frozen=True)
class Checkpoint:
    """A signed tree head as it stands in the checkpoint log (``line`` is 1-based)."""

    tree_size: int
    root_hash: str
    timestamp: str
    key_id: str
    signature: str
    line: int = 0

    def body(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "timestamp": self.timestamp,
            "key_id": self.key_id,
        }

    def as_line(self) -> str:
        return canonical_text({**self.body(), "signature": self.signature})

    @property
    def root_bytes(self) -> bytes:
        return bytes.fromhex(self.root_hash)


class CheckpointRefused(KernelError):
    """A checkpoint-log line that is not a trusted signed tree head (its reason says why)."""


def checkpoint_message(body: Mapping[str, Any]) -> bytes:
    """What a checkpoint signature covers: the checkpoint domain, then the canonical JSON of the unsigned fields."""
    return CHECKPOINT_DOMAIN.encode("ascii") + canonicalize(dict(body))


def sign_checkpoint(*, private_key: PrivateKey, tree_size: int, root_hash: str, timestamp: datetime) -> Checkpoint:
    """A tree head signed by ``private_key`` under the checkpoint domain."""
    unsigned = Checkpoint(tree_size, root_hash, format_created_at(timestamp), private_key.public_key.key_id, "")
    signature = private_key.sign(checkpoint_message(unsigned.body()))
    return Checkpoint(
        tree_size, root_hash, unsigned.timestamp, unsigned.key_id, base64.b64encode(signature).decode("ascii")
    )


def parse_checkpoint(text: str, *, line: int = 0) -> Checkpoint:
    """A checkpoint line, strictly: exactly the six fields, of the right types; ``malformed-checkpoint`` otherwise.

    The signature is not checked here (``verify_checkpoint``)."""
    try:
        doc = loads_strict(text)
    except KernelError as exc:
        raise CheckpointRefused(Reason.MALFORMED_CHECKPOINT, f"line {line}: not strict JSON ({exc.reason})") from None
    if not isinstance(doc, dict) or sorted(doc) != sorted(CHECKPOINT_FIELDS):
        raise CheckpointRefused(Reason.MALFORMED_CHECKPOINT, f"line {line}: expected exactly {CHECKPOINT_FIELDS}")
    size, root, stamp, key_id, signature = (
        doc["tree_size"], doc["root_hash"], doc["timestamp"], doc["key_id"], doc["signature"]
    )
    well_formed = (
        doc["format"] == CHECKPOINT_FORMAT
        and isinstance(size, int) and not isinstance(size, bool) and size >= 0
        and isinstance(root, str) and len(root) == 64 and all(c in "0123456789abcdef" for c in root)
        and all(isinstance(v, str) for v in (stamp, key_id, signature))
    )
    if not well_formed:
        raise CheckpointRefused(Reason.MALFORMED_CHECKPOINT, f"line {line}: a field has the wrong form")
    return Checkpoint(size, root, stamp, key_id, signature, line)


def verify_checkpoint(checkpoint: Checkpoint, key: PublicKey) -> bool:
    """True iff the checkpoint's signature verifies under ``key`` (whose id it names)."""
    if key.key_id != checkpoint.key_id:
        return False
    try:
        signature = base64.b64decode(checkpoint.signature, validate=True)
    except (binascii.Error, ValueError):
        return False
    return key.verify(signature, checkpoint_message(checkpoint.body()))


def append_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Append one line (O_APPEND, then fsync): the log is only ever added to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (checkpoint.as_line() + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_checkpoints(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of the log; nothing when the file does not exist yet."""
    try:
        handle = path.open("r", encoding="utf-8", errors="replace", newline="\n")
    except FileNotFoundError:
        return
    with handle:
        for number, text in enumerate(handle, start=1):
            stripped = text.rstrip("\n")
            if stripped.strip():
                yield number, stripped


# --- what the audit finds --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing the audit found. ``refs`` identify the state: the same state found again is the same finding."""

    kind: FindingKind
    code: Reason
    refs: tuple[str, ...]
    detail: str
    verification_id: str | None = None
    seq: int | None = None
    receipt_id: str | None = None
    step: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "code": self.code.value,
            "refs": list(self.refs),
            "detail": self.detail,
            "verification_id": self.verification_id,
            "seq": self.seq,
            "step": self.step,
        }


@dataclass
class AuditReport:
    """The outcome of one run (also recorded as an ``AuditRun``)."""

    started_at: datetime
    finished_at: datetime | None = None
    chains: int = 0
    receipts: int = 0
    leaves_added: int = 0
    tree_size: int = 0
    root_hash: str = ""
    checkpoint: Checkpoint | None = None  # the last trusted checkpoint compared with
    consistent: bool | None = None  # None: no trusted checkpoint to compare with
    written: Checkpoint | None = None  # the checkpoint this run appended
    problems: list[Problem] = field(default_factory=list)
    findings_raised: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: bool = False
    run_id: int | None = None

    @property
    def tamper(self) -> list[Problem]:
        return [p for p in self.problems if p.kind is FindingKind.TAMPER]

    @property
    def revoked(self) -> list[Problem]:
        return [p for p in self.problems if p.kind is FindingKind.REVOKED_KEY]

    @property
    def ok(self) -> bool:
        """No tampering found (chains signed by a revoked key are findings of their own kind, SPEC §8)."""
        return not self.skipped and not self.tamper

    def summary(self) -> dict[str, Any]:
        """A JSON-able summary (the Celery task's result, ``audit_chains --json``)."""
        return {
            "ok": self.ok,
            "skipped": self.skipped,
            "chains": self.chains,
            "receipts": self.receipts,
            "leaves_added": self.leaves_added,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "checkpoint_size": self.checkpoint.tree_size if self.checkpoint else None,
            "consistent": self.consistent,
            "checkpoint_written": self.written.as_line() if self.written else None,
            "findings_raised": self.findings_raised,
            "problems": [p.as_json() for p in self.problems],
            "notes": list(self.notes),
            "run_id": self.run_id,
        }


# --- the streaming consistency proof -------------------------------------------------------------------------------


def _split(n: int) -> int:
    """RFC 6962's split point: the largest power of two strictly below ``n`` (n ≥ 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def consistency_proof_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """The leaf ranges ``[lo, hi)`` whose subtree roots, in order, are RFC 6962 §2.1.2's PROOF(m, D[n]).

    The same walk as ``kernel.merkle.consistency_proof_from_hashes``, over sizes only, so the proof can be computed
    while the leaves stream past (the ranges are disjoint). Empty for m == 0 or m == n.
    """
    if not 0 <= old_size <= new_size:
        raise ValueError("old size outside the tree")
    if old_size in (0, new_size):
        return []
    ranges: list[tuple[int, int]] = []
    lo, hi, m, complete = 0, new_size, old_size, True
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    if not complete:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


class StreamingTree:
    """The root of all leaves, the root of the first ``old_size``, and PROOF(old_size, D[new_size]), in one pass.

    Memory: one compact tree for the whole and one per proof range (O(log n) ranges of O(log n) hashes each).
    """

    def __init__(self, old_size: int, new_size: int) -> None:
        self.old_size = old_size
        self.new_size = new_size
        self._all = CompactTree()
        self._old_root: bytes | None = None
        self._ranges = consistency_proof_ranges(old_size, new_size)
        # Feed each leaf to the range that holds it: ranges are disjoint, so keep them sorted by start.
        self._trees = [CompactTree() for _ in self._ranges]
        self._by_start = sorted(range(len(self._ranges)), key=lambda i: self._ranges[i][0])
        self._cursor = 0

    @property
    def size(self) -> int:
        return self._all.size

    def append(self, leaf: bytes) -> None:
        """Append one leaf hash (32 bytes)."""
        index = self._all.size
        self._all.append(leaf)
        if self._all.size == self.old_size:
            self._old_root = self._all.root()
        while self._cursor < len(self._by_start) and self._ranges[self._by_start[self._cursor]][1] <= index:
            self._cursor += 1
        if self._cursor < len(self._by_start):
            i = self._by_start[self._cursor]
            lo, hi = self._ranges[i]
            if lo <= index < hi:
                self._trees[i].append(leaf)

    def root(self) -> bytes:
        return self._all.root()

    def old_root(self) -> bytes | None:
        """The root over the first ``old_size`` leaves, once that many were appended."""
        return self._old_root

    def proof(self) -> list[bytes]:
        """PROOF(old_size, D[new_size]); call after all ``new_size`` leaves were appended."""
        if self._all.size != self.new_size:
            raise ValueError(f"{self._all.size} leaves appended, {self.new_size} expected")
        return [tree.root() for tree in self._trees]


# --- the run ------------------------------------------------------------------------------------------------------


@contextmanager
def _exclusive(path: Path) -> Iterator[bool]:
    """An exclusive, non-blocking lock on ``<checkpoint log>.lock``; yields False when another run holds it."""
    lock_path = path.with_name(path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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
    "finding": (Finding, ("id", "kind", "reason", "subject", "verification_id", "evidence_id", "refs",
                          "receipt_refs", "detail", "dedupe_key", "created_at")),
    "finding-event": (FindingEvent, ("id", "finding_id", "action", "actor_id", "rationale", "created_at")),
    "security-log": (SecurityLogEntry, ("id", "kind", "created_at", "user_id", "actor_label", "target",
                                        "ip_address", "detail")),
    "pin-log": (PinEntry, ("id", "action", "purpose", "key_id", "jwk", "fingerprint", "actor_user_id",
                           "actor_label", "created_at", "channel", "note", "reason")),
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
            rows.append(AuditRecordLeaf(position=position + added, kind=kind, ref=int(values[0]),
                                        digest=record_leaf(kind, values), added_at=now))
            added += 1
    AuditRecordLeaf.objects.bulk_create(rows, batch_size=CHUNK)
    return added


def _top_position() -> int:
    """The next free position of the tree (receipt and record leaves share one sequence)."""
    tops = [AuditLeaf.objects.aggregate(top=Max("position"))["top"],
            AuditRecordLeaf.objects.aggregate(top=Max("position"))["top"]]
    known = [int(t) for t in tops if t is not None]
    return max(known) + 1 if known else 0


def _register_leaves(now: datetime) -> int:
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


def _trusted_checkpoint(path: Path, keys: Mapping[str, TrustedKey], report: AuditReport) -> Checkpoint | None:
    """The last line of the log signed by a portal key trusted for proof-signing (``trust.trusted_keys``), not revoked.

    A malformed line, or one whose key is unknown or whose signature fails, is a tamper problem and set aside; a line
    signed by a since-revoked key is set aside with a note (nothing it says can be trusted any more)."""
    own = {k.key.key_id for k in trust.own_keys()}
    last: Checkpoint | None = None
    set_aside_revoked = 0
    present: set[tuple[int, str]] = set()
    for number, text in read_checkpoints(path):
        try:
            checkpoint = parse_checkpoint(text, line=number)
        except CheckpointRefused as exc:
            report.problems.append(_log_problem(number, exc.reason, exc.detail))
            continue
        present.add((checkpoint.tree_size, checkpoint.root_hash))
        entry = keys.get(checkpoint.key_id)
        if checkpoint.key_id not in own or entry is None:
            report.problems.append(
                _log_problem(number, Reason.UNKNOWN_KEY, f"line {number}: signed by {checkpoint.key_id!r}, not a "
                             "portal key pinned for proof-signing")
            )
            continue
        if not verify_checkpoint(checkpoint, entry.key):
            report.problems.append(
                _log_problem(number, Reason.SIGNATURE_FAILURE, f"line {number}: the signature does not verify")
            )
            continue
        if entry.revoked:
            set_aside_revoked += 1
            continue
        if last is not None and checkpoint.tree_size < last.tree_size:
            report.problems.append(
                _log_problem(number, Reason.CHECKPOINT_INCONSISTENT, f"line {number}: the tree shrank from "
                             f"{last.tree_size} to {checkpoint.tree_size} leaves")
            )
            continue
        last = checkpoint
    # The database remembers the last checkpoint an audit wrote: a log that lost it was cut or replaced.
    written = AuditRun.objects.filter(checkpoint_written=True).order_by("-id").first()
    if written is not None and (written.tree_size, written.root_hash) not in present:
        report.problems.append(
            Problem(
                FindingKind.TAMPER,
                Reason.CHECKPOINT_INCONSISTENT,
                ("checkpoint-log", "missing", f"{written.tree_size}:{written.root_hash}"),
                f"audit run {written.pk} appended a checkpoint of {written.tree_size} leaves (root "
                f"{written.root_hash}) that {path} no longer holds: lines were removed or the log was replaced",
            )
        )
    if set_aside_revoked:
        report.notes.append(
            f"{set_aside_revoked} checkpoint(s) signed by a since-revoked key were set aside (SPEC §8: nothing "
            "signed by a revoked key is trusted)"
        )
    return last


def _log_problem(line: int, code: Reason, detail: str) -> Problem:
    return Problem(FindingKind.TAMPER, code, ("checkpoint-log", f"line {line}", code.value), detail)


def _audit_keys(report: AuditReport) -> tuple[JournalState | None, dict[str, TrustedKey], dict[str, TrustedKey]]:
    """The trust root (SPEC §8: the pin journal and the portal's private key material, never the database): the
    journal, the proof-signing keys with revocation lifted (the audit reports revocation itself), and the same keys
    as trusted. A journal that does not verify is a tamper problem and trusts nothing but the portal's own keys."""
    state, error = trust.journal_state()
    if error is not None:
        report.problems.append(
            Problem(FindingKind.TAMPER, Reason.PIN_JOURNAL_INVALID, ("pin-journal", Reason.PIN_JOURNAL_INVALID.value),
                    f"{trust.journal_path()}: {error.detail}")
        )
    trusted = dict(trust.trusted_keys(PinPurpose.PROOF_SIGNING.value))
    lifted = {key_id: TrustedKey(k.key, revoked=False) for key_id, k in trusted.items()}
    return state, lifted, trusted


_CHAIN_COLUMNS: Final = (
    "verification_id",
    "seq",
    "key_id",
    "prev_hash",
    "content_hash",
    "signature",
    "envelope",
    "verification__submission_hash",
)


def _subject(task_id: Any, cycle: Any) -> str:
    if task_id is None:
        return ""
    return subject_key(task_id=str(task_id), cycle=int(cycle or 1))


def _revocation(state: JournalState | None, key_id: str) -> tuple[str, str]:
    known = state.keys.get(key_id) if state is not None else None
    if known is None or known.revoked_at is None:
        return "", ""
    return known.revoked_at, known.revoked_reason


def _cached_states() -> dict[str, tuple[Any, Any, bool, bool]]:
    """The queue's cached columns of every verification whose cache was written (verdict set): id -> (verdict,
    determination, flagged, human_decided). A bare row (no cache written yet) is not compared."""
    rows = Verification.objects.filter(verdict__isnull=False).values_list(
        "pk", "verdict", "determination", "flagged", "human_decided"
    )
    return {str(pk): (verdict, determination, bool(flagged), bool(human)) for pk, verdict, determination, flagged, human
            in rows.iterator(chunk_size=CHUNK)}


def _any_decision(envelopes: list[str]) -> bool:
    for envelope in envelopes:
        try:
            payload = loads_strict(envelope)["payload"]
        except (KernelError, KeyError, TypeError):
            continue
        if isinstance(payload, Mapping) and payload.get("kind") == "decision":
            return True
    return False


def _cache_mismatch(cached: tuple[Any, Any, bool, bool], envelopes: list[str]) -> str | None:
    """How the cached columns disagree with the head receipt they derive from (SPEC §7: the receipt is the truth)."""
    verdict, determination, flagged, human_decided = cached
    try:
        head = loads_strict(envelopes[-1])["payload"]
    except (KernelError, KeyError, TypeError, AttributeError):
        return None  # a malformed envelope is the chain check's finding
    if not isinstance(head, Mapping):
        return None
    wrong = []
    if head.get("verdict") != verdict:
        wrong.append(f"verdict {verdict!r}, head {head.get('verdict')!r}")
    if head.get("determination") != determination:
        wrong.append(f"determination {determination!r}, head {head.get('determination')!r}")
    if head.get("kind") == "decision":
        if not human_decided or flagged:
            wrong.append(f"human_decided {human_decided}, flagged {flagged} under a decision head")
    else:
        if bool(head.get("flagged")) != flagged:
            wrong.append(f"flagged {flagged}, head {bool(head.get('flagged'))}")
        if human_decided and not _any_decision(envelopes[:-1]):
            wrong.append("human_decided without any decision receipt")
    return "; ".join(wrong) or None


def _check_chains(
    keys: Mapping[str, TrustedKey], revoked: set[str], state: JournalState | None, report: AuditReport
) -> None:
    caches = _cached_states()
    rows = Receipt.objects.order_by("verification_id", "seq").values_list(*_CHAIN_COLUMNS).iterator(chunk_size=CHUNK)
    for verification_id, group in itertools.groupby(rows, key=lambda row: row[0]):
        chain = list(group)
        report.chains += 1
        report.receipts += len(chain)
        vid = str(verification_id)
        first = chain[0]
        entries = [
            {
                "seq": seq,
                "key_id": key_id,
                "algo": ALGO,
                "format": FORMAT,
                "prev_hash": prev_hash,
                "content_hash": content_hash,
                "signature": signature,
                "envelope": envelope,
            }
            for _, seq, key_id, prev_hash, content_hash, signature, envelope, _ in chain
        ]
        head = entries[-1]["content_hash"]  # the stored head (SPEC §7: the caller's trusted head)
        proof = {
            "verification_id": vid,
            "format": FORMAT,
            "signing_domain": SIGNING_DOMAIN,
            "jwks_uri": JWKS_URI,
            "proof_head_hash": head,
            "entries": entries,
        }
        result = verify_report(
            proof, keys=keys, trusted_head=head, expected_verification_id=vid, expected_submission_hash=first[7]
        )
        cached = caches.get(vid)
        mismatch = _cache_mismatch(cached, [e["envelope"] for e in entries]) if cached is not None else None
        if mismatch is not None:
            report.problems.append(
                Problem(
                    FindingKind.TAMPER,
                    Reason.CACHED_STATE_MISMATCH,
                    (vid, f"head {head}", Reason.CACHED_STATE_MISMATCH.value),
                    f"the queue's columns disagree with the head receipt (seq {entries[-1]['seq']}): {mismatch}",
                    verification_id=vid,
                    seq=entries[-1]["seq"],
                    receipt_id=head,
                )
            )
        for key_id in sorted({e["key_id"] for e in entries} & revoked):
            revoked_at, revoked_reason = _revocation(state, key_id)
            signed = [e["seq"] for e in entries if e["key_id"] == key_id]
            report.problems.append(
                Problem(
                    FindingKind.REVOKED_KEY,
                    Reason.FINDING_REVOKED_KEY,
                    (vid, key_id),
                    f"seq {', '.join(map(str, signed))} signed by {key_id}, revoked at {revoked_at}: {revoked_reason}",
                    verification_id=vid,
                    seq=signed[0],
                    receipt_id=next(e["content_hash"] for e in entries if e["key_id"] == key_id),
                )
            )
        if result.ok:
            continue
        code = result.reason or Reason.MALFORMED_PROOF
        if code is Reason.UNKNOWN_KEY:
            # Every receipt names a key the database lists (a foreign key): one the trust root does not know is a
            # key that only the database vouches for (SPEC §8).
            code = Reason.KEY_NOT_IN_PIN_JOURNAL
        seq = result.failed_seq
        where = f"seq {seq}" if seq is not None else "the proof"
        receipt_id = next((e["content_hash"] for e in entries if e["seq"] == seq), None)
        step = result.failed_step
        step_name = STEP_NAMES[step] if step is not None else ""
        report.problems.append(
            Problem(
                FindingKind.TAMPER,
                code,
                (vid, where, code.value),
                f"step {step} ({step_name}) failed at {where}: {code.value} — {explain(code)} {result.detail}".strip(),
                verification_id=vid,
                seq=seq,
                receipt_id=receipt_id,
                step=step,
            )
        )


def _key_problem(key_id: str, code: Reason, detail: str) -> Problem:
    return Problem(FindingKind.TAMPER, code, ("signing-key", key_id, code.value), detail)


def _check_keys(state: JournalState | None, report: AuditReport) -> None:
    """Every signing key and pin the database lists against the pin journal (SPEC §8: the database is its cache)."""
    own = {k.key.key_id: k for k in trust.own_keys()}
    journal_keys = state.keys if state is not None else {}
    for row in SigningKey.objects.order_by("created_at", "key_id"):
        try:
            key = PublicKey.from_raw(bytes(row.public_key))
        except KernelError as exc:
            report.problems.append(_key_problem(row.key_id, exc.reason, f"{row.key_id}: {exc.detail}"))
            continue
        if key.key_id != row.key_id or key.fingerprint != row.fingerprint:
            report.problems.append(
                _key_problem(row.key_id, Reason.KID_MISMATCH, f"{row.key_id}: its id or fingerprint does not derive "
                             f"from its public key ({key.key_id})")
            )
            continue
        recorded = own.get(row.key_id)
        if recorded is None:
            report.problems.append(
                _key_problem(row.key_id, Reason.KEY_NOT_IN_PIN_JOURNAL, f"{row.key_id} ({row.status}) is in the keys "
                             "table but not in the pin journal nor the portal's key material: never trusted")
            )
            continue
        if recorded.key.fingerprint != key.fingerprint:
            report.problems.append(
                _key_problem(row.key_id, Reason.KID_MISMATCH, f"{row.key_id}: the pin journal holds another key")
            )
            continue
        if (row.status == SigningKey.Status.REVOKED) != (recorded.status == "revoked"):
            report.problems.append(
                _key_problem(row.key_id, Reason.KEY_STATE_MISMATCH, f"{row.key_id} is {row.status} in the keys table "
                             f"but {recorded.status} in the pin journal")
            )
    pinned = state.pinned if state is not None else {}
    seen: set[tuple[str, str]] = set()
    for entry in PinEntry.objects.filter(action="pin").order_by("id").only(
        "id", "key_id", "purpose", "fingerprint", "jwk"
    ):
        where = (entry.key_id, str(entry.purpose))
        if where in seen:
            continue
        seen.add(where)
        try:
            PublicKey.from_jwk(loads_strict(entry.jwk))
        except KernelError as exc:  # only a write behind the portal's back can store a key the kernel refuses
            report.problems.append(
                Problem(FindingKind.TAMPER, exc.reason, ("pin-log", f"entry {entry.pk}", exc.reason.value),
                        f"pin entry {entry.pk} ({entry.key_id}) holds a key the kernel refuses: {exc.detail}")
            )
            continue
        known = journal_keys.get(entry.key_id)
        in_journal = known is not None and known.key.fingerprint == entry.fingerprint and (
            where in pinned or known.revoked_at is not None or _was_pinned(state, where)
        )
        if not in_journal:
            report.problems.append(
                Problem(FindingKind.TAMPER, Reason.KEY_NOT_IN_PIN_JOURNAL,
                        ("pin-log", entry.key_id, str(entry.purpose), Reason.KEY_NOT_IN_PIN_JOURNAL.value),
                        f"pin entry {entry.pk} pins {entry.key_id} for {entry.purpose}; the pin journal never did: "
                        "never trusted")
            )


def _was_pinned(state: JournalState | None, where: tuple[str, str]) -> bool:
    """Did the journal ever pin (key, purpose)? (A pin later unpinned is still a pin the journal recorded.)"""
    return state is not None and where in state.ever_pinned


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


def _check_tree(checkpoint: Checkpoint | None, report: AuditReport) -> bool:
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
                    FindingKind.TAMPER, Reason.CHECKPOINT_INCONSISTENT, ("audit-tree", f"position {index}", "gap"),
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
                    FindingKind.TAMPER, Reason.RECEIPT_MISSING, (str(vid), f"seq {seq}", Reason.RECEIPT_MISSING.value),
                    f"the receipt at seq {seq} of {vid} (tree position {position}, {recorded}) is gone",
                    verification_id=str(vid), seq=seq, receipt_id=recorded,
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


def _write_checkpoint(path: Path, checkpoint: Checkpoint | None, report: AuditReport, now: datetime) -> None:
    if checkpoint is not None and checkpoint.tree_size == report.tree_size:
        return  # nothing new: the last checkpoint still describes the tree
    try:
        _, private_key = signing.active_signer()
    except SigningKeyUnavailable as exc:
        report.notes.append(f"no checkpoint written: {exc.reason.value} ({exc.detail})")
        return
    written = sign_checkpoint(
        private_key=private_key, tree_size=report.tree_size, root_hash=report.root_hash, timestamp=now
    )
    append_checkpoint(path, written)
    report.written = written


def _raise_findings(report: AuditReport) -> None:
    verifications = {
        str(v.pk): v
        for v in Verification.objects.filter(pk__in={p.verification_id for p in report.problems if p.verification_id})
    }
    for problem in report.problems:
        verification = verifications.get(problem.verification_id or "")
        subject = ""
        if verification is not None and verification.task_id is not None:
            subject = _subject(verification.task_id, verification.cycle)
        finding = KernelFinding(kind=problem.kind, refs=problem.refs, detail=problem.detail)
        with transaction.atomic():
            row = finding_raise(
                finding=finding,
                subject=subject,
                verification=verification,
                receipt_refs=[problem.receipt_id] if problem.receipt_id else [],
            )
            if row is not None:
                report.findings_raised += 1
                security_log_record(
                    kind=SecurityEventKind.AUDIT_FINDING,
                    actor_label=AUDIT_LABEL,
                    target=problem.verification_id or "/".join(problem.refs[:2]),
                    detail={"finding": row.pk, **problem.as_json()},
                )


def _record(report: AuditReport) -> None:
    run = AuditRun(
        started_at=report.started_at,
        finished_at=report.finished_at or timezone.now(),
        chains=report.chains,
        receipts=report.receipts,
        tree_size=report.tree_size,
        root_hash=report.root_hash,
        checkpoint_size=report.checkpoint.tree_size if report.checkpoint is not None else None,
        consistent=report.consistent,
        checkpoint_written=report.written is not None,
        ok=report.ok,
        problems=[p.as_json() for p in report.problems],
        findings_raised=report.findings_raised,
    )
    run.save()
    report.run_id = run.pk


INSPECT_CHAINS: Final = "reviewportal.inspect_chains"


def audit_run(
    *, now: datetime | None = None, checkpoint_path: Path | None = None, by: Any = None
) -> AuditReport:
    """Run the continuous audit once (see the module docstring); the report, also recorded as an ``AuditRun``.

    Idempotent: a second run over the same state raises no new finding and writes no new checkpoint. ``by``: the
    portal user who asked for it from the admin pages (``permission-denied`` unless they may inspect chains); the
    beat task and the command run it as the system.
    """
    if by is not None:
        require_permission(by, INSPECT_CHAINS, "run the audit")
    when = now or timezone.now()
    path = checkpoint_path or checkpoint_log_path()
    report = AuditReport(started_at=when)
    with _exclusive(path) as acquired:
        if not acquired:
            report.skipped = True
            report.notes.append("another audit run holds the lock; skipped")
            return report
        state, keys, trusted = _audit_keys(report)
        report.checkpoint = _trusted_checkpoint(path, trusted, report)
        report.leaves_added = _register_leaves(when)
        revoked = {key_id for key_id, k in trusted.items() if k.revoked}
        _check_chains(keys, revoked, state, report)
        _check_keys(state, report)
        if _check_tree(report.checkpoint, report):
            _write_checkpoint(path, report.checkpoint, report, when)
        _raise_findings(report)
        report.finished_at = timezone.now()
        _record(report)
    level = logging.INFO if report.ok else logging.WARNING
    logger.log(
        level, "audit: %d chains, %d receipts, tree %d, %d problem(s), %d new finding(s)",
        report.chains, report.receipts, report.tree_size, len(report.problems), report.findings_raised,
    )
    return report


def latest_runs(limit: int = 10) -> list[AuditRun]:
    """The most recent audit runs, newest first (for the admin pages)."""
    return list(AuditRun.objects.order_by("-id")[:limit])


def checkpoint_tail(limit: int = 10) -> list[tuple[int, str]]:
    """The last ``limit`` lines of the checkpoint log, oldest first (for the admin pages)."""
    tail: list[tuple[int, str]] = []
    for item in read_checkpoints(checkpoint_log_path()):
        tail.append(item)
        if len(tail) > limit:
            tail.pop(0)
    return tail

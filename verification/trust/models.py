"""Signing keys, receipts, the pin log, the security log and the audit's records (SPEC §7, §8)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from verification.db_guards import AppendOnlyModel
from verification.kernel.digests import HEX64_MAX
from verification.kernel.keys import PublicKey
from verification.runs.models import Verification


class SigningKey(models.Model):
    """A signing key of the portal: public material and lifecycle only (SPEC §8).

    Exactly one key is ``active`` at a time (a partial unique constraint). ``retired`` keys stay published and
    keep verifying; ``revoked`` keys leave the JWKS and fail verification with ``revoked-key``.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        RETIRED = "retired", "retired"
        REVOKED = "revoked", "revoked"

    key_id = models.CharField(primary_key=True, max_length=32)
    public_key = models.BinaryField(max_length=32)  # the raw 32-byte Ed25519 public key
    fingerprint = models.CharField(max_length=HEX64_MAX, unique=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    created_at = models.DateTimeField()
    retired_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ("created_at",)
        constraints = [
            models.UniqueConstraint(fields=["status"], condition=Q(status="active"), name="one_active_signing_key"),
            models.CheckConstraint(
                condition=~Q(status="revoked") | Q(revoked_at__isnull=False), name="revoked_key_has_revoked_at"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key_id} ({self.status})"

    @property
    def public(self) -> PublicKey:
        """The checked kernel key (refuses a row whose bytes are not a usable key)."""
        return PublicKey.from_raw(bytes(self.public_key))


class ReceiptKind(models.TextChoices):
    RUN = "run", "run"
    RESULT = "result", "result"
    DECISION = "decision", "decision"


class Receipt(AppendOnlyModel):
    """One signed entry of a verification's chain. Its id is its content hash (SPEC §7).

    ``envelope`` is the exact canonical text that was hashed and signed; every other column is either part of the
    wire entry (seq, key_id, prev_hash, signature) or an indexed copy of a payload field for querying.
    """

    content_hash = models.CharField(primary_key=True, max_length=HEX64_MAX)
    # Read by (verification, seq): ``receipt_unique_seq_per_verification`` is the index (migration 0020).
    verification = models.ForeignKey(
        Verification, on_delete=models.PROTECT, related_name="receipts", db_index=False
    )
    seq = models.PositiveIntegerField()
    key = models.ForeignKey(SigningKey, on_delete=models.PROTECT, related_name="receipts", db_column="key_id")
    prev_hash = models.CharField(max_length=HEX64_MAX, null=True, blank=True)
    signature = models.TextField()  # standard base64 of the 64-byte Ed25519 signature
    envelope = models.TextField()  # the canonical UTF-8 text; RFC 8785 escapes NUL, so TEXT holds it faithfully
    created_at = models.DateTimeField()  # the signed created_at

    # Copies of payload fields (SPEC §7 "Payload") for reading without parsing the envelope, which is authoritative.
    # Not indexed: every query finds receipts by verification (and seq) or by content hash, and an index no query
    # uses cost every receipt written an entry in it (migration 0020).
    kind = models.CharField(max_length=16, choices=ReceiptKind.choices)
    verdict = models.CharField(max_length=16, null=True, blank=True)
    determination = models.CharField(max_length=32, null=True, blank=True)
    authority = models.CharField(max_length=32, null=True, blank=True)
    actor = models.CharField(max_length=200, null=True, blank=True)
    supersedes_receipt = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by", db_index=False
    )

    class Meta:
        ordering = ("verification", "seq")
        constraints = [
            models.UniqueConstraint(fields=["verification", "seq"], name="receipt_unique_seq_per_verification"),
            models.CheckConstraint(condition=Q(content_hash__regex=r"^[0-9a-f]{64}$"), name="receipt_id_hex64"),
            models.CheckConstraint(
                condition=(Q(seq=0) & Q(prev_hash__isnull=True)) | (Q(seq__gt=0) & Q(prev_hash__isnull=False)),
                name="receipt_prev_hash_null_only_at_seq0",
            ),
        ]

    def __str__(self) -> str:
        return f"receipt {self.content_hash[:12]} (seq {self.seq} of {self.verification_id})"


class PinPurpose(models.TextChoices):
    PROOF_SIGNING = "proof-signing", "proof-signing"
    EVIDENCE_SOURCE = "evidence-source", "evidence-source"


class PinAction(models.TextChoices):
    PIN = "pin", "pin"
    UNPIN = "unpin", "unpin"
    REVOKE = "revoke", "revoke"


class PinEntry(AppendOnlyModel):
    """One record of the pin log (SPEC §8): who pinned, unpinned or revoked which key, when, through what channel.

    The trust root of each purpose is derived from this log (``selectors.trusted_keys``): the latest pin/unpin
    of (key, purpose) decides; a ``revoke`` (purpose-less) marks the key revoked for every purpose, for good.
    """

    id = models.BigAutoField(primary_key=True)
    action = models.CharField(max_length=8, choices=PinAction.choices)
    purpose = models.CharField(max_length=16, choices=PinPurpose.choices, null=True, blank=True)
    key_id = models.CharField(max_length=32, db_index=True)
    jwk = models.TextField()  # the public JWK as canonical JSON text
    fingerprint = models.CharField(max_length=HEX64_MAX)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    actor_label = models.CharField(max_length=200)  # the username at the time, or "system: <command>"
    created_at = models.DateTimeField()
    channel = models.CharField(max_length=200)  # the out-of-band channel the fingerprint was confirmed through
    note = models.TextField(blank=True, default="")
    reason = models.TextField(blank=True, default="")  # for a revocation

    class Meta:
        ordering = ("id",)
        verbose_name_plural = "pin entries"
        constraints = [
            models.CheckConstraint(
                condition=(Q(action="revoke") & Q(purpose__isnull=True))
                | (Q(action__in=["pin", "unpin"]) & Q(purpose__in=["proof-signing", "evidence-source"])),
                name="pinentry_purpose_iff_pin_or_unpin",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.key_id} {self.purpose or ''} by {self.actor_label}".strip()


class SecurityEventKind(models.TextChoices):
    """What the security log records (issue 7 §4)."""

    LOGIN = "login", "login"
    LOGIN_FAILED = "login-failed", "failed login"
    LOGIN_LOCKED_OUT = "login-locked-out", "login locked out"
    LOGOUT = "logout", "logout"
    CLAIM = "claim", "review claim"
    RELEASE = "release", "review release"
    DECISION = "decision", "review decision"
    KEY_CREATE = "key-create", "signing key created"
    KEY_ROTATE = "key-rotate", "signing key rotated"
    KEY_PIN = "key-pin", "key pinned"
    KEY_UNPIN = "key-unpin", "key unpinned"
    KEY_REVOKE = "key-revoke", "key revoked"
    TOKEN_ISSUE = "token-issue", "API token issued"
    TOKEN_REVOKE = "token-revoke", "API token revoked"
    ACTOR_CREATE = "actor-create", "actor created"
    USER_CREATE = "user-create", "user created"
    USER_ROLES = "user-roles", "user roles set"
    USER_DEACTIVATE = "user-deactivate", "user deactivated"
    USER_REACTIVATE = "user-reactivate", "user reactivated"
    REDACTION = "evidence-redact", "evidence redacted"
    FINDING_ACKNOWLEDGE = "finding-acknowledge", "finding acknowledged"
    FINDING_CLOSE = "finding-close", "finding closed"
    AUDIT_FINDING = "audit-finding", "audit raised a finding"


class SecurityLogEntry(AppendOnlyModel):
    """One security-relevant event (issue 7 §4). Append-only in code and in the database, like receipts.

    ``actor_label`` is who did it as recorded at the time (``user: <name>``, ``system: <command>``, or the username a
    failed login tried); ``target`` what it concerned (a key id, a username, a verification or evidence id).
    """

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=32, db_index=True)  # a SecurityEventKind (no choices: no migration per kind)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    actor_label = models.CharField(max_length=200)
    target = models.CharField(max_length=300, blank=True, default="", db_index=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("-id",)
        verbose_name_plural = "security log entries"

    def __str__(self) -> str:
        return f"{self.kind} by {self.actor_label} at {self.created_at.isoformat()}"


class AuditLeaf(AppendOnlyModel):
    """A position in the audit's RFC 6962 Merkle tree over all receipts (issue 7 §5; SPEC §8).

    A receipt gets the next position the first time an audit sees it, and keeps it: leaves are only ever appended,
    so each tree extends the last. Within one audit, new receipts are taken in (signed ``created_at``, verification
    id, seq) order. The leaf's data is the 32 bytes of the content hash of the receipt found *now* at
    (``verification``, ``seq``); ``content_hash`` is what was there when the position was assigned (a diagnostic).
    """

    position = models.PositiveBigIntegerField(primary_key=True)
    verification = models.ForeignKey(Verification, on_delete=models.PROTECT, related_name="+")
    seq = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=HEX64_MAX)
    added_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("position",)
        constraints = [models.UniqueConstraint(fields=["verification", "seq"], name="auditleaf_unique_receipt")]

    def __str__(self) -> str:
        return f"leaf {self.position}: {self.verification_id} seq {self.seq}"


class AuditRecordLeaf(AppendOnlyModel):
    """A position in the audit's Merkle tree held by a record other than a receipt (SPEC §8): a finding, a finding
    event, a security-log entry or a pin-log entry (``kind``), by its id (``ref``). Positions are shared with
    ``AuditLeaf`` (one tree); ``digest`` is the record's leaf encoding when the position was assigned (a diagnostic:
    the leaf's data is the encoding of the record found *now*, ``services.audit_tree.record_leaf``)."""

    position = models.PositiveBigIntegerField(primary_key=True)
    kind = models.CharField(max_length=16)
    ref = models.BigIntegerField()
    digest = models.CharField(max_length=HEX64_MAX)
    added_at = models.DateTimeField()

    class Meta:
        ordering = ("position",)
        constraints = [models.UniqueConstraint(fields=["kind", "ref"], name="auditrecordleaf_one_per_record")]

    def __str__(self) -> str:
        return f"leaf {self.position}: {self.kind} {self.ref}"


class AuditRun(AppendOnlyModel):
    """One run of the continuous audit, recorded when it ends (``services.audit.audit_run``)."""

    id = models.BigAutoField(primary_key=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    chains = models.PositiveIntegerField(default=0)
    receipts = models.PositiveBigIntegerField(default=0)
    tree_size = models.PositiveBigIntegerField(default=0)
    root_hash = models.CharField(max_length=HEX64_MAX, blank=True, default="")
    checkpoint_size = models.PositiveBigIntegerField(null=True, blank=True)  # the last trusted checkpoint's
    consistent = models.BooleanField(null=True)  # None: there was no trusted checkpoint to compare with
    checkpoint_written = models.BooleanField(default=False)
    ok = models.BooleanField(default=True)
    problems = models.JSONField(default=list)  # [{kind, code, refs, detail}] found by this run
    findings_raised = models.PositiveIntegerField(default=0)  # new findings (the rest were already on record)

    class Meta:
        ordering = ("-id",)

    def __str__(self) -> str:
        return f"audit {self.id} ({'ok' if self.ok else 'problems'})"

"""Domain models: verifications, the portal's signing keys, receipts, and the pin log (SPEC §7, §8).

Receipts and pin-log entries are append-only, in code (``AppendOnlyModel``) and in the database (triggers installed
by migration 0002, see ``verification.db_guards``). Signing keys hold only public material: the private key lives
outside the database (``verification.signing``).

Later issues extend ``Verification`` (subject, status, ...) and ``Receipt``'s indexed copies; the signed envelope
is the record, the other receipt columns are copies of it for querying.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from verification import db_guards
from verification.db_guards import AppendOnlyModel
from verification.kernel.keys import PublicKey

HEX64_MAX = 64


class Verification(models.Model):
    """One verification of a subject. Its chain of receipts is ``receipts``; the head is the last receipt."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    rubric_hash = models.CharField(max_length=HEX64_MAX)
    submission_hash = models.CharField(max_length=HEX64_MAX)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-created_at",)
        constraints = [
            models.CheckConstraint(
                condition=Q(rubric_hash__regex=r"^[0-9a-f]{64}$"), name="verification_rubric_hash_hex64"
            ),
            models.CheckConstraint(
                condition=Q(submission_hash__regex=r"^[0-9a-f]{64}$"), name="verification_submission_hash_hex64"
            ),
        ]

    def __str__(self) -> str:
        return f"verification {self.id}"


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
    verification = models.ForeignKey(Verification, on_delete=models.PROTECT, related_name="receipts")
    seq = models.PositiveIntegerField()
    key = models.ForeignKey(SigningKey, on_delete=models.PROTECT, related_name="receipts", db_column="key_id")
    prev_hash = models.CharField(max_length=HEX64_MAX, null=True, blank=True)
    signature = models.TextField()  # standard base64 of the 64-byte Ed25519 signature
    envelope = models.TextField()  # the canonical UTF-8 text; RFC 8785 escapes NUL, so TEXT holds it faithfully
    created_at = models.DateTimeField()  # the signed created_at

    # Indexed copies of payload fields (SPEC §7 "Payload"); the envelope is authoritative.
    kind = models.CharField(max_length=16, choices=ReceiptKind.choices, db_index=True)
    verdict = models.CharField(max_length=16, null=True, blank=True, db_index=True)
    determination = models.CharField(max_length=32, null=True, blank=True, db_index=True)
    authority = models.CharField(max_length=32, null=True, blank=True, db_index=True)
    actor = models.CharField(max_length=200, null=True, blank=True, db_index=True)
    supersedes_receipt = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by"
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


# SQLite needs the purge function on every connection, and the triggers re-checked after each migrate.
db_guards.connect_signals()

"""Leases, review decisions, findings and their events (SPEC §9, §10)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from verification.actors.models import Actor
from verification.db_guards import AppendOnlyModel
from verification.evidence.models import Evidence
from verification.kernel.digests import HEX64_MAX
from verification.runs.models import Verification
from verification.trust.models import Receipt


class Finding(AppendOnlyModel):
    """What the system noticed and a person must look at (SPEC §10). Append-only; its state is its events'.

    ``dedupe_key`` (sha256 of kind and refs) makes raising the same finding twice a no-op.
    """

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=32, db_index=True)
    reason = models.CharField(max_length=64)
    subject = models.CharField(max_length=200, blank=True, default="")
    verification = models.ForeignKey(
        Verification, on_delete=models.PROTECT, null=True, blank=True, related_name="findings"
    )
    evidence = models.ForeignKey(Evidence, on_delete=models.PROTECT, null=True, blank=True, related_name="findings")
    refs = models.JSONField(default=list)
    receipt_refs = models.JSONField(default=list)
    detail = models.TextField(blank=True, default="")
    dedupe_key = models.CharField(max_length=HEX64_MAX, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.kind} finding {self.id}"


class FindingAction(models.TextChoices):
    RAISED = "raised", "raised"
    ACKNOWLEDGED = "acknowledged", "acknowledged"
    CLOSED = "closed", "closed"


class FindingEvent(AppendOnlyModel):
    """One step in a finding's life: raised (by the portal), acknowledged or closed (by a person, with a rationale)."""

    id = models.BigAutoField(primary_key=True)
    finding = models.ForeignKey(Finding, on_delete=models.PROTECT, related_name="events")
    action = models.CharField(max_length=16, choices=FindingAction.choices)
    actor = models.ForeignKey(Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    rationale = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.action} finding {self.finding_id}"


class ReviewLease(models.Model):
    """Who holds a queued verification for review, and until when (issue 5 §2). One row per verification, reused.

    A lease is held while ``released_at`` is null and ``expires_at`` lies ahead; it ends on a decision, a release
    or expiry. A claim writes it with one conditional upsert that must change exactly one row
    (``services.reviews``), so no two reviewers ever hold the same item.
    """

    verification = models.OneToOneField(
        Verification, on_delete=models.PROTECT, primary_key=True, related_name="review_lease"
    )
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    released_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=32, blank=True, default="")  # decided, released, or a refusal's code

    class Meta:
        ordering = ("expires_at",)

    def __str__(self) -> str:
        return f"lease of {self.verification_id} by {self.holder_id} until {self.expires_at.isoformat()}"


class ReviewAction(models.TextChoices):
    PASS = "PASS", "pass"
    FAIL = "FAIL", "fail"
    MORE_EVIDENCE = "MORE_EVIDENCE", "needs more evidence"


class ReviewDecision(AppendOnlyModel):
    """One accepted reviewer action on a verification (append-only), keyed by the nonce of the form it came from.

    ``request_key`` makes a double submission (a double click, a replayed POST) record one action: the second
    finds the first and gets its result. A PASS or FAIL names the ``decision`` receipt it issued; "needs more
    evidence" issues none and takes the verification out of the queue until new evidence brings a re-run.
    """

    id = models.BigAutoField(primary_key=True)
    request_key = models.CharField(max_length=64, unique=True)
    verification = models.ForeignKey(Verification, on_delete=models.PROTECT, related_name="review_decisions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    actor = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=16, choices=ReviewAction.choices)
    rationale = models.TextField()
    cited_evidence_ids = models.JSONField(default=list)
    receipt = models.OneToOneField(
        Receipt, on_delete=models.PROTECT, null=True, blank=True, related_name="review_decision"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("id",)
        indexes = [models.Index(fields=["verification", "action"], name="reviewdecision_action_idx")]
        constraints = [
            models.CheckConstraint(
                condition=(Q(action="MORE_EVIDENCE") & Q(receipt__isnull=True))
                | (Q(action__in=["PASS", "FAIL"]) & Q(receipt__isnull=False)),
                name="reviewdecision_receipt_iff_verdict",
            ),
            models.CheckConstraint(condition=~Q(rationale=""), name="reviewdecision_rationale_not_blank"),
        ]

    def __str__(self) -> str:
        return f"{self.action} on {self.verification_id} by {self.user_id}"

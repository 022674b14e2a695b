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
from django.db.models.signals import post_migrate
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

    # --- the subject and the submission (issue 4 §1; SPEC §1). Nullable: the receipts tests build bare rows. -----
    task = models.ForeignKey("Task", on_delete=models.PROTECT, null=True, blank=True, related_name="verifications")
    cycle = models.PositiveIntegerField(null=True, blank=True)  # the task's cycle when it was submitted
    rubric = models.ForeignKey(  # the cycle's accepted contract at submission; None: no accepted contract
        "Rubric", on_delete=models.PROTECT, null=True, blank=True, related_name="verifications"
    )
    submitted_by = models.ForeignKey(
        "Actor", on_delete=models.PROTECT, null=True, blank=True, related_name="verifications_submitted"
    )
    submitted_boundary = models.CharField(max_length=200, blank=True, default="")  # the token's boundary
    body = models.JSONField(default=dict, blank=True)  # the submission minus transport fields and inline bytes
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    submitted_at = models.DateTimeField(default=timezone.now)  # PENDING deadlines run from here (SPEC §2)
    supersedes = models.ForeignKey(  # the previous verification of the same subject (SPEC §7: a re-run)
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by"
    )
    awaiting_evidence = models.BooleanField(default=False)

    # --- operational state of the run (SPEC §3 lifecycle, derived when read: selectors.verification_status) ------
    attempts = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)  # the latest attempt began
    last_error = models.TextField(blank=True, default="")
    failed_at = models.DateTimeField(null=True, blank=True)

    # --- query caches of the chain head's signed outcome, as issued (not as read: PENDING expires when read).
    # The receipt is the truth; these columns only let lists and the review queue filter without parsing envelopes.
    # ``services.verifications`` updates them in the same transaction that appends a receipt.
    verdict = models.CharField(max_length=16, null=True, blank=True, db_index=True)
    determination = models.CharField(max_length=32, null=True, blank=True, db_index=True)
    flagged = models.BooleanField(default=False, db_index=True)
    flag_reason = models.CharField(max_length=200, null=True, blank=True)
    reason = models.CharField(max_length=64, null=True, blank=True, db_index=True)
    human_decided = models.BooleanField(default=False, db_index=True)
    pending_until = models.DateTimeField(null=True, blank=True)  # the earliest PENDING deadline of the head
    automated_verdict = models.CharField(max_length=16, null=True, blank=True)  # of the latest run/result receipt
    evidence_key = models.CharField(max_length=HEX64_MAX, blank=True, default="", db_index=True)  # sha256 of digests

    class Meta:
        ordering = ("-created_at",)
        indexes = [
            models.Index(fields=["task", "cycle"], name="verification_subject_idx"),
            models.Index(fields=["created_at", "id"], name="verification_keyset_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="verification_idempotency_key_per_actor",
            ),
            models.CheckConstraint(
                condition=Q(rubric_hash__regex=r"^[0-9a-f]{64}$"), name="verification_rubric_hash_hex64"
            ),
            models.CheckConstraint(
                condition=Q(submission_hash__regex=r"^[0-9a-f]{64}$"), name="verification_submission_hash_hex64"
            ),
        ]

    def __str__(self) -> str:
        return f"verification {self.id}"


class ReadPhase(models.Model):
    """What the head reads as from one PENDING deadline on (SPEC §3: derived when read, the same way when filtered).

    A query cache like the head columns above, written with them from ``kernel.read_phases`` by
    ``verification.read_state``; lists filter on it through ``read_state.read_q`` only. Before ``pending_until`` the
    head columns hold the read state; from it on, the phase whose [starts_at, ends_at) holds ``now``.
    """

    verification = models.ForeignKey(Verification, on_delete=models.CASCADE, related_name="read_phases")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    verdict = models.CharField(max_length=16)
    determination = models.CharField(max_length=32, null=True, blank=True)
    flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=200, null=True, blank=True)
    reason = models.CharField(max_length=64, null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["verification", "starts_at"], name="readphase_key")]


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


# === Actors, tokens, tasks, evidence, findings and events (issue 4 §1; SPEC §1, §4, §10) ===========================
# Every fact about who did what is recorded from authentication (the token's actor and boundary), never from a body.


class ActorKind(models.TextChoices):
    """The kernel's ``ActorKind`` (SPEC §1), as database choices."""

    AGENT = "agent", "agent"
    SERVICE = "service", "service"
    COLLECTOR = "collector", "collector"
    SEMANTIC_WORKER = "semantic_worker", "semantic worker"
    EXTERNAL_VERIFIER = "external_verifier", "external verifier"
    CONTRACT_OWNER = "contract_owner", "contract owner"
    HUMAN = "human", "human"


class Actor(models.Model):
    """An authenticated actor (SPEC §1). A portal user is exactly one human actor (``user``); machines hold tokens.

    The actor's execution boundaries are those named by its tokens (``ApiToken.boundary``).
    """

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=32, choices=ActorKind.choices)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="actor"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("name",)
        constraints = [
            models.CheckConstraint(condition=Q(user__isnull=True) | Q(kind="human"), name="actor_user_is_human"),
            models.CheckConstraint(condition=~Q(name=""), name="actor_name_not_blank"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class ApiToken(models.Model):
    """An API token: bound to one actor and the execution boundary its holder runs in, with scopes (SPEC §1).

    Only the sha256 of the plaintext is stored; the plaintext is shown once, when issued. ``prefix`` is the start
    of the plaintext, kept for display so a person can tell tokens apart.
    """

    actor = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="tokens")
    boundary = models.CharField(max_length=200)
    scopes = models.JSONField(default=list)
    token_hash = models.CharField(max_length=HEX64_MAX, unique=True)
    prefix = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ("created_at", "id")
        constraints = [
            models.CheckConstraint(
                condition=Q(token_hash__regex=r"^[0-9a-f]{64}$"), name="apitoken_hash_hex64"  # noqa: S106
            ),
            models.CheckConstraint(condition=~Q(boundary=""), name="apitoken_boundary_not_blank"),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… of {self.actor_id} in {self.boundary}"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class Rubric(models.Model):
    """A registered rubric (SPEC §5), referenced by ``rubric_hash`` (sha256 hex of its canonical JSON).

    ``document`` is the canonical JSON text that was hashed; ``witnesses`` the falsifiability witnesses the
    registrar ran (one per ``digest`` obligation).
    """

    rubric_hash = models.CharField(primary_key=True, max_length=HEX64_MAX)
    name = models.CharField(max_length=200)
    document = models.TextField()
    witnesses = models.JSONField(default=list)
    registered_by = models.ForeignKey(Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at",)
        constraints = [
            models.CheckConstraint(condition=Q(rubric_hash__regex=r"^[0-9a-f]{64}$"), name="rubric_hash_hex64"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.rubric_hash[:12]})"


class Task(models.Model):
    """A task: the subject of verifications, together with its current cycle (SPEC §1)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=300)
    external_ref = models.CharField(max_length=300, blank=True, default="")
    created_by = models.ForeignKey(Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"task {self.id}: {self.title}"


class TaskCycle(models.Model):
    """One cycle of a task. The current cycle is the highest number; reopening adds one (SPEC §1)."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="cycles")
    number = models.PositiveIntegerField()
    opened_at = models.DateTimeField(default=timezone.now)
    opened_by = models.ForeignKey(Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ("task", "number")
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="taskcycle_unique_number")]

    def __str__(self) -> str:
        return f"{self.task_id}@{self.number}"


class Claim(models.Model):
    """A claim of a task in one cycle, reported by the claiming actor's own token (SPEC §1)."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="claims")
    cycle = models.PositiveIntegerField()
    actor = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="claims")
    boundary = models.CharField(max_length=200)  # the claiming token's boundary
    claimed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("claimed_at", "id")
        indexes = [models.Index(fields=["task", "cycle"], name="claim_task_cycle_idx")]

    def __str__(self) -> str:
        return f"claim of {self.task_id}@{self.cycle} by {self.actor_id}"


class Link(models.Model):
    """A commit anchoring the work of a task, with its committing actor, as reported by a collector (SPEC §1, rail 2).

    ``committing_actor`` None: the reported name is not an actor we know, so the committer is unnamed.
    """

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="links")
    commit_id = models.CharField(max_length=200)
    committing_actor = models.ForeignKey(
        Actor, on_delete=models.PROTECT, null=True, blank=True, related_name="commits"
    )
    committing_actor_name = models.CharField(max_length=200, blank=True, default="")  # as reported
    reported_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    reported_boundary = models.CharField(max_length=200)
    superseded = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at", "id")

    def __str__(self) -> str:
        return f"link {self.commit_id} of {self.task_id}"


class ContractAcceptance(models.Model):
    """A registered rubric accepted as the contract of one cycle (SPEC §1): one per cycle, never changed."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="contracts")
    cycle = models.PositiveIntegerField()
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="acceptances")
    accepted_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    accepted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("accepted_at", "id")
        indexes = [models.Index(fields=["task", "cycle"], name="contract_task_cycle_idx")]
        constraints = [models.UniqueConstraint(fields=["task", "cycle"], name="contract_one_per_cycle")]

    def __str__(self) -> str:
        return f"contract {self.rubric_id[:12]} for {self.task_id}@{self.cycle}"


class Evidence(models.Model):
    """An evidence item: bytes in the content-addressed store (``verification.storage``) and its recorded facts.

    The six axes (SPEC §4): ``evidence_type``, ``admission_source`` and ``mutability`` are stored; independence,
    freshness and accessibility are computed when read from the recorded structure (admitting actor, boundary,
    custody; ``collected_at``/``max_age_seconds``/``expires_at``; the store and ``redacted_at``). ``trust_tier`` is
    the server's derivation at admission; a run derives it again against its own producer.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    digest = models.CharField(max_length=71, db_index=True)  # sha256:<hex>, recorded at admission
    size = models.PositiveBigIntegerField()
    media_type = models.CharField(max_length=200, default="application/octet-stream")
    evidence_type = models.CharField(max_length=16, default="artifact")
    admission_source = models.CharField(max_length=16)
    mutability = models.CharField(max_length=16, default="immutable")
    collected_at = models.DateTimeField(null=True, blank=True)
    max_age_seconds = models.PositiveBigIntegerField(null=True, blank=True)  # up to 100 years (kernel.limits)
    expires_at = models.DateTimeField(null=True, blank=True)
    custody = models.CharField(max_length=300, blank=True, default="")
    admitted_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="evidence_admitted")
    admitted_boundary = models.CharField(max_length=200, blank=True, default="")
    admitted_at = models.DateTimeField(default=timezone.now)
    source_key_id = models.CharField(max_length=32, blank=True, default="")
    source_signature = models.TextField(blank=True, default="")  # standard base64 of the detached signature
    source_verified = models.BooleanField(default=False)
    trust_tier = models.CharField(max_length=32)
    redacted_at = models.DateTimeField(null=True, blank=True)
    redaction_reason = models.TextField(blank=True, default="")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, null=True, blank=True, related_name="evidence")

    class Meta:
        ordering = ("admitted_at", "id")
        verbose_name_plural = "evidence"
        constraints = [
            models.CheckConstraint(condition=Q(digest__regex=r"^sha256:[0-9a-f]{64}$"), name="evidence_digest_form"),
        ]

    def __str__(self) -> str:
        return f"evidence {self.id} ({self.digest[:19]})"


class ChangeManifest(models.Model):
    """A change manifest (evidence) and who reported it, from authentication (SPEC §1, rail 4)."""

    evidence = models.ForeignKey(Evidence, on_delete=models.PROTECT, related_name="manifests")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="manifests")
    reported_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    reported_boundary = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at", "id")

    def __str__(self) -> str:
        return f"manifest {self.evidence_id} of {self.task_id}"


class Baseline(models.Model):
    """A baseline captured by the capture step (SPEC §1, rail 5); ``capture_token`` is its HMAC under the server
    secret over every other field (``kernel.criteria.mint_baseline_token``), so no caller can fake one."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="baselines")
    cycle = models.PositiveIntegerField()
    artifact_key = models.CharField(max_length=128)
    digest = models.CharField(max_length=71)
    captured_at = models.DateTimeField()
    reporter = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    reporter_boundaries = models.JSONField(default=list)
    reporter_is_collector = models.BooleanField()
    capture_token = models.CharField(max_length=100)

    class Meta:
        ordering = ("captured_at", "id")
        indexes = [models.Index(fields=["task", "cycle", "artifact_key"], name="baseline_lookup_idx")]

    def __str__(self) -> str:
        return f"baseline {self.artifact_key} of {self.task_id}@{self.cycle}"


class FrozenCase(models.Model):
    """A frozen evaluation case of a task: a semantic judgment is grounded only when bound to one (SPEC §6)."""

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="frozen_cases")
    digest = models.CharField(max_length=71)
    content = models.TextField()
    frozen_at = models.DateTimeField(default=timezone.now)
    frozen_by = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ("frozen_at", "id")
        constraints = [models.UniqueConstraint(fields=["task", "digest"], name="frozencase_unique_digest")]

    def __str__(self) -> str:
        return f"case {self.digest[:19]} of {self.task_id}"


class VerificationEvidence(models.Model):
    """Evidence bound to a symbol of one verification's submission."""

    verification = models.ForeignKey(Verification, on_delete=models.PROTECT, related_name="bindings")
    symbol = models.CharField(max_length=128)
    evidence = models.ForeignKey(Evidence, on_delete=models.PROTECT, related_name="bindings")
    as_manifest = models.BooleanField(default=False)  # the submitter bound it as its own change manifest

    class Meta:
        ordering = ("verification", "symbol")
        constraints = [
            models.UniqueConstraint(fields=["verification", "symbol"], name="verificationevidence_unique_symbol")
        ]

    def __str__(self) -> str:
        return f"{self.symbol} = {self.evidence_id}"


class ArrivedResult(models.Model):
    """A semantic judgment or imported result that arrived for one criterion of a verification.

    ``actor`` and ``boundary`` come from the delivering token; the authority is assigned from the actor's kind when
    the run reads it (SPEC §1), so nothing in ``body`` (e.g. a claimed ``authority``) decides anything.
    """

    verification = models.ForeignKey(Verification, on_delete=models.PROTECT, related_name="arrived_results")
    criterion_id = models.CharField(max_length=128)
    actor = models.ForeignKey(Actor, on_delete=models.PROTECT, related_name="+")
    boundary = models.CharField(max_length=200)
    body = models.JSONField(default=dict)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("received_at", "id")
        constraints = [
            models.UniqueConstraint(fields=["verification", "criterion_id"], name="arrivedresult_one_per_criterion")
        ]

    def __str__(self) -> str:
        return f"result for {self.criterion_id} of {self.verification_id}"


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


class Event(AppendOnlyModel):
    """The ordered feed of state changes (``GET /v1/events?after=``); ``id`` is the cursor.

    Inserts are serialized to commit in id order (``services.events.event_emit``), so a reader never sees a later
    id before an earlier one.
    """

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=64, db_index=True)
    verification = models.ForeignKey(
        Verification, on_delete=models.PROTECT, null=True, blank=True, related_name="events"
    )
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"event {self.id} {self.kind}"


# === The reviewer queue (issue 5; SPEC §2 "A human decision supersedes", §3 the queue, §9 the rails) ==============


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


# SQLite needs the purge function on every connection, and the guards of every append-only table (the one registry,
# ``db_guards.APPEND_ONLY_TABLES``) re-checked after each migrate.
db_guards.connect_signals()


# === The security log and the continuous audit (issue 7 §4, §5; SPEC §8 "External checkpoints") ===================


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
    the leaf's data is the encoding of the record found *now*, ``services.audit.record_leaf``)."""

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


# --- dashboard rollups (issue 6 §3): derived counts the database keeps, never records -------------------------------
#
# Each table below is a function of the records (verifications, review decisions, findings and their events): the
# triggers of ``verification.rollups`` update it in the same statement as the record that changes it, whoever writes
# the record, and ``rollups.rebuild`` recomputes it from the records. They are caches of aggregates, not history, so
# their counters change in place; nothing in them is evidence of anything. Days are UTC calendar days (the portal's
# TIME_ZONE is UTC; a system check refuses anything else), hours are whole hours since the Unix epoch.


class QueueBacklogMember(models.Model):
    """One span of a verification's time line in which it reads as a queue member (``rollups``: the head columns
    until its first PENDING deadline, then each stored read phase), with its reason as read.

    ``due_hour``: the hour the span starts in (-1: from the beginning); ``until_hour``: the hour it ends in
    (``rollups.FOREVER``: never)."""

    verification_id = models.UUIDField(db_index=True)
    submitted_hour = models.BigIntegerField()
    due_hour = models.BigIntegerField(db_index=True)
    until_hour = models.BigIntegerField(db_index=True)
    reason = models.CharField(max_length=64, default="")


class QueueBacklogCount(models.Model):
    """How many ``QueueBacklogMember`` rows share a submission hour and span hours (the backlog dashboard's input)."""

    submitted_hour = models.BigIntegerField()
    due_hour = models.BigIntegerField()
    until_hour = models.BigIntegerField()
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["submitted_hour", "due_hour", "until_hour"], name="queuebacklogcount_key"),
        ]


class QueueReasonCount(models.Model):
    """How many ``QueueBacklogMember`` rows share a reason and span hours (the queue's counts per reason,
    ``review_selectors.queue_counts``)."""

    reason = models.CharField(max_length=64)
    due_hour = models.BigIntegerField()
    until_hour = models.BigIntegerField()
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["reason", "due_hour", "until_hour"], name="queuereasoncount_key"),
        ]


class DecisionDayCount(models.Model):
    """Reviewer actions per UTC day, reviewer and action (decisions per day, per-reviewer counts)."""

    day = models.DateField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=16)
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "user", "action"], name="decisiondaycount_key")]


class DecisionDelay(models.Model):
    """From submission to a person's PASS or FAIL, per decision (the time-to-decision percentiles), in seconds."""

    decision_id = models.BigIntegerField(primary_key=True)
    decided_at = models.DateTimeField()
    seconds = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["decided_at", "seconds"], name="decisiondelay_period_idx")]


class VerificationDayCount(models.Model):
    """Completed automated outcomes and abstains (UNKNOWN, NOT_RUN) per UTC day of ``Verification.created_at``."""

    day = models.DateField(primary_key=True)
    completed = models.IntegerField(default=0)
    abstained = models.IntegerField(default=0)


class FindingDayCount(models.Model):
    """Findings raised and closed per UTC day (``FindingEvent`` actions)."""

    day = models.DateField()
    action = models.CharField(max_length=16)
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "action"], name="findingdaycount_key")]


class OpenFindingCount(models.Model):
    """Findings without a ``closed`` event, per kind."""

    kind = models.CharField(max_length=32, primary_key=True)
    n = models.IntegerField(default=0)


def _reinstall_rollups(sender: object, using: str = "default", **kwargs: object) -> None:
    from django.db import connections

    from verification import rollups

    if getattr(sender, "label", None) == "verification":
        rollups.ensure_installed(connections[using])


post_migrate.connect(_reinstall_rollups, dispatch_uid="verification.models.rollups")


def _connect_security_log() -> None:
    """The security log listens to sign-ins, the pin log, tokens, decisions and finding events (issue 7 §4)."""
    from verification.services import security_log  # late: it imports the models above

    security_log.connect_signals()


_connect_security_log()

"""Actors and API tokens (SPEC §1)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from verification.kernel.digests import HEX64_MAX


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

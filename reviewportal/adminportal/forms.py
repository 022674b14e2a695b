"""The admin pages' forms: field shapes only; every rule that matters is the service's (and the kernel's)."""

from __future__ import annotations

from typing import Any

from django import forms

from verification.actors.models import ActorKind
from verification.actors.roles import ROLES
from verification.actors.services.actors import SCOPES
from verification.trust.models import PinPurpose

ROLE_CHOICES = [(role, role) for role in ROLES]
PURPOSE_CHOICES = [(p.value, p.label) for p in PinPurpose]
MACHINE_KIND_CHOICES = [(k.value, k.label) for k in ActorKind if k is not ActorKind.HUMAN]
SCOPE_CHOICES = [(s, s) for s in sorted(SCOPES)]
MAX_PASTE = 64 * 1024


class PinForm(forms.Form):
    key_text = forms.CharField(
        label="Public key (JWK or PEM)", max_length=MAX_PASTE, widget=forms.Textarea(attrs={"rows": 6})
    )
    purpose = forms.ChoiceField(choices=PURPOSE_CHOICES)
    fingerprint = forms.CharField(
        label="Fingerprint, as confirmed out of band (sha256 hex, spaces allowed, or the RFC 7638 thumbprint)",
        max_length=200,
    )
    channel = forms.CharField(label="Channel it was confirmed through", max_length=200, required=False)
    note = forms.CharField(max_length=2000, required=False)


class UnpinForm(forms.Form):
    purpose = forms.ChoiceField(choices=PURPOSE_CHOICES)
    channel = forms.CharField(label="Channel the decision came through", max_length=200, required=False)
    note = forms.CharField(max_length=2000, required=False)


class RevokeForm(forms.Form):
    reason = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 3}))
    channel = forms.CharField(label="Channel the compromise was reported through", max_length=200, required=False)
    confirm = forms.BooleanField(label="I understand the consequences listed above", required=True)


class RotateForm(forms.Form):
    confirm = forms.BooleanField(label="I understand the consequences listed above", required=True)


class VerifyProofForm(forms.Form):
    proof_file = forms.FileField(label="Proof file (JSON)", required=False)
    proof_text = forms.CharField(label="…or paste the proof", required=False, widget=forms.Textarea(attrs={"rows": 6}))
    trusted_head = forms.CharField(
        label="Trusted head (the content hash you hold from your own records)", max_length=200, required=False
    )
    verification_id = forms.CharField(label="Expected verification id", max_length=200)
    submission_hash = forms.CharField(label="Expected submission hash", max_length=200)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not cleaned.get("proof_file") and not (cleaned.get("proof_text") or "").strip():
            raise forms.ValidationError("Upload a proof file or paste the proof.")
        return cleaned


class RedactForm(forms.Form):
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))
    confirm = forms.BooleanField(label="I understand the consequences listed above", required=True)


class UserCreateForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    password = forms.CharField(label="Initial password", widget=forms.PasswordInput, max_length=200)
    roles = forms.MultipleChoiceField(choices=ROLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple)


class RolesForm(forms.Form):
    roles = forms.MultipleChoiceField(choices=ROLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple)


class DeactivateForm(forms.Form):
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))
    confirm = forms.BooleanField(label="I understand the consequences listed above", required=True)


class TokenCreateForm(forms.Form):
    actor = forms.CharField(max_length=200)
    boundary = forms.CharField(label="Execution boundary (container or host id)", max_length=200)
    scopes = forms.MultipleChoiceField(choices=SCOPE_CHOICES, widget=forms.CheckboxSelectMultiple)


class ActorCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=MACHINE_KIND_CHOICES)

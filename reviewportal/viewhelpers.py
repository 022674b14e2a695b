"""Helpers every portal area's views share: a refusal in plain words for a template, and a verification or 404."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from verification.kernel.errors import KernelError
from verification.kernel.reasons import explain
from verification.runs.models import Verification
from verification.runs.selectors import verification_get


def refusal_words(exc: KernelError) -> dict[str, str]:
    """A refusal in plain words: the code, its registered sentence, and the specific detail (SPEC §11)."""
    return {"code": exc.reason.value, "text": explain(exc.reason), "detail": exc.detail}


def verification_or_404(verification_id: Any) -> Verification:
    verification = verification_get(verification_id)
    if verification is None:
        raise Http404("no such verification")
    return verification

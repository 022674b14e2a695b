"""Helpers every portal area's views share: a refusal in plain words for a template, a verification or 404, and a
keyset page's links."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

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


def page_links(
    here: str, query: dict[str, str], *, cursor: str | None, next_cursor: str | None
) -> dict[str, str | None]:
    """A keyset page's ``next_url`` (the same filters from ``next_cursor`` on; None on the last page) and ``first_url``
    (the same filters from the start; None on the first page)."""
    return {
        "next_url": f"{here}?{urlencode({**query, 'cursor': next_cursor})}" if next_cursor else None,
        "first_url": f"{here}?{urlencode(query)}" if cursor else None,
    }

"""Registering rubrics (SPEC §5, rail 6): the kernel's registrar refuses what cannot fail; we store what it accepts.

A rubric is referenced by ``rubric_hash`` (sha256 hex of its canonical JSON). Registering the same document twice
returns the stored rubric. ``rubric_criteria`` (a selector) parses a stored rubric, cached per hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from verification.actors.models import Actor
from verification.kernel.criteria import register_rubric
from verification.runs.models import Rubric
from verification.runs.selectors import rubric_criteria


def rubric_register(*, actor: Actor | None, document: Mapping[str, Any]) -> Rubric:
    """Register ``document`` (kernel ``register_rubric``; ``RubricError`` with the code when refused).

    Idempotent on the hash; the returned row carries the witnesses the registrar ran (``witnesses``).
    """
    registered = register_rubric(document)
    existing = Rubric.objects.filter(rubric_hash=registered.rubric_hash).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return Rubric.objects.create(
                rubric_hash=registered.rubric_hash,
                name=registered.name,
                document=registered.canonical.decode("utf-8"),
                witnesses=[w.as_payload() for w in registered.witnesses],
                registered_by=actor,
            )
    except IntegrityError:  # registered concurrently
        return Rubric.objects.get(rubric_hash=registered.rubric_hash)


__all__ = ["rubric_criteria", "rubric_register"]

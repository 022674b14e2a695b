"""``evidence.selectors.evidence_by_ids`` (compiled once per count of distinct ids): the same items as the ORM's
``pk__in`` read, whatever the order, repetitions and unknown ids, below and above the compiled counts."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.verification.service_world import NOTES, World, digest_entry, inline
from verification.evidence import selectors
from verification.evidence.models import Evidence

pytestmark = pytest.mark.django_db


@pytest.fixture
def items(signing_key: Any) -> list[uuid.UUID]:
    world = World.build()
    world.contract(digest_entry())
    count = selectors._COMPILED_IDS + 2
    world.submit_and_run({"evidence": [inline(f"item{i}", NOTES + str(i).encode()) for i in range(count)]})
    found = list(Evidence.objects.order_by("pk").values_list("pk", flat=True))
    assert len(found) >= count
    return found


def _fields(found: dict[uuid.UUID, Evidence]) -> dict[uuid.UUID, list[Any]]:
    names = [f.attname for f in Evidence._meta.concrete_fields]
    return {pk: [getattr(e, name) for name in names] for pk, e in found.items()}


@pytest.mark.parametrize("take", [1, 3, selectors._COMPILED_IDS, selectors._COMPILED_IDS + 2])
def test_the_same_items_as_the_orm(items: list[uuid.UUID], take: int) -> None:
    wanted = items[:take]
    asked = [*reversed(wanted), wanted[0], uuid.uuid4()]  # any order, a repeat, an unknown id
    ours = selectors.evidence_by_ids(asked)
    orm = {e.pk: e for e in Evidence.objects.filter(pk__in=asked)}
    assert set(ours) == set(wanted) and _fields(ours) == _fields(orm)


def test_no_ids_no_read(items: list[uuid.UUID], django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        assert selectors.evidence_by_ids([]) == {}

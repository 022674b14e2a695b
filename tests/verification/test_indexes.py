"""The pipeline's tables carry the indexes a query uses, and no other (issue 15, migration 0020).

Every verification writes a row of ``verification`` (and updates it: not a HOT update, its head columns are indexed),
a receipt, its evidence bindings and an event; each index of those tables costs every such write an entry. Before
0020 the verification table had 23 indexes and the receipt table 18 (``db_index=True`` on columns no query filters
by, an FK index beside a composite one that starts with the same column, and on PostgreSQL the LIKE twins Django
adds to text columns, for LIKE queries never made). The lists below are the indexed column lists, the same on both
databases: a new index is a decision to make here, with the query it serves.
"""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

EXPECTED = {
    "verification_verification": [
        ("<expression>", "submitted_at", "id"),  # the review queue's order (0007, partial)
        ("created_at", "id"),  # keyset pages
        ("determination",),  # the history filters ...
        ("flagged",),
        ("human_decided",),
        ("id",),  # primary key
        ("pending_until",),  # PENDING deadlines (partial)
        ("reason",),
        ("rubric_id",),
        ("submitted_at",),  # queue age (partial)
        ("submitted_by_id",),
        ("submitted_by_id", "idempotency_key"),  # unique: an Idempotency-Key per actor
        ("supersedes_id",),  # the rows that supersede one (partial, 0007)
        ("task_id", "cycle"),  # the subject: a task's verifications
        ("verdict",),
    ],
    "verification_receipt": [
        ("content_hash",),  # primary key: a receipt by its id
        ("key_id",),  # receipts counted per signing key
        ("verification_id", "seq"),  # unique: the chain, in order
    ],
    "verification_verificationevidence": [
        ("evidence_id",),
        ("id",),
        ("verification_id", "symbol"),  # unique: a verification's bindings
    ],
    "verification_event": [("id",), ("kind",), ("verification_id",)],
}


def _indexed_columns(table: str) -> list[tuple[str, ...]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return sorted(
        tuple("<expression>" if column is None else column for column in info["columns"])
        for info in constraints.values()
        if info["index"] or info["primary_key"] or info["unique"]
    )


@pytest.mark.parametrize("table", sorted(EXPECTED))
def test_the_pipeline_tables_carry_only_the_indexes_a_query_uses(table: str) -> None:
    # A list, not a set: two indexes over the same columns (an FK's beside a LIKE twin) would show as a repeat.
    assert _indexed_columns(table) == sorted(EXPECTED[table])


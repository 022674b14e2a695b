"""Fixtures for the admin pages and the continuous audit (issue 7): the roles and queue of the portal tests, the
receipts' signing key and chains, a checkpoint log in the test's own var dir, and the tools of a superuser who edits
the database behind the portal's back (the append-only triggers lifted, as ``ALTER TABLE … DISABLE TRIGGER`` could).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.conftest import as_owner
from tests.portal.conftest import (  # noqa: F401 - fixtures shared with the portal tests
    PASSWORD,
    Queue,
    admin_user,
    ensure_roles,
    make_user,
    manager,
    queue,
    reviewer,
    reviewer2,
)
from tests.verification.conftest import (  # noqa: F401 - fixtures shared with the receipts tests
    chain,
    issue_chain,
    make_verification,
    signing_key,
    var_dir,
)
from verification import db_guards
from verification.kernel.chain import sign_entry
from verification.kernel.keys import PrivateKey
from verification.runs.models import Verification
from verification.trust.models import Receipt, SigningKey
from verification.trust.selectors import receipt_payload


@pytest.fixture
def checkpoint_log(settings: Any, var_dir: Path) -> Path:  # noqa: F811 - the fixture above, by name
    """The checkpoint log of this test: ``<var>/checkpoints.log`` (the default location)."""
    settings.REVIEWPORTAL_CHECKPOINT_LOG = None
    return var_dir / "checkpoints.log"


@contextmanager
def guards_lifted(table: str = "verification_receipt") -> Iterator[None]:
    """What the tables' owner can do (a database administrator): the append-only triggers of ``table`` off for a
    moment, then back on; the block runs as the owner (``tests.conftest.as_owner``: the application role may not
    update, delete or truncate an append-only table at all, SPEC §8).

    SQLite: drop the triggers and create them again. PostgreSQL: ``ALTER TABLE … DISABLE/ENABLE TRIGGER`` (the row
    guard and the TRUNCATE guard). An error in the block rolls the savepoint back, and the triggers with it.
    """
    pg_triggers = sorted(db_guards.trigger_names("postgresql", table))
    with as_owner():
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                for sql in db_guards.uninstall_sql("sqlite", (table,)):
                    cursor.execute(sql)
            else:
                # ALTER TABLE refuses while deferred foreign-key checks are pending in this transaction: run them now.
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                for trigger in pg_triggers:
                    cursor.execute(f'ALTER TABLE "{table}" DISABLE TRIGGER "{trigger}"')
        yield
        if connection.vendor == "sqlite":
            db_guards.install_guards(connection, (table,))
        else:
            with connection.cursor() as cursor:
                for trigger in pg_triggers:
                    cursor.execute(f'ALTER TABLE "{table}" ENABLE TRIGGER "{trigger}"')
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def tamper_envelope(receipt: Receipt, old: str, new: str) -> None:
    """Change bytes of a stored receipt's envelope in place (its content hash column unchanged)."""
    assert old in receipt.envelope, receipt.envelope
    with guards_lifted(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE verification_receipt SET envelope = %s WHERE content_hash = %s",
            [receipt.envelope.replace(old, new, 1), receipt.content_hash],
        )


def rogue_key(*, status: str = SigningKey.Status.RETIRED) -> PrivateKey:
    """A key inserted straight into the keys table (never pinned): what an attacker with the database would do."""
    from django.utils import timezone

    key = PrivateKey.generate()
    SigningKey.objects.create(
        key_id=key.public_key.key_id,
        public_key=key.public_key.raw,
        fingerprint=key.public_key.fingerprint,
        status=status,
        created_at=timezone.now(),
        retired_at=timezone.now() if status == SigningKey.Status.RETIRED else None,
    )
    return key


def rewrite_chain(verification: Verification, key: PrivateKey, change: Callable[[dict[str, Any]], None]) -> None:
    """Replace a whole chain with one re-signed by ``key``: same seqs and times, each payload passed to ``change``."""
    old = list(Receipt.objects.filter(verification=verification).order_by("seq"))
    rows: list[Receipt] = []
    prev: str | None = None
    mapping: dict[str, str] = {}
    for receipt in old:
        payload = dict(receipt_payload(receipt))
        change(payload)
        if payload.get("supersedes_receipt_id") in mapping:
            payload["supersedes_receipt_id"] = mapping[payload["supersedes_receipt_id"]]
        entry = sign_entry(
            private_key=key,
            verification_id=str(verification.pk),
            seq=receipt.seq,
            rubric_hash=verification.rubric_hash,
            submission_hash=verification.submission_hash,
            prev_hash=prev,
            payload=payload,
            created_at=receipt.created_at,
        )
        mapping[receipt.content_hash] = entry.content_hash
        rows.append(
            Receipt(
                content_hash=entry.content_hash,
                verification=verification,
                seq=receipt.seq,
                key_id=key.public_key.key_id,
                prev_hash=entry.prev_hash,
                signature=entry.signature,
                envelope=entry.envelope,
                created_at=receipt.created_at,
                kind=receipt.kind,
                verdict=payload.get("verdict"),
                supersedes_receipt_id=payload.get("supersedes_receipt_id"),
            )
        )
        prev = entry.content_hash
    with guards_lifted(), connection.cursor() as cursor:
        for receipt in reversed(old):
            cursor.execute("DELETE FROM verification_receipt WHERE content_hash = %s", [receipt.content_hash])
        for row in rows:
            row.save()

"""receipt_issue's statements on PostgreSQL: pipelined, server-side bound, prepared when the settings allow it.

The fast path must stay the same path: the same rows, Django's exceptions, the statements visible in Django's query
log, and ``REVIEWPORTAL_DB_PREPARED_STATEMENTS`` deciding whether psycopg may prepare them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from tests.conftest import DATABASE_VARIABLES
from verification.trust.models import Receipt
from verification.trust.services import receipts
from verification.trust.services.receipts import receipt_issue

REPO_ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = {"verdict": "PASS", "determination": "met", "authority": "deterministic", "actor": "portal"}


def _database_options(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py shell`` printing the default database's OPTIONS as the settings build them for ``env``."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            *DATABASE_VARIABLES,
            "DJANGO_SETTINGS_MODULE",
            "REVIEWPORTAL_DB_PREPARED_STATEMENTS",
            "SECRET_KEY",
        }
    }
    clean.update({"SECRET_KEY": "x" * 50, "REVIEWPORTAL_VAR_DIR": str(tmp_path / "var"), **env})
    code = "from django.conf import settings as s; print(sorted(s.DATABASES['default'].get('OPTIONS', {}).items()))"
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=REPO_ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_postgresql_connections_may_prepare_unless_turned_off(tmp_path: Path) -> None:
    url = "postgres://someone@127.0.0.1:5432/anything"  # the settings never connect
    on = _database_options(tmp_path, DATABASE_URL=url)
    expected = "[('connect_timeout', 5), ('options', '-c jit=off'), ('prepare_threshold', 5)]"  # jit: issue 15
    assert on.stdout.strip() == expected, on.stderr
    off = _database_options(tmp_path, DATABASE_URL=url, REVIEWPORTAL_DB_PREPARED_STATEMENTS="0")
    assert off.stdout.strip() == "[('connect_timeout', 5), ('options', '-c jit=off')]", off.stderr
    sqlite = _database_options(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}").stdout
    assert "prepare_threshold" not in sqlite and "transaction_mode" in sqlite
    refused = _database_options(tmp_path, DATABASE_URL=url, REVIEWPORTAL_DB_PREPARED_STATEMENTS="maybe")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        "reviewportal: configuration error: REVIEWPORTAL_DB_PREPARED_STATEMENTS: expected 1, 0, true or false, "
        "got 'maybe'"
    ]


@pytest.fixture
def prepared_names() -> Iterator[Any]:
    """The statements this session has prepared (PostgreSQL's own view of it)."""

    def names() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            return {row[0] for row in cursor.fetchall()}

    yield names


@pytest.mark.postgres
def test_the_hot_path_statements_are_prepared_and_logged(
    signing_key: Any, make_verification: Any, prepared_names: Any
) -> None:
    verification = make_verification()
    with CaptureQueriesContext(connection) as captured:
        first = receipt_issue(verification=verification, kind="run", payload=PAYLOAD)
    second = receipt_issue(verification=verification, kind="run", payload={**PAYLOAD, "n": 1})
    assert (first.seq, second.seq, second.prev_hash) == (0, 1, first.content_hash)
    sql = receipts._statements(connection)
    logged = [q["sql"] for q in captured.captured_queries]
    assert logged.count(sql.lock) == logged.count(sql.state) == logged.count(sql.insert) == 1
    assert connection.connection.prepare_threshold is not None  # the test settings import the real ones
    prepared = prepared_names()
    for statement in (sql.lock, sql.state, sql.insert):
        # psycopg sends %s as $n
        assert any(p.startswith(statement.split("%s")[0].rstrip()) for p in prepared), (statement, prepared)
    stored = Receipt.objects.get(content_hash=second.content_hash)
    assert (stored.seq, stored.envelope, stored.actor) == (1, second.envelope, "portal")


@pytest.mark.postgres
def test_without_prepared_statements_the_same_receipts_are_issued(
    signing_key: Any, make_verification: Any, prepared_names: Any
) -> None:
    connection.ensure_connection()
    raw = connection.connection
    threshold = raw.prepare_threshold
    raw.prepare_threshold = None  # as with REVIEWPORTAL_DB_PREPARED_STATEMENTS=0
    try:
        raw.execute("DEALLOCATE ALL")  # psycopg forgets its own, too
        assert prepared_names() == set()
        verification = make_verification()
        run = receipt_issue(verification=verification, kind="run", payload=PAYLOAD)
        result = receipt_issue(verification=verification, kind="result", payload=PAYLOAD)
        assert prepared_names() == set()
    finally:
        raw.prepare_threshold = threshold
    assert [r.content_hash for r in Receipt.objects.filter(verification=verification).order_by("seq")] == [
        run.content_hash,
        result.content_hash,
    ]


@pytest.mark.postgres
def test_a_refused_insert_raises_djangos_integrity_error(signing_key: Any, make_verification: Any) -> None:
    """Errors from the statements sent past Django's cursor still arrive as Django's (the tasks retry on them)."""
    verification = make_verification()
    stored = receipt_issue(verification=verification, kind="run", payload=PAYLOAD)
    again = Receipt(**{f.attname: getattr(stored, f.attname) for f in Receipt._meta.concrete_fields})
    with pytest.raises(IntegrityError), transaction.atomic():
        receipts._insert(connection, again)
    assert Receipt.objects.filter(verification=verification).count() == 1

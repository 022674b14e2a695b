"""``pgwire.exchange``: statements in one round trip below psycopg's cursors (issue 15), on PostgreSQL.

What it must keep from the cursors it replaced: the same values and rows (Django's loaders included), the transaction
as psycopg keeps it (BEGIN when due, the COMMIT, an error leaving it failed), prepared statements that the server and
psycopg's registry agree on whatever happens to the connection, and psycopg's exception for the SQLSTATE.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from django.db import connection
from psycopg import errors, pq

from verification import pgwire
from verification.pgwire import Statement, exchange

pytestmark = pytest.mark.postgres

IDLE, INTRANS, INERROR = pq.TransactionStatus.IDLE, pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR


def _params() -> dict[str, Any]:
    connection.ensure_connection()
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return params


@pytest.fixture
def raw(db: None) -> Iterator[psycopg.Connection[Any]]:
    """A connection of its own (psycopg's defaults: outside autocommit, statements may be prepared), with a table."""
    pg = psycopg.connect(**_params())
    pg.prepare_threshold = 5
    pg.execute("CREATE TEMP TABLE wire_t (id int PRIMARY KEY, note text)")
    pg.commit()
    try:
        yield pg
    finally:
        pg.close()


def _prepared_on_server(pg: psycopg.Connection[Any]) -> list[str]:
    with pg.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements ORDER BY name")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db
def test_values_and_rows_come_back_as_a_cursor_gives_them() -> None:
    sql = "SELECT %s::uuid, %s::timestamptz, %s::text IS NULL, %s::int + 1, '5%%', %s::jsonb"
    params = [uuid.UUID(int=7), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), None, 41, '{"a": [1, "é"]}']
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        expected = cursor.fetchall()
    connection.ensure_connection()
    (rows,), _ = exchange(connection.connection, [Statement(sql, params, True)], prepare=True)
    assert rows == expected
    assert rows[0][:5] == (uuid.UUID(int=7), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), True, 42, "5%")
    assert rows[0][1].tzinfo is not None  # Django's loader for timestamptz, as through its cursor


def test_a_statement_is_prepared_once_per_connection(raw: psycopg.Connection[Any]) -> None:
    insert = Statement("INSERT INTO wire_t (id, note) VALUES (%s, %s)", [1, "a"], False)
    answers, status = exchange(raw, [insert], prepare=True, commit=True)
    assert (answers, status) == ([1], "COMMIT")
    first = _prepared_on_server(raw)
    assert len(first) == 1 and first[0].startswith("_rp_")
    for n in (2, 3):
        assert exchange(raw, [Statement(insert.sql, [n, "b"], False)], prepare=True, commit=True)[0] == [1]
    assert _prepared_on_server(raw) == first  # prepared once, used three times
    assert sorted(raw.execute("SELECT id FROM wire_t").fetchall()) == [(1,), (2,), (3,)]


def test_without_prepare_nothing_is_prepared(raw: psycopg.Connection[Any]) -> None:
    raw.prepare_threshold = None  # REVIEWPORTAL_DB_PREPARED_STATEMENTS=0
    assert not pgwire.may_prepare(raw)
    answers, _ = exchange(raw, [Statement("SELECT %s::int", [5], True)], prepare=pgwire.may_prepare(raw))
    assert answers == [[(5,)]]
    assert _prepared_on_server(raw) == []


@pytest.mark.parametrize("forget", ["rollback", "DEALLOCATE ALL", "DISCARD ALL"])
def test_what_makes_psycopg_forget_its_statements_forgets_these(raw: psycopg.Connection[Any], forget: str) -> None:
    select = Statement("SELECT %s::text || '!'", ["kept"], True)  # no table: DISCARD ALL drops temporary ones
    assert exchange(raw, [select], prepare=True)[0] == [[("kept!",)]]
    assert exchange(raw, [Statement("SELECT %s::int", [2], True)], prepare=True)[0] == [[(2,)]]
    assert len(_prepared_on_server(raw)) == 2
    if forget == "rollback":
        raw.rollback()
    else:
        raw.rollback()
        raw.autocommit = True  # DISCARD ALL cannot run in a transaction block
        raw.execute(forget)
        raw.autocommit = False
    assert _prepared_on_server(raw) == []
    raw.rollback()
    # The registry forgot them too: the statement is prepared again, not executed under a name the server dropped.
    assert exchange(raw, [select], prepare=True)[0] == [[("kept!",)]]
    assert len(_prepared_on_server(raw)) == 1


def test_the_first_error_raises_by_its_sqlstate_and_nothing_after_it_runs(raw: psycopg.Connection[Any]) -> None:
    statements = [
        Statement("INSERT INTO wire_t VALUES (%s, %s)", [1, "before"], False),
        Statement("INSERT INTO wire_t VALUES (%s, %s)", [1, "duplicate"], False),
        Statement("INSERT INTO wire_t VALUES (%s, %s)", [2, "after"], False),
    ]
    with pytest.raises(errors.UniqueViolation):
        exchange(raw, statements, prepare=True, commit=True)
    assert raw.info.transaction_status == INERROR  # the COMMIT did not run either: the caller rolls back
    raw.rollback()
    assert raw.execute("SELECT count(*) FROM wire_t").fetchone() == (0,)
    assert exchange(raw, statements[2:], prepare=True, commit=True)[1] == "COMMIT"  # the connection goes on
    assert raw.execute("SELECT id FROM wire_t").fetchall() == [(2,)]


def test_a_statement_the_server_cannot_parse_is_not_recorded_as_prepared(raw: psycopg.Connection[Any]) -> None:
    with pytest.raises(errors.SyntaxError):
        exchange(raw, [Statement("SELEC %s", [1], True)], prepare=True)
    assert raw._prepared._names == {}
    raw.rollback()
    assert exchange(raw, [Statement("SELECT %s::int", [1], True)], prepare=True)[0] == [[(1,)]]


def test_begin_when_due_and_commit_in_the_same_round_trip(raw: psycopg.Connection[Any]) -> None:
    assert raw.info.transaction_status == IDLE
    exchange(raw, [Statement("INSERT INTO wire_t VALUES (%s, %s)", [1, "x"], False)], prepare=True)
    assert raw.info.transaction_status == INTRANS  # psycopg's BEGIN was sent first, as its cursor would
    raw.rollback()
    assert raw.execute("SELECT count(*) FROM wire_t").fetchone() == (0,)
    raw.rollback()
    raw.autocommit = True
    exchange(raw, [Statement("INSERT INTO wire_t VALUES (%s, %s)", [2, "y"], False)], prepare=True, begin=True)
    assert raw.info.transaction_status == INTRANS  # ``begin`` opens one on a connection that autocommits
    answers, status = exchange(raw, [], prepare=True, commit=True)
    assert (answers, status, raw.info.transaction_status) == ([], "COMMIT", IDLE)
    assert raw.execute("SELECT id, note FROM wire_t").fetchall() == [(2, "y")]


def test_a_large_value_and_many_statements_in_one_round_trip(raw: psycopg.Connection[Any]) -> None:
    big = "x" * (8 * 1024 * 1024)  # far more than a socket's buffer either way
    statements = [Statement("INSERT INTO wire_t VALUES (%s, %s) RETURNING length(note)", [1, big], True)]
    statements += [Statement("SELECT %s::int, repeat('y', 100000)", [n], True) for n in range(50)]
    answers, status = exchange(raw, statements, prepare=True, commit=True)
    assert status == "COMMIT"
    assert answers[0] == [(len(big),)]
    assert [rows[0][0] for rows in answers[1:]] == list(range(50))
    assert raw.execute("SELECT length(note) FROM wire_t").fetchone() == (len(big),)


def test_only_django_placeholders_are_sent(raw: psycopg.Connection[Any]) -> None:
    with pytest.raises(ValueError, match="only %s placeholders"):
        exchange(raw, [Statement("SELECT %d", [1], True)], prepare=True)
    assert raw.info.transaction_status == IDLE  # refused before anything was sent


def test_a_statement_whose_rows_are_wanted_must_answer_rows(raw: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.ProgrammingError, match="no rows"):
        exchange(raw, [Statement("INSERT INTO wire_t VALUES (%s, %s)", [1, "x"], True)], prepare=True)


@pytest.mark.django_db
def test_timestamps_are_read_in_c_as_django_would_read_them() -> None:
    from django.db.backends.postgresql.psycopg_any import BaseTzLoader

    connection.ensure_connection()
    oid = psycopg.postgres.types["timestamptz"].oid
    loader = connection.connection.adapters.get_loader(oid, pq.Format.TEXT)
    assert loader is not None and not issubclass(loader, BaseTzLoader)  # not Django's pure-Python parser
    assert loader.timezone == connection.timezone  # what Django's cursors compare: they keep the connection's loader
    texts = [
        "2026-12-07 19:00:00+00",
        "2026-12-07 19:00:00.123456+00",
        "1970-01-01 00:00:00+00",
        "9999-12-31 23:59:59.999999+00",
        "2001-02-03 04:05:06.7+05:30",
    ]

    class Django(BaseTzLoader):
        timezone = connection.timezone

    for text in texts:
        ours = loader(oid, connection.connection).load(text.encode())
        djangos = Django(oid, connection.connection).load(text.encode())
        assert (ours, ours.tzinfo, ours.isoformat()) == (djangos, djangos.tzinfo, djangos.isoformat())
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::timestamptz", ["2026-12-07T19:00:00.5+01:00"])
        (read,) = cursor.fetchone()
    assert read == datetime(2026, 12, 7, 18, 0, 0, 500000, tzinfo=UTC) and read.tzinfo is connection.timezone


def test_a_connection_lost_on_the_way_raises_what_happened(raw: psycopg.Connection[Any]) -> None:
    with psycopg.connect(**_params(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [raw.info.backend_pid])
    with pytest.raises(psycopg.OperationalError) as refused:
        exchange(raw, [Statement("SELECT %s::int", [1], True)], prepare=True)
    assert "pipeline" not in str(refused.value)  # the server's closing, not a failure to leave pipeline mode
    assert raw.broken or raw.closed  # Django sees a connection it must replace


def test_at_most_prepared_max_statements_stay_prepared(raw: psycopg.Connection[Any]) -> None:
    raw.prepared_max = 3
    for n in range(6):  # six statements, each prepared in turn
        assert exchange(raw, [Statement(f"SELECT %s::int + {n}", [1], True)], prepare=True)[0] == [[(1 + n,)]]
    exchange(raw, [Statement("SELECT %s::int + 0", [1], True)], prepare=True)  # the evicted first, prepared again
    on_server = _prepared_on_server(raw)
    assert len(raw._prepared._names) == 3
    assert len(on_server) <= 4  # the last eviction's DEALLOCATE goes before the next statement
    assert set(raw._prepared._names.values()) <= {name.encode() for name in on_server}
    exchange(raw, [Statement("SELECT %s::int + 0", [1], True)], prepare=True)  # prepared: sends the DEALLOCATE first
    assert len(_prepared_on_server(raw)) == 3  # what the registry holds, and no more

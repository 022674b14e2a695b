"""Statements to PostgreSQL in ONE round trip, sent below psycopg's cursors (issue 15).

The hot paths (a submission, a run, a decision, a claim, a receipt) send their statements pipelined, each prepared
once per connection. Through psycopg's cursors and ``Connection.pipeline`` that cost this process ~150 µs of CPU
per round trip and ~30 µs per statement (a cursor per statement, the pipeline's bookkeeping, each query's
conversion from ``%s`` to ``$n``; a query over 4 KB is converted again on every call); measured on this machine: 4
lookups by key in one pipeline 250–290 µs through cursors, 80–90 µs here. ``exchange`` does the same protocol work
with psycopg's own C pieces and nothing else:

* each query's ``%s``/``%%`` is converted once per process (Django writes nothing else into SQL);
* the values are dumped, and the rows loaded, by psycopg's ``Transformer`` over the connection's adapters (Django's
  time zone loaders included), exactly as a cursor would;
* prepared statements are kept in psycopg's own registry of the connection (``PrepareManager``, at most its
  ``prepared_max``, the least recently used deallocated first), under names of their own: whatever makes psycopg
  forget its prepared statements (a ROLLBACK, ``DEALLOCATE ALL``, ``DISCARD ALL``, a DROP or ALTER) forgets these
  too, and psycopg's pending ``DEALLOCATE`` are sent before anything here, so the registry and the server agree; a
  statement is recorded as prepared only once the server answered its Parse;
* the transaction's BEGIN, when one is due (Django's connection outside autocommit), goes in the same round trip,
  as does the COMMIT (``commit=True``);
* the first error the server answers raises, after the pipeline's sync was read, as psycopg's exception of its
  SQLSTATE (Django's ``wrap_database_errors`` maps it as it maps any psycopg error).

It relies on psycopg 3.3's connection internals (``pgconn``, ``_prepared``, ``_get_tx_start_command``, the C
generators), pinned exactly in requirements.txt; ``tests/verification/test_pgwire.py`` holds what it must keep.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator, Sequence
from typing import Any, Final

#: Django's SQL holds ``%s`` placeholders and ``%%`` for a literal percent sign, nothing else (``compiled`` reads
#: its constants' places with this too).
PLACEHOLDER: Final = re.compile(r"%(.)", re.DOTALL)
_NAMES: Final = itertools.count(1)


class Statement:
    """One statement of an exchange: its SQL (``%s`` placeholders), values, and whether its rows are wanted
    (``rows``; else its count of rows changed)."""

    __slots__ = ("params", "rows", "sql")

    def __init__(self, sql: str, params: Sequence[Any] | None, rows: bool) -> None:
        self.sql, self.params, self.rows = sql, params, rows


_converted: dict[str, tuple[bytes, list[Any]]] = {}
_CONVERTED_MAX: Final = 4096


def _convert(sql: str) -> tuple[bytes, list[Any]]:
    """``sql`` with ``$n`` placeholders, as UTF-8 (the portal's connections' encoding), and each value's format."""
    found = _converted.get(sql)
    if found is not None:
        return found
    from psycopg.adapt import PyFormat

    count = 0

    def placeholder(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        if match.group(1) != "s":
            raise ValueError(f"only %s placeholders are sent this way, found %{match.group(1)}")  # noqa: TRY003
        count += 1
        return f"${count}"

    text = PLACEHOLDER.sub(placeholder, sql)
    if len(_converted) >= _CONVERTED_MAX:  # a bound, as psycopg's own cache has: start afresh
        _converted.clear()
    found = _converted[sql] = (text.encode("utf-8"), [PyFormat.AUTO] * count)
    return found


def may_prepare(pg: Any) -> bool:
    """Whether the connection's statements may be prepared (psycopg's ``prepare_threshold`` not None: the settings'
    REVIEWPORTAL_DB_PREPARED_STATEMENTS, off behind a pooler that cannot carry them)."""
    return pg.prepare_threshold is not None


def exchange(
    pg: Any, statements: Sequence[Statement], *, prepare: bool, begin: bool = False, commit: bool = False
) -> tuple[list[Any], str]:
    """Send ``statements`` on psycopg connection ``pg`` in ONE pipelined round trip (each prepared when ``prepare``;
    the transaction's BEGIN first when one is due, or with ``begin`` on a connection that autocommits; ``commit``:
    the COMMIT last) and answer each one's rows or count of rows changed, with the last command's status
    (``"COMMIT"`` when it committed)."""
    import psycopg
    from psycopg import errors, pq
    from psycopg.adapt import Transformer

    ok, tuples_ok = pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK
    with pg.lock:
        pg._check_connection_ok()
        if pg._pipeline is not None:  # pragma: no cover - the portal opens no psycopg pipeline
            raise psycopg.ProgrammingError("exchange() inside psycopg's pipeline")
        prepared = pg._prepared
        if prepared._to_flush:
            pg.wait(prepared.maintain_gen(pg))  # psycopg's pending DEALLOCATEs go before any statement here
        pgconn = pg.pgconn
        tx = Transformer(pg)
        # Every value is dumped before anything is sent: one that cannot be leaves the connection as it was.
        dumped = []
        for statement in statements:
            query, formats = _convert(statement.sql)
            if formats:
                params = tx.dump_sequence(statement.params or (), formats)
                dumped.append((query, params, tuple(tx.types), tx.formats))
            else:
                dumped.append((query, None, (), None))
        # What each command sent answers: None (BEGIN, COMMIT), a (key, name) prepared, or a statement's index.
        expected: list[Any] = []
        naming: dict[Any, bytes] = {}  # prepared in this exchange, recorded once the server answered its Parse
        pgconn.enter_pipeline_mode()
        try:
            if (begin or not pg.autocommit) and pgconn.transaction_status == pq.TransactionStatus.IDLE:
                pgconn.send_query_params(pg._get_tx_start_command(), None)
                expected.append(None)
            for index, (query, params, types, param_formats) in enumerate(dumped):
                if not prepare:
                    pgconn.send_query_params(query, params, param_types=types, param_formats=param_formats)
                else:
                    key = (query, types)
                    name = prepared._names.get(key)
                    if name is not None:
                        prepared._names.move_to_end(key)  # used: the last to be evicted (psycopg's LRU order)
                    elif key in naming:  # already prepared earlier in this exchange
                        name = naming[key]
                    else:
                        name = naming[key] = b"_rp_%d" % next(_NAMES)
                        pgconn.send_prepare(name, query, param_types=types)
                        expected.append((key, name))
                    pgconn.send_query_prepared(name, params, param_formats=param_formats)
                expected.append(index)
            if commit:
                pgconn.send_query_params(b"COMMIT", None)
                expected.append(None)
            pgconn.pipeline_sync()
            answered = pg.wait(_communicate(pgconn, len(expected)))
        except BaseException:
            # A lost connection (or an interrupt) left answers unread: leave pipeline mode if libpq can, and raise
            # what happened, not why leaving failed (Django closes a connection whose statement failed this way).
            with contextlib.suppress(Exception):
                pgconn.exit_pipeline_mode()
            raise
        pgconn.exit_pipeline_mode()
        answers: list[Any] = [None] * len(statements)
        failure: Exception | None = None
        status = ""
        for what, results in zip(expected, answered, strict=True):
            result = results[-1]
            if result.status == pq.ExecStatus.FATAL_ERROR:
                if failure is None:
                    failure = errors.error_from_result(result, encoding=pg.info.encoding)
                continue
            if result.status not in (ok, tuples_ok):
                continue  # PIPELINE_ABORTED after the first error
            status = (result.command_status or b"").decode()
            if isinstance(what, tuple):
                prepared._names[what[0]] = what[1]
                # At most ``prepared_max`` per connection, as psycopg keeps its own: the least recently used is
                # deallocated before the next statement goes out (``maintain_gen`` above).
                prepared._rotate()
            elif isinstance(what, int):
                if not statements[what].rows:
                    answers[what] = result.command_tuples or 0
                elif result.status != tuples_ok:
                    failure = psycopg.ProgrammingError("the statement returned no rows to read")
                else:
                    tx.set_pgresult(result)
                    answers[what] = tx.load_rows(0, result.ntuples, tuple)
        if failure is not None:
            raise failure
        return answers, status


def _communicate(pgconn: Any, commands: int) -> Iterator[Any]:
    """Flush what was sent (reading meanwhile, so a full socket on either side cannot stall the server) and read
    each command's results, then the pipeline's sync."""
    from psycopg import generators, pq

    yield from generators.send(pgconn)
    answered = []
    while True:
        results = yield from generators.fetch_many(pgconn)
        if not results:  # pragma: no cover - every command answers at least one result
            raise RuntimeError("the server's answers ended before the pipeline's sync")  # noqa: TRY003
        if results[0].status == pq.ExecStatus.PIPELINE_SYNC:
            if len(answered) == commands:
                return answered
            continue  # pragma: no cover - one sync per exchange
        answered.append(results)


# --- timestamps read in C ---------------------------------------------------------------------------------------------


def use_c_timestamptz_loader(connection: Any) -> None:
    """On a new PostgreSQL connection of Django's: read ``timestamptz`` text with psycopg's C parser.

    Django registers a loader that subclasses psycopg's pure-Python ``TimestamptzLoader`` (to label each value with
    the connection's time zone), so every timestamp read by any query was parsed in Python (~10 µs each: 4-6 % of a
    request's time on the review pages and of a run's). This one gives the same value, the C loader's result labelled
    with the same time zone as Django's (``datetime.replace``, as Django's does), keeps the ``timezone`` attribute
    Django's cursors compare with theirs, and is registered on this connection's adapters only."""
    if connection.vendor != "postgresql" or connection.connection is None:
        return
    import psycopg
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    oid = psycopg.postgres.types["timestamptz"].oid
    parser_class = psycopg.adapters.get_loader(oid, Format.TEXT)  # psycopg's own: its C class where it has one
    if parser_class is None or not parser_class.__module__.startswith("psycopg_binary"):
        return  # pragma: no cover - the pure-Python psycopg: Django's loader is as fast as any
    timezone = connection.timezone

    class TimestamptzInC(Loader):
        def __init__(self, oid: int, context: Any = None) -> None:
            super().__init__(oid, context)
            self._parse = parser_class(oid, context).load

        def load(self, data: Any) -> Any:
            return self._parse(data).replace(tzinfo=timezone)

    TimestamptzInC.timezone = timezone  # type: ignore[attr-defined]
    connection.connection.adapters.register_loader(oid, TimestamptzInC)

"""Queries compiled once (issue 15): the ORM builds a hot query's SQL once per database, then each call sends that
text with its own values, so the pipeline does not pay Django's query compilation on every verification (measured:
building a statement with subqueries cost more than running it).

A ``Compiled`` query is declared with a builder and a probe pair per argument. It is compiled with every argument's
first probe, then once more per argument with that argument's second probe: the parameters that differ are exactly
that argument's places, each checked to hold its probe's database form, and the SQL text must not change (a value
that shaped the SQL, an ``IN`` list say, is refused at the first call rather than answered wrongly). Rows come back
in Python's types (the output fields' database converters applied: SQLite's datetimes, UUIDs and booleans).
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from django.db import DatabaseError, connections, router, transaction
from django.db.models import Field, Model, QuerySet, Value, signals
from django.db.models.base import ModelState
from django.db.models.sql import UpdateQuery

from verification import pgwire


@dataclass(frozen=True)
class Probe:
    """Two distinct values an argument takes while compiling, and the field that gives their database form (None:
    the value is sent as it is)."""

    first: Any
    second: Any
    field: Field[Any, Any] | None = None

    @classmethod
    def key_of(cls, model: type[Model]) -> Probe:
        """Two UUIDs for an argument that is ``model``'s (UUID) primary key."""
        return cls(uuid.UUID(int=0xC0FFEE01), uuid.UUID(int=0xC0FFEE02), model._meta.pk)

    @classmethod
    def instant(cls, field: Field[Any, Any]) -> Probe:
        """Two instants for a timestamp argument, in ``field``'s database form."""
        return cls(datetime(2001, 1, 1, tzinfo=UTC), datetime(2002, 2, 2, tzinfo=UTC), field)


@dataclass(frozen=True)
class _Text:
    sql: str
    params: tuple[Any, ...]
    positions: Mapping[str, tuple[int, ...]]
    outputs: tuple[Any, ...]
    #: (column, output field, its database converters), for the columns that have any (found once, not per call)
    converters: tuple[tuple[int, Any, tuple[Any, ...]], ...] = ()


def send(alias: str, sql: str, params: Sequence[Any], *, prepared: bool, rows: bool) -> Any:
    """Send one statement on ``alias``'s connection: its rows (``rows``) or the count of rows it changed.

    ``prepared`` on PostgreSQL: with server-side binding (``pgwire.exchange``), prepared once per connection when
    the connection allows it (settings: REVIEWPORTAL_DB_PREPARED_STATEMENTS;
    off behind a pooler). For the pipeline's statements planning cost several times running them (measured: 2.7 ms of
    planning against 1.0 ms of execution per verification), and their plans, lookups by key, do not depend on the
    values. Such a statement still shows on ``connection.queries`` when Django records queries (DEBUG,
    ``CaptureQueriesContext``). Elsewhere, and unprepared, through Django's cursor."""
    conn = connections[alias]
    _send_pending(conn)  # writes queued before this statement go first (``writes_batched``)
    if not prepared or conn.vendor != "postgresql":
        with conn.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if rows else int(cursor.rowcount)
    answers, _ = exchange(conn, [pgwire.Statement(sql, params, rows)])
    return answers[0]


#: The implicit transaction's commit leaves the WAL flush to the next synchronous commit (``send_unsynced``).
_UNSYNCED: Final = "SELECT set_config('synchronous_commit', 'off', true)"


def send_unsynced(alias: str, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]] | None:
    """On PostgreSQL outside a transaction: ``sql`` in a transaction of its own whose commit does not wait for the
    disk (``synchronous_commit`` off for that transaction only, sent with it in one round trip); its rows. None
    elsewhere (the caller sends it as usual).

    For a write whose loss in a crash of the database server is harmless, and which must be visible to others at
    once: it is, as any commit; only the WAL flush is left to the next synchronous commit on the server (which
    flushes every record written before its own, this one included) or the WAL writer (``wal_writer_delay``)."""
    conn = connections[alias]
    if conn.vendor != "postgresql" or conn.in_atomic_block:
        return None
    if not conn.get_autocommit():  # pragma: no cover - outside a transaction Django's connection autocommits
        return None
    _send_pending(conn)
    # In a pipeline, the statements up to its sync are one implicit transaction, which a local setting lasts for.
    # set_config(..., true), not SET LOCAL: the server logged a WARNING ("SET LOCAL can only be used in transaction
    # blocks") for every SET LOCAL outside BEGIN, once per run, though the setting held.
    answers, _ = exchange(conn, [pgwire.Statement(_UNSYNCED, None, False), pgwire.Statement(sql, params, True)])
    found: list[tuple[Any, ...]] = answers[1]
    return found


def exchange(
    conn: Any, statements: Sequence[pgwire.Statement], *, begin: bool = False, commit: bool = False
) -> tuple[list[Any], str]:
    """``pgwire.exchange`` on Django's PostgreSQL connection ``conn``: the statements in one round trip, prepared when
    the connection allows it, a refusal raised as Django's error, and the statements put on ``conn.queries`` when
    Django records queries (DEBUG, ``CaptureQueriesContext``). The one way the portal sends statements past Django's
    cursor: the compiled queries' ``send``, ``send_unsynced``, ``pipelined`` and batched writes, the claim's statement
    and the receipt's lock."""
    started = time.monotonic()
    with conn.wrap_database_errors:
        # What Django's cursor does first: a kept connection (CONN_MAX_AGE) that the server dropped (a restart) is
        # replaced, checked once per request or task (CONN_HEALTH_CHECKS), instead of failing the statement.
        conn.close_if_health_check_failed()
        conn.ensure_connection()
        conn.validate_no_broken_transaction()  # what Django's cursor checks before every statement
        pg = conn.connection
        answered = pgwire.exchange(pg, statements, prepare=pgwire.may_prepare(pg), begin=begin, commit=commit)
    if conn.queries_logged:
        took = f"{time.monotonic() - started:.3f}"
        for statement in statements:
            conn.queries_log.append({"sql": statement.sql, "time": took})
    return answered


# --- writes sent together ---------------------------------------------------------------------------------------------


@dataclass
class _Pending:
    sql: str
    params: Sequence[Any]
    rows: bool  # the statement answers rows (RETURNING) that ``then`` receives; else its count of rows changed
    then: Callable[[Any], None] | None


@dataclass
class _Batch:
    pending: list[_Pending]


def _batch_of(conn: Any) -> _Batch | None:
    batch: _Batch | None = getattr(conn, "_rp_write_batch", None)
    return batch


@contextlib.contextmanager
def writes_batched(alias: str = "default", *, with_commit: bool = False) -> Iterator[None]:
    """Within the block, the writes sent through ``queue`` (``Insert``, ``Compiled.run_later``, a receipt's and an
    event's INSERT) wait, and go to the server together in ONE pipelined round trip (prepared, as ``send`` sends
    them) when the block ends, or before any other statement on the connection: Django's cursor (an
    ``execute_wrapper``), ``send``, ``pipelined``. The server runs them in the order they were queued, each before any
    later statement, so what the block does is what it would do statement by statement, in fewer round trips (issue
    15: a run's receipt, head columns and event; a submission's evidence, verification, bindings and results).

    A value a queued statement answers (a key from RETURNING) reaches its instance when the batch is sent; a queued
    statement that fails raises there, as Django's database error, inside the caller's transaction (which must be
    open: outside one, and on other vendors than PostgreSQL, every statement is sent at once). A block left by an
    exception still sends what it queued when the transaction can take it (a caller that catches the exception
    inside its transaction keeps what was written before it, as without the batch). Nested blocks share the
    outermost one's batch.

    ``with_commit`` (``atomic_batched``'s): the block is the whole body of the outermost transaction, so the writes
    still queued when it ends go with the transaction's COMMIT, in the same round trip."""
    conn = connections[alias]
    if conn.vendor != "postgresql" or not conn.in_atomic_block or _batch_of(conn) is not None:
        yield
        return
    batch = conn._rp_write_batch = _Batch([])

    def flush_first(execute: Any, sql: Any, params: Any, many: Any, context: Any) -> Any:
        _send_pending(conn)
        return execute(sql, params, many, context)

    try:
        with conn.execute_wrapper(flush_first):
            yield
    except BaseException:
        import psycopg

        healthy = conn.connection is not None and (
            conn.connection.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        )
        if batch.pending and healthy:
            _send_pending(conn)  # raises its own error (chained to this one) if the server refuses them
        raise
    else:
        # A transaction to be rolled back would undo the queued writes: they are not sent.
        if not conn.needs_rollback:
            _send_pending(conn, commit=with_commit and _commit_due(conn))
    finally:
        batch.pending.clear()
        conn._rp_write_batch = None


def _commit_due(conn: Any) -> bool:
    """The transaction of ``conn`` ends in a COMMIT once the current block is left (nothing marked it for rollback):
    it is the outermost atomic block, and it is open and unfailed (or not begun yet: its BEGIN goes with the
    writes)."""
    import psycopg

    status = psycopg.pq.TransactionStatus
    return (
        len(conn.atomic_blocks) == 1
        and conn.connection is not None
        and not conn.connection.autocommit
        and conn.connection.info.transaction_status in (status.INTRANS, status.IDLE)
    )


@contextlib.contextmanager
def atomic_batched(alias: str = "default") -> Iterator[None]:
    """``transaction.atomic`` whose body is a ``writes_batched`` block. When it opens the transaction (the outermost
    block) on PostgreSQL, the writes still queued at its end go to the server with the COMMIT, in ONE round trip (the
    ORM's commit then finds the transaction closed and sends nothing); a COMMIT the server refuses (a deferred
    constraint) raises there, as Django's error, and the block rolls back as for any error: nothing is kept and no
    ``on_commit`` hook runs. Nested in another transaction, or with no write queued, it is ``transaction.atomic`` with
    a batch. Issue 15: a submission, a run and a decision each end with their writes, which then cost no round trip
    of their own."""
    conn = connections[alias]
    outermost = conn.vendor == "postgresql" and not conn.in_atomic_block
    with transaction.atomic(using=alias), writes_batched(alias, with_commit=outermost):
        yield


def queue(alias: str, sql: str, params: Sequence[Any], *, rows: bool, then: Callable[[Any], None] | None) -> None:
    """A write, sent prepared (``send``) now or, inside ``writes_batched``, with the batch; ``then`` receives its rows
    (``rows``) or its count of rows changed, once sent."""
    conn = connections[alias]
    batch = _batch_of(conn)
    if batch is None:
        found = send(alias, sql, params, prepared=True, rows=rows)
        if then is not None:
            then(found)
        return
    batch.pending.append(_Pending(sql, params, rows, then))


def _send_pending(conn: Any, *, commit: bool = False) -> None:
    """Send the writes waiting in ``conn``'s batch, in one pipelined round trip (``commit``: with the transaction's
    COMMIT after them), and hand each its answer."""
    batch = _batch_of(conn)
    if batch is None or not batch.pending:
        return
    pending, batch.pending = batch.pending, []
    answers = _send_together(conn, [(write.sql, write.params, write.rows) for write in pending], commit=commit)
    for write, answer in zip(pending, answers, strict=True):
        if write.then is not None:
            write.then(answer)


def _send_together(
    conn: Any, statements: Sequence[tuple[str, Sequence[Any], bool]], *, commit: bool = False
) -> list[Any]:
    """Send ``statements`` (SQL, parameters, whether it answers rows) on PostgreSQL connection ``conn`` in ONE round
    trip (pipelined, each prepared when the connection allows it; with the transaction's BEGIN when one is due): each
    one's rows, or its count of rows changed. The one sender of ``pipelined`` and ``writes_batched``.

    ``commit``: the transaction's COMMIT goes last, in the same round trip (``atomic_batched``). It is not put on
    ``conn.queries``: the ORM's commit, which follows and finds nothing left to send, records it there as before."""
    answers, status = exchange(
        conn, [pgwire.Statement(sql, params, rows) for sql, params, rows in statements], commit=commit
    )
    if commit and status != "COMMIT":  # pragma: no cover - a failed write raised above
        raise DatabaseError(f"the transaction was not committed ({status})")
    return answers


class Compiled:
    """``build(**arguments)``: a queryset of ``model`` (rows: its ``values_list``/``values`` columns), or with
    ``update`` the queryset whose rows ``update(**arguments)`` sets (``run`` answers the count of rows updated).
    ``prepared``: sent prepared on PostgreSQL (``send``), for a statement whose plan does not depend on its values (a
    lookup by key, the unfiltered queue page in its index's order); not for one whose best plan does (a filtered
    queue read, whose constants pick an index). ``literals``: on PostgreSQL the values that are not arguments (the
    query's own constants, which Django sends as parameters) are written into the SQL text as literals, so the
    server's generic plan of a prepared statement can use an index on an expression of those constants (the queue's
    rank) as a plan made for the values does; the arguments stay parameters."""

    def __init__(
        self,
        name: str,
        model: type[Model],
        build: Callable[..., QuerySet[Any, Any]],
        probes: Mapping[str, Probe],
        *,
        update: Callable[..., Mapping[str, Any]] | None = None,
        returning: Sequence[str] = (),
        prepared: bool = False,
        literals: bool = False,
    ) -> None:
        self.name, self._model, self._build, self._probes, self._update = name, model, build, dict(probes), update
        self._prepared = prepared
        self._literals = literals
        #: With ``update``: the updated rows' columns (field names) that ``rows`` answers (``UPDATE … RETURNING``).
        self._returning = tuple(returning)
        if self._returning and update is None:
            raise TypeError(f"{name}: returning= is for an UPDATE")
        self._texts: dict[tuple[str, str], _Text] = {}

    @property
    def _alias(self) -> str:
        route = router.db_for_write if self._update is not None else router.db_for_read
        return str(route(self._model))

    def _compiler(self, arguments: Mapping[str, Any]) -> Any:
        queryset = self._build(**arguments)
        if self._update is None:
            return queryset.query.get_compiler(using=self._alias)
        query = queryset.query.chain(UpdateQuery)
        query.add_update_values(self._update(**arguments))
        compiler = query.get_compiler(using=self._alias)
        compiler.pre_sql_setup()  # what execute_sql does first (a filter over other tables becomes ``pk IN``)
        return compiler

    def _prep(self, name: str, value: Any, conn: Any) -> Any:
        field = self._probes[name].field
        return value if field is None else field.get_db_prep_value(value, conn)

    def _text(self, alias: str) -> _Text:
        conn = connections[alias]
        key = (alias, conn.vendor)
        found = self._texts.get(key)
        if found is not None:
            return found
        first = {n: p.first for n, p in self._probes.items()}
        compiler = self._compiler(first)
        sql, base = compiler.as_sql()
        positions: dict[str, tuple[int, ...]] = {}
        for name, probe in self._probes.items():
            other_sql, params = self._compiler({**first, name: probe.second}).as_sql()
            if other_sql != sql or len(params) != len(base):
                raise AssertionError(f"{self.name}: the argument {name!r} is not a plain parameter")  # noqa: TRY003
            at = tuple(i for i, (a, b) in enumerate(zip(base, params, strict=True)) if a != b)
            a, b = self._prep(name, probe.first, conn), self._prep(name, probe.second, conn)
            if not at or any(base[i] != a or params[i] != b for i in at):
                raise AssertionError(f"{self.name}: the argument {name!r} is not a plain parameter")  # noqa: TRY003
            positions[name] = at
        if self._update is None:
            outputs = tuple(expr.output_field for expr, _, _ in compiler.select)
        else:
            returned = [self._model._meta.get_field(name) for name in self._returning]
            # A foreign key's column holds the target's key: its converters are the target field's (as the ORM's).
            outputs = tuple(f.target_field if f.is_relation else f for f in returned)
            if returned:
                table = conn.ops.quote_name(self._model._meta.db_table)
                columns = ", ".join(f"{table}.{conn.ops.quote_name(f.column)}" for f in returned)
                sql = f"{sql} RETURNING {columns}"
        params = tuple(base)
        if self._literals and conn.vendor == "postgresql":
            sql, params, positions = _constants_inlined(sql, params, positions, conn)
        converters = []
        for i, output in enumerate(outputs):
            functions = conn.ops.get_db_converters(Value(None, output)) + output.get_db_converters(conn)
            if functions:
                converters.append((i, output, tuple(functions)))
        found = self._texts[key] = _Text(sql, params, positions, outputs, tuple(converters))
        return found

    def _params(self, text: _Text, arguments: Mapping[str, Any], conn: Any) -> list[Any]:
        if set(arguments) != set(self._probes):
            raise TypeError(f"{self.name}: arguments {sorted(arguments)}, expected {sorted(self._probes)}")
        params = list(text.params)
        for name, value in arguments.items():
            prepped = self._prep(name, value, conn)
            for i in text.positions[name]:
                params[i] = prepped
        return params

    def rows(self, **arguments: Any) -> list[tuple[Any, ...]]:
        """The query's rows for ``arguments``, in Python's types (an UPDATE's: the ``returning`` columns of the rows
        it changed)."""
        alias = self._alias
        text, conn = self._text(alias), connections[alias]
        found = send(alias, text.sql, self._params(text, arguments, conn), prepared=self._prepared, rows=True)
        return self._convert(text, found, conn)

    def statement(self, **arguments: Any) -> tuple[str, list[Any]]:
        """The SQL text and its parameters for ``arguments`` (to send past Django's cursor; ``converted`` reads its
        rows)."""
        alias = self._alias
        text = self._text(alias)
        return text.sql, self._params(text, arguments, connections[alias])

    def converted(self, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """The rows of ``statement``'s SQL in Python's types."""
        alias = self._alias
        return self._convert(self._text(alias), rows, connections[alias])

    @staticmethod
    def _convert(text: _Text, rows: Sequence[Sequence[Any]], conn: Any) -> list[tuple[Any, ...]]:
        converters = text.converters
        if not converters:
            return [tuple(row) for row in rows]
        out = []
        for row in rows:
            values = list(row)
            for i, output, functions in converters:
                for function in functions:
                    values[i] = function(values[i], output, conn)
            out.append(tuple(values))
        return out

    def rows_unsynced(self, **arguments: Any) -> list[tuple[Any, ...]]:
        """``rows``, the statement committed on its own without waiting for the disk where ``send_unsynced`` can
        (PostgreSQL, outside a transaction); elsewhere as ``rows``."""
        alias = self._alias
        text, conn = self._text(alias), connections[alias]
        params = self._params(text, arguments, conn)
        found = send_unsynced(alias, text.sql, params) if self._prepared else None
        if found is None:
            found = send(alias, text.sql, params, prepared=self._prepared, rows=True)
        return self._convert(text, found, conn)

    def run(self, **arguments: Any) -> int:
        """Send the UPDATE for ``arguments``; the number of rows it changed."""
        alias = self._alias
        text = self._text(alias)
        params = self._params(text, arguments, connections[alias])
        return int(send(alias, text.sql, params, prepared=self._prepared, rows=False))

    def run_later(self, **arguments: Any) -> None:
        """``run`` for a caller that does not read the count: queued in a ``writes_batched`` block (``queue``)."""
        alias = self._alias
        text = self._text(alias)
        queue(alias, text.sql, self._params(text, arguments, connections[alias]), rows=False, then=None)


def _constants_inlined(
    sql: str, params: tuple[Any, ...], positions: Mapping[str, tuple[int, ...]], conn: Any
) -> tuple[str, tuple[Any, ...], dict[str, tuple[int, ...]]]:
    """``sql`` with each parameter that is at no argument's position written as its literal (psycopg's quoting, as
    Django's ``compose_sql`` writes it); the parameters left, and the arguments' positions among them."""
    kept = {i for at in positions.values() for i in at}
    index = 0

    def literal(match: re.Match[str]) -> str:
        nonlocal index
        if match.group(1) != "s":
            return match.group(0)  # ``%%`` stays as it is
        at, index = index, index + 1
        return match.group(0) if at in kept else conn.ops.compose_sql("%s", [params[at]]).replace("%", "%%")

    text = pgwire.PLACEHOLDER.sub(literal, sql)
    if index != len(params):  # pragma: no cover - Django's own placeholders
        raise AssertionError(f"{len(params)} parameters for {index} placeholders")  # noqa: TRY003
    order = sorted(kept)
    renumbered = {old: new for new, old in enumerate(order)}
    return (
        text,
        tuple(params[i] for i in order),
        {name: tuple(renumbered[i] for i in at) for name, at in positions.items()},
    )


def pipelined(*queries: tuple[Compiled, Mapping[str, Any]]) -> list[list[tuple[Any, ...]]]:
    """Each compiled query's rows, the statements sent in ONE round trip on PostgreSQL (pipelined, prepared when the
    connection allows it; with the transaction's BEGIN when one is due): the server still runs them one after the
    other, each taking its READ COMMITTED snapshot when it starts (a read sent after a ``FOR UPDATE`` sees every
    commit before the lock was granted). Elsewhere one after the other. The queries share one database."""
    alias = queries[0][0]._alias
    conn = connections[alias]
    if conn.vendor != "postgresql":
        return [query.rows(**arguments) for query, arguments in queries]
    statements = [(*query.statement(**arguments), True) for query, arguments in queries]
    _send_pending(conn)  # queued writes go first (``writes_batched``)
    fetched = _send_together(conn, statements)
    return [query.converted(rows) for (query, _), rows in zip(queries, fetched, strict=True)]


class Related:
    """A model with the relations ``select_related`` would follow (``paths``, each parent before its children, a
    reverse one-to-one included), loaded from ONE row of a compiled ``values_list``: ``columns`` are the row's
    columns (every concrete field of each model), ``load`` builds the instances and links each to its parent as
    ``select_related`` does; a model reached through a null relation (its primary key null from the outer join) is
    None. The relations are resolved on first use (the models are loaded by then)."""

    def __init__(self, model: type[Model], paths: Sequence[str] = ()) -> None:
        self._model, self._paths = model, tuple(paths)

    @functools.cached_property
    def _steps(self) -> tuple[tuple[str, str, str, type[Model]], ...]:
        """Per path: (path, parent path, the attribute on the parent, the related model)."""
        models: dict[str, type[Model]] = {"": self._model}
        steps = []
        for path in self._paths:
            parent, _, name = path.rpartition("__")
            if parent not in models:
                raise ValueError(f"{path!r}: its parent {parent!r} must come first")  # noqa: TRY003
            related = models[parent]._meta.get_field(name).related_model
            if not isinstance(related, type) or not hasattr(models[parent], name):
                raise ValueError(f"{path!r} is not a relation of {models[parent].__name__}")  # noqa: TRY003
            models[path] = related
            steps.append((path, parent, name, related))
        return tuple(steps)

    @functools.cached_property
    def _joined(self) -> tuple[tuple[type[Model], str], ...]:
        return ((self._model, ""), *((model, f"{path}__") for path, _, _, model in self._steps))

    def columns(self) -> list[str]:
        """The ``values_list`` columns of the row, in ``load``'s order."""
        return [f"{prefix}{f.name}" for model, prefix in self._joined for f in model._meta.concrete_fields]

    @functools.cached_property
    def width(self) -> int:
        """How many columns the row takes (a query may select more after them)."""
        return len(self.columns())

    @functools.cached_property
    def _shapes(self) -> tuple[tuple[str, type[Model], tuple[str, ...], int], ...]:
        """Per joined model: its path, its concrete fields' attnames (the row's order) and its primary key's place."""
        shapes = []
        for (model, _), path in zip(self._joined, ("", *self._paths), strict=True):
            names = tuple(f.attname for f in model._meta.concrete_fields)
            shapes.append((path, model, names, names.index(model._meta.pk.attname)))
        return tuple(shapes)

    @functools.cached_property
    def _setters(self) -> tuple[tuple[str, str, Callable[..., None], Callable[..., None] | None], ...]:
        """Per path: (path, parent path, the setter that caches the child on its parent, the one that caches the
        parent on the child or None): what ``select_related``'s populator calls, so a loaded relation reads as one
        ``select_related`` loaded (a forward one-to-one and a reverse one cache both ways; a foreign key one way)."""
        models = {"": self._model, **{path: model for path, _, _, model in self._steps}}
        setters = []
        for path, parent, name, _ in self._steps:
            field = models[parent]._meta.get_field(name)
            if field.concrete:  # forward: a foreign key or one-to-one on the parent
                remote = field.remote_field.set_cached_value if field.unique else None
                setters.append((path, parent, field.set_cached_value, remote))
            else:  # reverse one-to-one: the child holds the field
                setters.append((path, parent, field.field.remote_field.set_cached_value, field.field.set_cached_value))
        return tuple(setters)

    def load(self, values: Sequence[Any]) -> dict[str, Model | None]:
        """The instances of a row's first ``width`` values by path (``""``: the model itself), linked."""
        loaded: dict[str, Model | None] = {}
        at = 0
        db = router.db_for_read(self._model)
        for path, model, names, pk_at in self._shapes:
            row = values[at : at + len(names)]
            at += len(names)
            loaded[path] = None if row[pk_at] is None else _from_db(model, db, names, row)
        for path, parent, local, remote in self._setters:
            owner, child = loaded[parent], loaded[path]
            if owner is not None:
                local(owner, child)
                if child is not None and remote is not None:
                    remote(child, owner)
        return loaded

    def root(self, values: Sequence[Any]) -> Any:
        """The model's own instance of the row, its relations loaded and linked."""
        return self.load(values)[""]

    def first(self, rows: Sequence[Sequence[Any]]) -> Any | None:
        """``root`` of the first of ``rows`` (a lookup by key finds at most one), or None when there is none."""
        return self.root(rows[0]) if rows else None

    def all(self, rows: Iterable[Sequence[Any]]) -> list[Any]:
        """``root`` of each row, in order."""
        return [self.root(row) for row in rows]


def _from_db(model: type[Model], db: str, names: tuple[str, ...], row: Sequence[Any]) -> Model:
    """``model.from_db(db, names, row)`` for a row with every concrete field: the instance Django's ``Model.__init__``
    would build, its field values set straight in its ``__dict__`` as ``__init__`` sets them on a new instance (a
    foreign key's ``*_id`` descriptor only drops a cached relation, which a new instance has none of), without
    ``__init__``'s per-field walk (12 µs against 3 µs for a verification's 27 fields; a queue page loads ~250
    instances). Where the instance could differ (a model that overrides ``__init__`` or ``from_db``, or any
    ``pre_init``/``post_init`` receiver: a receiver expects the signal), it is ``from_db`` itself."""
    if _fast_init(model) and not (signals.pre_init.receivers or signals.post_init.receivers):
        obj: Model = _new(model)
        values = obj.__dict__
        values.update(zip(names, row, strict=True))
        state = ModelState()
        state.adding, state.db = False, db
        values["_state"] = state
        return obj
    return model.from_db(db, names, row)


_new: Final = object.__new__


@functools.cache
def _fast_init(model: type[Model]) -> bool:
    """Whether ``model`` builds its instances as ``Model`` does (neither ``__init__`` nor ``from_db`` overridden)."""
    return model.__init__ is Model.__init__ and model.from_db.__func__ is Model.from_db.__func__  # type: ignore[attr-defined]


class Insert:
    """New rows of ``model`` in one ``INSERT`` whose SQL text is built once per database and row count (issue 15),
    instead of the ORM's per-call query building (``create``/``bulk_create`` built a statement costing more than the
    database's work on the submission path).

    Each value is prepared by its own model field exactly as ``Model.save`` prepares it (``pre_save`` with
    ``add=True``: defaults, ``auto_now_add``; then ``get_db_prep_save``); an auto-increment key comes back through
    ``RETURNING`` (PostgreSQL; SQLite since 3.35, as ``bulk_create`` reads it); the instances come back saved. New rows
    only, never an update; a value that is an SQL expression is refused (its SQL would differ per call). No signals
    are sent (as ``bulk_create``): the models inserted this way have no receivers."""

    def __init__(self, model: type[Model]) -> None:
        self._model = model
        self._texts: dict[tuple[str, str, int], str] = {}

    @functools.cached_property
    def _fields(self) -> tuple[tuple[Field[Any, Any], ...], Field[Any, Any] | None]:
        auto = self._model._meta.auto_field
        return tuple(f for f in self._model._meta.concrete_fields if f is not auto), auto

    def _sql(self, alias: str, rows: int) -> str:
        conn = connections[alias]
        key = (alias, conn.vendor, rows)
        found = self._texts.get(key)
        if found is None:
            fields, auto = self._fields
            quote = conn.ops.quote_name
            columns = ", ".join(quote(f.column) for f in fields)
            row = "(" + ", ".join(["%s"] * len(fields)) + ")"
            table = quote(self._model._meta.db_table)
            found = f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([row] * rows)  # noqa: S608 - the model's names
            if auto is not None:
                found += f" RETURNING {quote(auto.column)}"
            self._texts[key] = found
        return found

    def __call__(self, objs: Sequence[Model]) -> list[Model]:
        """Insert ``objs`` (unsaved instances of the model); they come back saved, their auto keys set (inside
        ``writes_batched``: queued, the keys set when the batch is sent)."""
        objs = list(objs)
        if not objs:
            return objs
        alias = router.db_for_write(self._model)
        conn = connections[alias]
        fields, auto = self._fields
        for obj in objs:
            if type(obj) is not self._model or not obj._state.adding:
                raise ValueError(f"Insert({self._model.__name__}) takes new {self._model.__name__} instances")
        batch = max(1, conn.ops.bulk_batch_size(list(fields), objs))
        for start in range(0, len(objs), batch):
            chunk = objs[start : start + batch]
            params: list[Any] = []
            for obj in chunk:
                for field in fields:
                    value = field.pre_save(obj, add=True)
                    if hasattr(value, "resolve_expression"):
                        raise TypeError(f"{self._model.__name__}.{field.name}: an SQL expression is not a value")
                    params.append(field.get_db_prep_save(value, conn))
            then = None if auto is None else functools.partial(_set_keys, auto.attname, chunk)
            queue(alias, self._sql(alias, len(chunk)), params, rows=auto is not None, then=then)
        for obj in objs:
            obj._state.adding, obj._state.db = False, alias
        return objs


def _set_keys(attname: str, objs: Sequence[Model], keys: Sequence[Sequence[Any]]) -> None:
    """Set the auto keys an INSERT's RETURNING answered on the instances it inserted, in order."""
    if len(keys) != len(objs):  # pragma: no cover - RETURNING answers one row per row inserted
        raise AssertionError(f"{len(keys)} keys for {len(objs)} rows")  # noqa: TRY003
    for obj, (key,) in zip(objs, keys, strict=True):
        setattr(obj, attname, key)

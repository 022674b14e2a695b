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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections, router
from django.db.models import Field, Model, QuerySet, Value
from django.db.models.sql import UpdateQuery


@dataclass(frozen=True)
class Probe:
    """Two distinct values an argument takes while compiling, and the field that gives their database form (None:
    the value is sent as it is)."""

    first: Any
    second: Any
    field: Field[Any, Any] | None = None


@dataclass(frozen=True)
class _Text:
    sql: str
    params: tuple[Any, ...]
    positions: Mapping[str, tuple[int, ...]]
    outputs: tuple[Any, ...]


class Compiled:
    """``build(**arguments)``: a queryset of ``model`` (rows: its ``values_list``/``values`` columns), or with
    ``update`` the queryset whose rows ``update(**arguments)`` sets (``run`` answers the count of rows updated)."""

    def __init__(
        self,
        name: str,
        model: type[Model],
        build: Callable[..., QuerySet[Any, Any]],
        probes: Mapping[str, Probe],
        *,
        update: Callable[..., Mapping[str, Any]] | None = None,
    ) -> None:
        self.name, self._model, self._build, self._probes, self._update = name, model, build, dict(probes), update
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

    def _prep(self, name: str, value: Any) -> Any:
        field = self._probes[name].field
        return value if field is None else field.get_db_prep_value(value, connections[self._alias])

    def _text(self) -> _Text:
        conn = connections[self._alias]
        key = (self._alias, conn.vendor)
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
            a, b = self._prep(name, probe.first), self._prep(name, probe.second)
            if not at or any(base[i] != a or params[i] != b for i in at):
                raise AssertionError(f"{self.name}: the argument {name!r} is not a plain parameter")  # noqa: TRY003
            positions[name] = at
        outputs = () if self._update is not None else tuple(expr.output_field for expr, _, _ in compiler.select)
        found = self._texts[key] = _Text(sql, tuple(base), positions, outputs)
        return found

    def _params(self, text: _Text, arguments: Mapping[str, Any]) -> list[Any]:
        if set(arguments) != set(self._probes):
            raise TypeError(f"{self.name}: arguments {sorted(arguments)}, expected {sorted(self._probes)}")
        params = list(text.params)
        for name, value in arguments.items():
            prepped = self._prep(name, value)
            for i in text.positions[name]:
                params[i] = prepped
        return params

    def rows(self, **arguments: Any) -> list[tuple[Any, ...]]:
        """The query's rows for ``arguments``, in Python's types."""
        text = self._text()
        conn = connections[self._alias]
        with conn.cursor() as cursor:
            cursor.execute(text.sql, self._params(text, arguments))
            rows = cursor.fetchall()
        converters = []
        for i, output in enumerate(text.outputs):
            found = conn.ops.get_db_converters(Value(None, output)) + output.get_db_converters(conn)
            if found:
                converters.append((i, output, found))
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

    def run(self, **arguments: Any) -> int:
        """Send the UPDATE for ``arguments``; the number of rows it changed."""
        text = self._text()
        with connections[self._alias].cursor() as cursor:
            cursor.execute(text.sql, self._params(text, arguments))
            return int(cursor.rowcount)


#: A model and the lookup prefix of its columns in a query over another model (``""`` for that model itself).
Joined = tuple[type[Model], str]


def joined_columns(models: Sequence[Joined]) -> list[str]:
    """The ``values_list`` columns that load every concrete field of each of ``models`` (what ``select_related``
    would load), in order."""
    return [f"{prefix}{f.name}" for model, prefix in models for f in model._meta.concrete_fields]


def joined_instances(models: Sequence[Joined], values: Sequence[Any]) -> list[Model | None]:
    """One instance per model of ``models`` from a row of ``joined_columns``' values, as loaded from the database
    (the caller links them, as ``select_related`` would); None for a model reached through a null foreign key (its
    primary key came back null from the outer join)."""
    loaded: list[Model | None] = []
    at = 0
    for model, _ in models:
        fields = model._meta.concrete_fields
        names = [f.attname for f in fields]
        row = values[at : at + len(fields)]
        at += len(fields)
        if row[names.index(model._meta.pk.attname)] is None:
            loaded.append(None)
        else:
            loaded.append(model.from_db(router.db_for_read(model), names, row))
    return loaded

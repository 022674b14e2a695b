"""The claim's SQL (issue 15): the rails' SQL form on a "Next item" candidate, and what sends the claim's statements
prepared on PostgreSQL (``reviews.services.claims`` runs them).

The judgement (``judged_queryset``) reads a candidate with ``cycle_workers.rails_certainly_refuse`` and
``rails_uncertain`` for the claimer's actor: refused (the rails certainly bar it), sure (they certainly allow it), or
neither (the exact rails decide). It is compiled once per connection and vendor (``judge_sql``) and, on PostgreSQL,
sent prepared: planning it costs far more than running it, and its plan does not depend on the values.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Subquery
from django.db.models.expressions import RawSQL

from verification import pgwire
from verification.actors.models import Actor
from verification.compiled import exchange
from verification.reviews.models import ReviewLease
from verification.runs.cycle_workers import rails_certainly_refuse, rails_uncertain
from verification.runs.models import Verification

#: Two instants, the probes of a ``now`` (the claim query's) or a lease's end (the judgement's).
NOW_PROBES: Final = (
    datetime(1901, 2, 3, 4, 5, 6, 789012, tzinfo=UTC),
    datetime(1902, 3, 4, 5, 6, 7, 890123, tzinfo=UTC),
)

#: The rails' SQL form on a candidate (``judged_queryset``) as SQL text: the text, its parameters, and where each
#: argument goes ((name, places) pairs).
JudgeSQL = tuple[str, tuple[Any, ...], tuple[tuple[str, tuple[int, ...]], ...]]
#: Per (connection alias, vendor, form): compiled once (``judge_sql``).
_JUDGE_SQL: dict[tuple[str, str, str], JudgeSQL] = {}

#: Probes for the judgement's arguments (``judge_sql``): a user's pk, a verification's pk, a lease's end.
_JUDGE_PROBES: Final[dict[str, tuple[Any, Any]]] = {
    "user": (1_000_005, 1_000_006),
    "pk": (uuid.UUID(int=0xC1A1_0001), uuid.UUID(int=0xC1A1_0002)),
    "expires": NOW_PROBES,
}


def inlined(sql: str, params: Sequence[Any], keep: tuple[int, ...]) -> tuple[str, tuple[Any, ...], tuple[int, ...]]:
    """PostgreSQL: the compiled claim query with every parameter but those at ``keep`` (``now``'s) written into its
    text as a literal (psycopg's quoting, ``%`` doubled for the driver), so that the statement, sent prepared, runs on
    one generic plan: with the queue's constants as parameters that plan cannot use the queue's expression index
    (migration 0007) and sorts the whole queue (~600 ms at 100,000 verifications); with them written in, it seeks the
    index like the custom plan (~0.1 ms a statement, no planning)."""
    from psycopg import sql as psql

    connection.ensure_connection()
    pieces = re.split(r"(%%|%s)", sql)
    given = iter(enumerate(params))
    out: list[str] = []
    kept: list[Any] = []
    for piece in pieces:
        if piece != "%s":
            out.append(piece)
            continue
        i, value = next(given)
        if i in keep:
            out.append("%s")
            kept.append(value)
        else:
            out.append(psql.Literal(value).as_string(connection.connection).replace("%", "%%"))
    return "".join(out), tuple(kept), tuple(range(len(kept)))


def judged_queryset(user_pk: Any, picked: Any) -> Any:
    """The candidate(s) ``picked`` (a pk, or SQL naming pks) with the rails' SQL form for the actor of the user whose pk
    is ``user_pk``: (pk, refused, sure). ``refused``: the rails certainly bar that actor from deciding it
    (``rails_certainly_refuse``); ``sure``: where not refused, they certainly allow it (``rails_uncertain`` does not
    hold), so the claim need not run them. A user without an actor yet (its first claim) is never ``sure``: the
    verifier is NULL until ``actor_for_user`` creates it."""
    verifier = Subquery(Actor.objects.filter(user=user_pk).order_by().values("pk")[:1])
    rows = Verification.objects.filter(pk__in=picked if isinstance(picked, RawSQL) else [picked])
    return rows.annotate(
        claim_refused=ExpressionWrapper(rails_certainly_refuse(verifier), output_field=BooleanField()),
        claim_sure=ExpressionWrapper(~rails_uncertain(verifier), output_field=BooleanField()),
    ).values_list("pk", "claim_refused", "claim_sure")


def _leased(user_pk: Any, expires: Any) -> RawSQL:
    """The verifications ``user_pk`` holds a lease on that ends at ``expires`` (in the database's form): in the
    one-round-trip claim, the one its statement just leased (``_claim_in_one_statement``)."""
    table, quote = ReviewLease._meta.db_table, connection.ops.quote_name
    return RawSQL(  # noqa: S611 - names; the values are parameters
        f"SELECT {quote('verification_id')} FROM {quote(table)} WHERE {quote('holder_id')} = %s "  # noqa: S608
        f"AND {quote('expires_at')} = %s AND {quote('released_at')} IS NULL",
        (user_pk, expires),
    )


def _judge_form(form: str, user: Any, pk: Any, expires: Any) -> Any:
    """The judgement's queryset in ``form``: on a pk given as a parameter ("pk"), or on the lease just taken
    ("lease")."""
    return judged_queryset(user, pk if form == "pk" else _leased(user, expires))


def _db_form(name: str, value: Any) -> Any:
    if name == "pk":
        return Verification._meta.pk.get_db_prep_value(value, connection)
    if name == "expires":
        return ReviewLease._meta.get_field("expires_at").get_db_prep_value(value, connection)
    return value


def judge_sql(form: str) -> JudgeSQL:
    """``_judge_form(form)`` as SQL text, compiled once per connection and vendor (as ``_claim_sql``: compiled with
    every argument's first probe, then with each one's second, an argument's places are where the two differ, each
    holding the probes' database forms, and the text must not change; an argument the form does not take has none)."""
    key = (connection.alias, connection.vendor, form)
    found = _JUDGE_SQL.get(key)
    if found is not None:
        return found
    first = {name: probes[0] for name, probes in _JUDGE_PROBES.items()}

    def compiled(arguments: dict[str, Any]) -> tuple[str, list[Any]]:
        sql, params = _judge_form(form, **arguments).query.get_compiler(using=connection.alias).as_sql()
        return sql, list(params)

    sql, base = compiled(first)
    places = []
    for name, probes in _JUDGE_PROBES.items():
        other_sql, params = compiled({**first, name: probes[1]})
        at = tuple(i for i, (a, b) in enumerate(zip(base, params, strict=True)) if a != b)
        a, b = (_db_form(name, probe) for probe in probes)
        if other_sql != sql or any(base[i] != a or params[i] != b for i in at):
            raise AssertionError(f"claims: the judgement's {name} is not a plain parameter")  # noqa: TRY003
        places.append((name, at))
    found = _JUDGE_SQL[key] = (
        _inline_judge(sql, base, places) if connection.vendor == "postgresql" else (sql, tuple(base), tuple(places))
    )
    return found


def _inline_judge(sql: str, base: list[Any], places: list[tuple[str, tuple[int, ...]]]) -> JudgeSQL:
    """PostgreSQL: the judgement with its constants written in (``inlined``), its arguments' places renumbered: fewer
    values to send on every claim, and a plan made with the constants known."""
    keep = tuple(sorted(i for _, at in places for i in at))
    text, kept, _ = inlined(sql, base, keep)
    index = {old: new for new, old in enumerate(keep)}
    return text, kept, tuple((name, tuple(index[i] for i in at)) for name, at in places)


def judge_params(compiled: JudgeSQL, **arguments: Any) -> list[Any]:
    _, params, places = compiled
    values = list(params)
    for name, at in places:
        for i in at:
            values[i] = _db_form(name, arguments[name])
    return values


def judge_in_sql() -> bool:
    """Whether the rails' SQL form judges candidates: everywhere but on a PostgreSQL connection that prepares no
    statement (behind a pooler, settings: REVIEWPORTAL_DB_PREPARED_STATEMENTS off), where planning it on every claim
    (~8 ms) would cost more than the exact rails over ``cycle_workers``; there those decide every candidate."""
    if connection.vendor != "postgresql":
        return True
    connection.ensure_connection()
    return connection.connection.prepare_threshold is not None


def judged(pk: Any, user: Any) -> tuple[bool, bool]:
    """(refused, sure) of the rails' SQL form for ``user`` on the candidate ``pk`` (``judged_queryset``): one query,
    prepared on PostgreSQL."""
    compiled = judge_sql("pk")
    params = judge_params(compiled, user=user.pk, pk=pk)
    if connection.vendor == "postgresql":
        answers, _ = exchange(connection, [pgwire.Statement(compiled[0], params, True)])
        row = answers[0][0] if answers[0] else None
    else:
        with connection.cursor() as cursor:
            cursor.execute(compiled[0], params)
            row = cursor.fetchone()
    return flag(row[1]), flag(row[2])


def flag(value: Any) -> bool:
    """A boolean as the cursor gives it (SQLite: 0 or 1)."""
    return bool(_BOOLEAN.to_python(value))


_BOOLEAN: Final = BooleanField()

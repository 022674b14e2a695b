"""Set-based seeding of ``bench_queue``'s copies (PostgreSQL; issue 15 measures the queue at 1,000,000 verifications).

What ``bench_queue._rows_for`` builds for one copy in Python is built here for every copy of a category at once, in
SQL: the plan (the copies' ids, submission times, deadlines, re-runs and leases, the rules of the former per-row plan)
is one staging table, ``bench_seed``; each table's rows are one ``INSERT … SELECT`` over it per category. Every column
takes the value ``_rows_for`` gives a prototype copy of the category (so the rows have its shape: the template's
verdict, reason, body, hashes, actors …) except the columns that differ from copy to copy, which are SQL expressions
(ids, times, titles, the receipt chain); two prototypes with different ids and times are compared, and a column that
differs between them without an expression here stops the run. The receipts' envelopes are the template's with the
same string substitutions ``_copy_envelope`` makes (ids, RFC 3339 times, previous hashes, in the same order), hashed
by PostgreSQL's ``sha256``; only the Ed25519 signatures are made in Python (PostgreSQL has none), from the content
hashes alone, and copied in with COPY. The rollup triggers see ordinary INSERT statements, so the rollups are kept
as for any writer; ``check`` recounts the queue against them and compares sample copies, column for column, with what
``_rows_for`` builds for the same plan values (signatures included: Ed25519 is deterministic), and verifies their
chains with the review page's verifier.
"""

# ruff: noqa: S608 - the SQL is built from this module's constants and column names; values go as parameters

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

#: A prototype copy: ``_rows_for`` of a spec with these values; (category, verification id, task id, submitted_at,
#: deadline, supersedes, lease) -> rows by table name ("tasks", "cycles", "verifications", "receipts", "decisions",
#: "leases").
Prototype = Callable[
    [str, uuid.UUID, uuid.UUID, datetime, "datetime | None", "uuid.UUID | None", "str | None"], dict[str, list[Any]]
]

#: Categories whose copies carry their own PENDING deadline (the template's is replaced in the row and the envelope).
DATED = ("pending-expired", "pending-now", "pending-later")
SIGN_BATCH = 50_000
_RFC3339 = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'"  # kernel.chain.format_created_at: UTC, always 6 digits, Z


@dataclass(frozen=True)
class Plan:
    """What to add: copies per category (and each category's template), the leases, the clock."""

    counts: dict[str, int]
    queued: tuple[str, ...]  # the categories in the queue (released and ran-out leases are drawn from them)
    held: int  # leases held now, on MISMATCH copies
    released: int
    ran_out: int
    holders: list[int]  # the user ids that hold the leases
    now: datetime
    spread: timedelta  # submissions are spread over this much time before now - 1 h
    seed: float  # setseed(), in [-1, 1]


@dataclass
class Seeded:
    steps: dict[str, float] = field(default_factory=dict)  # seconds per step
    rows: dict[str, int] = field(default_factory=dict)  # rows inserted per table


class _Sql:
    """A statement and its parameters, built together (``p`` returns the placeholder and records the value)."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}

    def p(self, value: Any, cast: str | None = None) -> str:
        name = f"p{len(self.params)}"
        self.params[name] = value
        return f"CAST(%({name})s AS {cast})" if cast else f"%({name})s"


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _rfc3339(ts: str) -> str:
    return f"to_char(({ts}) AT TIME ZONE 'UTC', {_RFC3339})"


def _isoformat(ts: str) -> str:
    """Python's ``datetime.isoformat()`` of a UTC timestamp: microseconds only when not zero, ``+00:00``."""
    local = f"({ts}) AT TIME ZONE 'UTC'"
    return (
        f"(to_char({local}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN date_trunc('second', {ts}) = ({ts}) "
        f"THEN '' ELSE to_char({local}, '.US') END || '+00:00')"
    )


# --- the plan --------------------------------------------------------------------------------------------------------


def _times(category: str, now: str, spread: str) -> tuple[str, str]:
    """(submitted_at, deadline) of a copy as SQL over ``g.r1``, ``g.r2`` (uniform in [0, 1)): as the per-row plan."""
    past = f"{now} - interval '1 hour' - {spread} * g.r1"
    if category == "pending-expired":
        return past, f"{past} + interval '10 minutes'"
    if category == "pending-now":  # deadlines spread over now +/- 30 minutes, submitted 1-24 h before them
        deadline = f"{now} + interval '1 minute' * (60 * g.r1 - 30)"
        return f"{deadline} - interval '1 hour' * (1 + 23 * g.r2)", deadline
    if category == "pending-later":
        later = f"{now} + interval '2 hours' + interval '7 days' * g.r1"
        return f"{now} - interval '1 minute' * (1 + 59 * g.r2)", later
    return past, "NULL"


def _plan(cursor: Any, plan: Plan) -> None:
    cursor.execute(
        "CREATE UNLOGGED TABLE bench_seed (category text NOT NULL, k integer NOT NULL, vid uuid NOT NULL, "
        "task_id uuid NOT NULL, submitted_at timestamptz NOT NULL, deadline timestamptz, supersedes uuid, "
        "own_task boolean NOT NULL DEFAULT true, lease text, holder integer)"
    )
    cursor.execute("SELECT setseed(%s)", [plan.seed])
    for category, count in plan.counts.items():
        q = _Sql()
        now, spread = q.p(plan.now, "timestamptz"), q.p(plan.spread, "interval")
        submitted, deadline = _times(category, now, spread)
        cursor.execute(
            "INSERT INTO bench_seed (category, k, vid, task_id, submitted_at, deadline) "
            f"SELECT {q.p(category)}, g.k, gen_random_uuid(), gen_random_uuid(), {submitted}, {deadline} "
            f"FROM (SELECT k, random() AS r1, random() AS r2 FROM generate_series(1, {q.p(count, 'integer')}) AS k) g",
            q.params,
        )
    # Each superseded copy has a re-run of its task among the UNKNOWNs (which stays in the queue): the k-th of each.
    cursor.execute(
        "UPDATE bench_seed u SET supersedes = o.vid, task_id = o.task_id, own_task = false, "
        "submitted_at = LEAST(o.submitted_at + interval '1 hour' * (1 + 47 * random()), %s) "
        "FROM bench_seed o WHERE u.category = 'unknown' AND o.category = 'superseded' AND u.k = o.k",
        [plan.now],
    )
    cursor.execute(
        "UPDATE bench_seed SET lease = 'held' WHERE vid IN "
        "(SELECT vid FROM bench_seed WHERE category = 'mismatch' ORDER BY random() LIMIT %s)",
        [plan.held],
    )
    cursor.execute(
        "WITH pick AS (SELECT vid, row_number() OVER (ORDER BY random()) AS i FROM bench_seed "
        "WHERE category = ANY(%s) AND lease IS NULL) "
        "UPDATE bench_seed s SET lease = CASE WHEN pick.i <= %s THEN 'released' ELSE 'ran-out' END "
        "FROM pick WHERE pick.vid = s.vid AND pick.i <= %s",
        [list(plan.queued), plan.released, plan.released + plan.ran_out],
    )
    cursor.execute(
        "UPDATE bench_seed SET holder = (CAST(%s AS integer[]))[1 + floor(random() * %s)::integer] "
        "WHERE lease IS NOT NULL",
        [plan.holders, len(plan.holders)],
    )
    cursor.execute("CREATE INDEX ON bench_seed (vid)")
    cursor.execute("ANALYZE bench_seed")


# --- the rows --------------------------------------------------------------------------------------------------------


def _values(obj: Any, connection: Any) -> dict[str, tuple[Any, Any, str]]:
    """column -> (Python value, value as bulk_create sends it, SQL type) of a model instance; no auto pk."""
    out = {}
    for f in obj._meta.concrete_fields:
        if f.get_internal_type() in ("AutoField", "BigAutoField", "SmallAutoField"):
            continue
        value = f.pre_save(obj, add=True)
        out[f.column] = (value, f.get_db_prep_save(value, connection), f.db_type(connection))
    return out


def _varying(a: Any, b: Any, connection: Any) -> set[str]:
    va, vb = _values(a, connection), _values(b, connection)
    return {column for column in va if va[column][0] != vb[column][0]}


def _insert(cursor: Any, table: str, proto: Any, exprs: dict[str, str], q: _Sql, where: str) -> int:
    """``INSERT INTO table … SELECT`` over ``bench_seed s``: each column its expression or the prototype's value."""
    from django.db import connection

    columns, selected = [], []
    for column, (_, prepared, sql_type) in _values(proto, connection).items():
        columns.append(f'"{column}"')
        selected.append(exprs[column] if column in exprs else q.p(prepared, sql_type))
    cursor.execute(
        f'INSERT INTO "{table}" ({", ".join(columns)}) SELECT {", ".join(selected)} FROM bench_seed s WHERE {where}',
        q.params,
    )
    return int(cursor.rowcount)


def _per_copy(category: str, kind: str, proto: Any, q: _Sql, template: Any) -> dict[str, str]:
    """The SQL expressions of the columns that differ from copy to copy (``kind``: the row's table name; ``template``:
    the category's ``bench_queue.Template``, for a decision's receipt)."""
    if kind == "tasks":
        title = str(proto.title)
        assert title.endswith(str(proto.id)[:8]), title
        return {"id": "s.task_id", "title": f"{q.p(title[:-8])} || left(s.task_id::text, 8)",
                "created_at": "s.submitted_at - interval '1 hour'"}
    if kind == "cycles":
        return {"task_id": "s.task_id", "opened_at": "s.submitted_at - interval '1 hour'"}
    if kind == "verifications":
        exprs = {"id": "s.vid", "created_at": "s.submitted_at", "submitted_at": "s.submitted_at",
                 "task_id": "s.task_id", "supersedes_id": "s.supersedes"}
        if proto.started_at is not None:
            exprs["started_at"] = "s.submitted_at"
        if category in DATED:
            exprs["pending_until"] = "s.deadline"
        return exprs
    if kind == "decisions":
        chain = [r["hash"] for r in template.receipts]  # the copy cites its own receipt at the template's seq
        cited = template.decision.receipt_id
        seq = chain.index(cited) if cited in chain else None
        receipt = (f"(SELECT r.content_hash FROM bench_seed_receipt r WHERE r.vid = s.vid AND r.seq = {seq:d})"
                   if seq is not None else "NULL")
        return {"request_key": "replace(gen_random_uuid()::text, '-', '')", "verification_id": "s.vid",
                "receipt_id": receipt, "created_at": "s.submitted_at + interval '2 hours'"}
    raise AssertionError(kind)


@dataclass(frozen=True)
class _TemplateReceipt:
    envelope: str
    created: str  # its created_at as the envelope has it
    hash: str
    after: timedelta  # created_at - the verification's submitted_at
    supersedes: str | None  # the template hash of the receipt its payload supersedes


def _stage_receipts(cursor: Any, category: str, template: Any, chain: list[_TemplateReceipt], protos: list[Any],
                    dated: bool) -> None:
    """The copies' receipts of ``category`` into ``bench_seed_receipt``, seq by seq (each needs the previous hash)."""
    tv = template.verification
    hashes = [r.hash for r in chain]
    for seq, (r, proto) in enumerate(zip(chain, protos, strict=True)):
        q = _Sql()
        envelope = q.p(r.envelope)
        # _copy_envelope's substitutions, in the order its mapping gets them: ids, the deadline, then per receipt
        # its created_at and (once made) its hash.
        steps = [(str(tv.id), "s.vid::text"), (str(tv.task_id), "s.task_id::text")]
        if dated and tv.pending_until is not None:
            steps.append((tv.pending_until.isoformat(), _isoformat("s.deadline")))
        created = f"s.submitted_at + {q.p(_micros(r.after), 'bigint')} * interval '1 microsecond'"
        for j in range(seq + 1):
            at = created if j == seq else f"p{j}.created_at"
            steps.append((chain[j].created, _rfc3339(at)))
            if j < seq:
                steps.append((chain[j].hash, f"p{j}.content_hash"))
        for old, new in steps:
            envelope = f"replace({envelope}, {q.p(old)}, {new})"
        joins = " ".join(f"JOIN bench_seed_receipt p{j} ON p{j}.vid = s.vid AND p{j}.seq = {j}" for j in range(seq))
        prev = f"p{seq - 1}.content_hash" if seq else "NULL"
        supersedes = f"p{hashes.index(r.supersedes)}.content_hash" if r.supersedes else "NULL"
        consts = [q.p(getattr(proto, name)) for name in ("kind", "verdict", "determination", "authority", "actor")]
        cursor.execute(
            "INSERT INTO bench_seed_receipt (vid, seq, content_hash, prev_hash, envelope, created_at, kind, verdict, "
            "determination, authority, actor, supersedes_receipt_id) "
            f"SELECT e.vid, {seq:d}, encode(sha256(convert_to(e.envelope, 'UTF8')), 'hex'), e.prev, e.envelope, "
            f"e.created_at, {', '.join(consts)}, e.supersedes FROM (SELECT s.vid, {envelope} AS envelope, "
            f"{created} AS created_at, {prev} AS prev, {supersedes} AS supersedes "
            f"FROM bench_seed s {joins} WHERE s.category = {q.p(category)}) e",
            q.params,
        )


RECEIPT_PER_COPY = {"content_hash", "verification_id", "prev_hash", "signature", "envelope", "created_at",
                    "supersedes_receipt_id"}
RECEIPT_COLUMNS = RECEIPT_PER_COPY | {"seq", "key_id", "kind", "verdict", "determination", "authority", "actor"}


def _sign(cursor: Any, private_key: Any) -> int:
    """Sign every staged receipt's content hash (``kernel.chain.signing_message``) into ``bench_seed_signature``."""
    from verification.kernel.chain import signing_message

    raw = cursor.cursor  # psycopg's own cursor: COPY
    signed = 0
    after: tuple[Any, int] | None = None
    while True:
        if after is None:
            cursor.execute("SELECT vid, seq, content_hash FROM bench_seed_receipt ORDER BY vid, seq LIMIT %(n)s",
                           {"n": SIGN_BATCH})
        else:
            cursor.execute("SELECT vid, seq, content_hash FROM bench_seed_receipt WHERE (vid, seq) > (%(v)s, %(s)s) "
                           "ORDER BY vid, seq LIMIT %(n)s", {"v": after[0], "s": after[1], "n": SIGN_BATCH})
        rows = cursor.fetchall()
        if not rows:
            return signed
        with raw.copy("COPY bench_seed_signature (content_hash, signature) FROM STDIN") as copy:
            for _, _, content_hash in rows:
                signature = base64.b64encode(private_key.sign(signing_message(content_hash))).decode("ascii")
                copy.write_row((content_hash, signature))
        signed += len(rows)
        after = (rows[-1][0], rows[-1][1])


def seed(plan: Plan, templates: dict[str, Any], prototype: Prototype, key_id: str, private_key: Any) -> Seeded:
    """Add the copies of ``plan``; ``templates``: category -> ``bench_queue.Template``."""
    from django.db import connection

    from verification.reviews.models import ReviewDecision, ReviewLease
    from verification.trust.models import Receipt

    assert {f.column for f in Receipt._meta.concrete_fields} == RECEIPT_COLUMNS, "the receipt's columns changed"
    lease_columns = {f.column for f in ReviewLease._meta.concrete_fields}
    assert lease_columns == {"verification_id", "holder_id", "claimed_at", "expires_at", "released_at",
                             "end_reason"}, "the lease's columns changed"
    done = Seeded()
    clock = time.perf_counter()

    def step(name: str) -> None:
        nonlocal clock
        done.steps[name] = done.steps.get(name, 0.0) + time.perf_counter() - clock
        clock = time.perf_counter()

    with connection.cursor() as cursor:
        cursor.execute("SET work_mem = '256MB'")
        _drop(cursor)
        _plan(cursor, plan)
        cursor.execute(
            "CREATE UNLOGGED TABLE bench_seed_receipt (vid uuid NOT NULL, seq integer NOT NULL, content_hash text "
            "NOT NULL, prev_hash text, envelope text NOT NULL, created_at timestamptz NOT NULL, kind text NOT NULL, "
            "verdict text, determination text, authority text, actor text, supersedes_receipt_id text, "
            "PRIMARY KEY (vid, seq))"
        )
        cursor.execute("CREATE UNLOGGED TABLE bench_seed_signature (content_hash text PRIMARY KEY, signature text)")
        step("plan")
        # The superseded copies first: the re-runs' supersedes_id refers to them (the statements commit one by one).
        order = sorted(plan.counts, key=lambda category: category != "superseded")
        protos = {category: _prototypes(category, plan.now, prototype) for category in order}
        for category, (first, _) in protos.items():
            t = templates[category]
            chain = [_TemplateReceipt(r["envelope"], r["created"], r["hash"], r["after"],
                                      r["payload"].get("supersedes_receipt_id")) for r in t.receipts]
            if first["receipts"]:
                _stage_receipts(cursor, category, t, chain, first["receipts"], category in DATED)
        cursor.execute("ANALYZE bench_seed_receipt")
        step("receipts: envelopes and hashes (SQL)")
        done.rows["receipts"] = _sign(cursor, private_key)
        step("receipts: signatures (Python, Ed25519)")
        for kind, model_table, where in (("tasks", "verification_task", "s.own_task"),
                                         ("cycles", "verification_taskcycle", "s.own_task"),
                                         ("verifications", "verification_verification", "true")):
            done.rows[kind] = 0
            for category, (first, second) in protos.items():
                for proto, other in zip(first[kind], second[kind], strict=True):
                    q = _Sql()
                    exprs = _per_copy(category, kind, proto, q, None)
                    _check_varying(kind, category, proto, other, exprs, connection)
                    done.rows[kind] += _insert(cursor, model_table, proto, exprs, q,
                                               f"s.category = {q.p(category)} AND {where}")
            step(kind)
        cursor.execute(
            "INSERT INTO verification_receipt (content_hash, verification_id, seq, key_id, prev_hash, signature, "
            "envelope, created_at, kind, verdict, determination, authority, actor, supersedes_receipt_id) "
            "SELECT r.content_hash, r.vid, r.seq, %s, r.prev_hash, g.signature, r.envelope, r.created_at, r.kind, "
            "r.verdict, r.determination, r.authority, r.actor, r.supersedes_receipt_id "
            "FROM bench_seed_receipt r JOIN bench_seed_signature g ON g.content_hash = r.content_hash",
            [key_id],
        )
        assert cursor.rowcount == done.rows["receipts"], (cursor.rowcount, done.rows["receipts"])
        step("receipts")
        done.rows["decisions"] = 0
        for category, (first, second) in protos.items():
            for proto, other in zip(first["decisions"], second["decisions"], strict=True):
                assert isinstance(proto, ReviewDecision)
                q = _Sql()
                exprs = _per_copy(category, "decisions", proto, q, templates[category])
                _check_varying("decisions", category, proto, other, exprs, connection)
                done.rows["decisions"] += _insert(cursor, "verification_reviewdecision", proto, exprs, q,
                                                  f"s.category = {q.p(category)}")
        step("decisions")
        cursor.execute(
            "INSERT INTO verification_reviewlease (verification_id, holder_id, claimed_at, expires_at, released_at, "
            "end_reason) SELECT s.vid, s.holder, c.claimed, c.claimed + interval '15 minutes', "
            "CASE WHEN s.lease = 'released' THEN c.claimed + interval '5 minutes' END, "
            "CASE WHEN s.lease = 'released' THEN 'released' ELSE '' END FROM bench_seed s CROSS JOIN LATERAL "
            "(SELECT CASE WHEN s.lease = 'held' THEN %s - interval '5 minutes' "
            "ELSE s.submitted_at + interval '30 minutes' END AS claimed) c WHERE s.lease IS NOT NULL",
            [plan.now],
        )
        done.rows["leases"] = int(cursor.rowcount)
        step("leases")
    return done


def _prototypes(category: str, now: datetime, prototype: Prototype) -> tuple[dict[str, list[Any]], ...]:
    """Two prototype copies of ``category`` whose per-copy values all differ (neither a re-run: a re-run has no task
    row of its own; its ``supersedes_id`` is always the plan's)."""
    made = []
    for variant in (0, 1):
        submitted = now - timedelta(days=1 + variant, minutes=7 * variant, microseconds=3 * variant)
        deadline = now + timedelta(minutes=10 + variant, microseconds=variant) if category in DATED else None
        made.append(prototype(category, uuid.uuid4(), uuid.uuid4(), submitted, deadline, None, None))
    return made[0], made[1]


def _check_varying(kind: str, category: str, a: Any, b: Any, exprs: dict[str, str], connection: Any) -> None:
    missing = _varying(a, b, connection) - set(exprs)
    assert not missing, f"{kind} of {category}: these columns differ per copy but have no SQL expression: {missing}"


def _drop(cursor: Any) -> None:
    cursor.execute("DROP TABLE IF EXISTS bench_seed, bench_seed_receipt, bench_seed_signature")


def drop() -> None:
    """Drop the staging tables (after ``check``)."""
    from django.db import connection

    with connection.cursor() as cursor:
        _drop(cursor)


def _samples() -> list[tuple[Any, ...]]:
    """One copy of each category, with and without a lease of each kind, and a re-run: the plan values."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT ON (category, supersedes IS NULL, lease) category, vid, task_id, submitted_at, deadline, "
            "supersedes, lease FROM bench_seed ORDER BY category, supersedes IS NULL, lease, k"
        )
        return list(cursor.fetchall())


def _stored(obj: Any) -> Any:
    """The row the database holds for what ``_rows_for`` built (by its natural key), or None."""
    from verification.reviews.models import ReviewDecision, ReviewLease
    from verification.runs.models import TaskCycle
    from verification.trust.models import Receipt

    model: Any = type(obj)
    if model is TaskCycle:
        return model.objects.filter(task_id=obj.task_id, number=obj.number).first()
    if model is Receipt:
        return model.objects.filter(verification_id=obj.verification_id, seq=obj.seq).first()
    if model in (ReviewDecision, ReviewLease):
        return model.objects.filter(verification_id=obj.verification_id).first()
    return model.objects.filter(pk=obj.pk).first()


#: Columns that are random in both builders (a decision's request key, a lease's holder) or read the clock when built
#: (a lease held now).
_UNCOMPARED = {"verification_reviewdecision": {"request_key"}, "verification_reviewlease": {"holder_id"}}


def check(prototype: Prototype) -> list[str]:
    """Sample copies compared column for column with what ``_rows_for`` builds for their plan values (receipts with
    their signatures), their chains verified strictly (``check_chain``: the stored head, the pinned keys): the
    differences (none: [])."""
    from django.db import connection

    from verification.runs.models import Verification
    from verification.trust.selectors import check_chain

    problems = []
    for category, vid, task_id, submitted, deadline, supersedes, lease in _samples():
        for kind, objs in prototype(category, vid, task_id, submitted, deadline, supersedes, lease).items():
            for obj in objs:
                table = obj._meta.db_table
                row = _stored(obj)
                if row is None:
                    problems.append(f"{category} {vid}: no {kind} row")
                    continue
                built, stored = _values(obj, connection), _values(row, connection)
                skip = set(_UNCOMPARED.get(table, ()))
                if lease == "held" and kind == "leases":
                    skip |= {"claimed_at", "expires_at"}
                    if row.expires_at - row.claimed_at != timedelta(minutes=15) or row.released_at is not None:
                        problems.append(f"{category} {vid}: held lease {row.claimed_at} .. {row.expires_at}")
                differ = sorted(c for c in built if c not in skip and built[c][0] != stored[c][0])
                if differ:
                    problems.append(f"{category} {vid} {kind}: {', '.join(differ)} differ")
        checked = check_chain(Verification.objects.get(pk=vid))  # against its stored head, the pinned keys
        if checked is not None and not checked.report.ok:
            problems.append(f"{category} {vid}: chain does not verify: {checked.report.detail}")
    return problems

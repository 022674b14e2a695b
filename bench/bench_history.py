"""History and dashboards benchmark (issue 6 acceptance; run by ``make bench``).

The history page (unfiltered and with two filters) and each dashboard, through Django's test client with the full
middleware stack (sessions, auth, CSRF, CSP, axes, htmx), signed in as a manager: p95 of the response time with
100,000 verifications, as a ratio to the same page with 1,000 (target <= 1.5).

Two scratch databases, one with 1,000 verifications and a copy of it grown to 100,000, and requests alternating
between them, so whatever else the machine is doing slows both sizes alike. The data is a mix like a live
portal's, spread over 90 days: clean passes and fails, flagged abstains, MISMATCHes, semantic conflicts, PENDINGs,
10% decided by five reviewers (each decision a receipt, a ``ReviewDecision``), some sent back for more evidence, and
findings, half of them closed. It is written with ``INSERT … SELECT generate_series`` (the services would take an
hour); receipts carry placeholder envelopes (no page here verifies a signature).

PostgreSQL only (DATABASE_URL=postgres://...). It works in scratch databases ``bench_history_<name>`` and
``…_large`` that it creates and drops, so nothing lands in your database. Prints figures; a benchmark, not a test.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SMALL = int(os.environ.get("BENCH_HISTORY_SMALL", "1000"))
LARGE = int(os.environ.get("BENCH_HISTORY_LARGE", "100000"))
REQUESTS = int(os.environ.get("BENCH_HISTORY_REQUESTS", "100"))
WARMUP = 5
REVIEWERS = ("rev1", "rev2", "rev3", "rev4", "rev5")
PASSWORD = "bench-only-" + os.urandom(8).hex()  # nobody signs in with it: the client uses force_login
URLS = (
    "/history/",
    "/history/?flagged=true",
    "/history/?state=in_review&authority=deterministic",
    "/dashboards/",
    "/dashboards/backlog/",
    "/dashboards/decisions/",
    "/dashboards/time-to-decision/",
    "/dashboards/reviewers/",
    "/dashboards/abstains/",
    "/dashboards/findings/",
)

# One outcome per g % 20, a live portal's mix: 40% clean PASS, 10% clean FAIL, 20% flagged UNKNOWN, 5% MISMATCH,
# 5% NOT_RUN, 5% semantic cited_conflict, 10% decided by a person (PASS or FAIL over an UNKNOWN), 5% PENDING.
_VERDICT_SQL = """
CASE WHEN m < 8 THEN 'PASS' WHEN m < 10 THEN 'FAIL' WHEN m < 14 THEN 'UNKNOWN' WHEN m = 14 THEN 'MISMATCH'
     WHEN m = 15 THEN 'NOT_RUN' WHEN m = 16 THEN 'FAIL' WHEN m = 17 THEN 'PASS' WHEN m = 18 THEN 'FAIL'
     ELSE 'PENDING' END
"""


def _setup_django(var: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewportal.settings_test")
    os.environ["REVIEWPORTAL_VAR_DIR"] = str(var)
    for name in ("REVIEWPORTAL_SIGNING_KEY", "REVIEWPORTAL_SIGNING_KEY_FILE"):
        os.environ.pop(name, None)
    import django

    django.setup()


def _people() -> tuple[Any, list[tuple[int, int]], int]:
    """A manager to sign in as; the reviewers as (user id, actor id); the portal's actor id."""
    from django.contrib.auth.models import Group, User

    from verification.actors.services.actors import actor_for_user, portal_service_actor

    manager = User.objects.create_user(username="bench-manager", password=PASSWORD)
    manager.groups.add(Group.objects.get(name="manager"))
    reviewers = []
    for name in REVIEWERS:
        user = User.objects.create_user(username=name, password=PASSWORD)
        user.groups.add(Group.objects.get(name="reviewer"))
        reviewers.append((user.pk, actor_for_user(user).pk))
    return manager, reviewers, portal_service_actor().pk


def _populate(n: int, *, offset: int, key_id: str, reviewers: list[tuple[int, int]], portal: int) -> None:
    """``n`` more verifications (numbered from ``offset``) and their receipts, decisions and findings."""
    from django.db import connection

    users = "ARRAY[" + ",".join(str(u) for u, _ in reviewers) + "]"
    actors = "ARRAY[" + ",".join(str(a) for _, a in reviewers) + "]"
    who = "1 + abs(hashtext({}::text)) %% 5"
    tasks = max(1, n // 10)
    statements: list[tuple[str, list[Any]]] = [
        (
            "INSERT INTO verification_task (id, title, external_ref, created_at) "
            "SELECT gen_random_uuid(), 'subject ' || (g + %s), 'REF-' || (g + %s), now() "
            "FROM generate_series(0, %s) g",
            [offset, offset, tasks - 1],
        ),
        (
            "CREATE TEMP TABLE bench_tasks AS SELECT id, row_number() OVER (ORDER BY id) - 1 AS k "
            "FROM verification_task t WHERE NOT EXISTS "
            "(SELECT 1 FROM verification_verification v WHERE v.task_id = t.id)",
            [],
        ),
        (
            f"""
            INSERT INTO verification_verification (id, rubric_hash, submission_hash, created_at, submitted_at, task_id,
                cycle, submitted_boundary, body, awaiting_evidence, attempts, last_error, evidence_key, verdict,
                automated_verdict, determination, flagged, flag_reason, reason, human_decided, pending_until)
            SELECT gen_random_uuid(), repeat('1', 64), md5(g::text || 'a') || md5(g::text || 'b'), t, t, bt.id, 1, '',
                '{{}}'::jsonb, false, 1, '', '', v,
                CASE WHEN m IN (17, 18) THEN 'UNKNOWN' ELSE v END,
                CASE WHEN m < 8 OR m = 17 THEN 'met' WHEN m < 10 OR m IN (14, 16, 18) THEN 'not_met'
                     WHEN m = 19 THEN NULL ELSE 'cannot_determine' END,
                m BETWEEN 10 AND 16,
                CASE WHEN m = 14 THEN 'mismatch: baseline-changed' WHEN m BETWEEN 10 AND 16 THEN 'needs_review: x'
                     ELSE NULL END,
                CASE WHEN m < 8 THEN 'digest-match' WHEN m < 10 THEN 'digest-differs'
                     WHEN m < 14 THEN 'missing-baseline' WHEN m = 14 THEN 'baseline-changed'
                     WHEN m = 15 THEN 'no-result' WHEN m = 16 THEN 'semantic-cited-conflict'
                     WHEN m IN (17, 18) THEN 'human-decision' ELSE 'result-awaited' END,
                m IN (17, 18),
                CASE WHEN m = 19 THEN t + interval '1 day' ELSE NULL END
            FROM (SELECT s0.*, {_VERDICT_SQL} AS v
                  FROM (SELECT g, g %% 20 AS m, now() - (random() * interval '90 days') AS t
                        FROM generate_series(%s, %s) g) s0) s
            JOIN bench_tasks bt ON bt.k = s.g %% %s
            """,  # noqa: S608
            [offset, offset + n - 1, tasks],
        ),
        ("DROP TABLE bench_tasks", []),
        # Every verification's run receipt (seq 0); a decision receipt (seq 1) on those a person decided.
        (
            """
            INSERT INTO verification_receipt (content_hash, verification_id, seq, key_id, prev_hash, signature,
                envelope, created_at, kind, verdict, determination, authority, actor)
            SELECT md5(v.id::text || 'run') || md5(v.id::text || 'r2'), v.id, 0, %s, NULL, 'AAAA', '{}',
                v.created_at, 'run', v.automated_verdict,
                CASE WHEN v.human_decided THEN 'cannot_determine' ELSE v.determination END,
                CASE WHEN v.reason = 'semantic-cited-conflict' THEN 'semantic' ELSE 'deterministic' END,
                CASE WHEN v.reason = 'semantic-cited-conflict' THEN 'sem-1' ELSE 'portal' END
            FROM verification_verification v
            WHERE NOT EXISTS (SELECT 1 FROM verification_receipt r WHERE r.verification_id = v.id)
            """,
            [key_id],
        ),
        (
            f"""
            INSERT INTO verification_receipt (content_hash, verification_id, seq, key_id, prev_hash, signature,
                envelope, created_at, kind, verdict, determination, authority, actor, supersedes_receipt_id)
            SELECT md5(v.id::text || 'dec') || md5(v.id::text || 'd2'), v.id, 1, %s,
                md5(v.id::text || 'run') || md5(v.id::text || 'r2'), 'AAAA', '{{}}',
                LEAST(now(), v.created_at + random() * interval '48 hours'), 'decision', v.verdict, v.determination,
                'human', 'user:rev' || ({who.format("v.id")}), md5(v.id::text || 'run') || md5(v.id::text || 'r2')
            FROM verification_verification v
            WHERE v.human_decided
              AND NOT EXISTS (SELECT 1 FROM verification_receipt r WHERE r.verification_id = v.id AND r.seq = 1)
            """,  # noqa: S608
            [key_id],
        ),
        (
            f"""
            INSERT INTO verification_reviewdecision (request_key, verification_id, user_id, actor_id, action,
                rationale, cited_evidence_ids, receipt_id, created_at)
            SELECT md5(r.content_hash), r.verification_id, ({users})[{who.format("r.verification_id")}],
                ({actors})[{who.format("r.verification_id")}], r.verdict, 'bench decision', '[]'::jsonb,
                r.content_hash, r.created_at
            FROM verification_receipt r
            WHERE r.kind = 'decision'
              AND NOT EXISTS (SELECT 1 FROM verification_reviewdecision d WHERE d.receipt_id = r.content_hash)
            """,  # noqa: S608
            [],
        ),
        # 1 in 100 of the abstains was sent back for more evidence (no receipt: it leaves the queue).
        (
            f"""
            INSERT INTO verification_reviewdecision (request_key, verification_id, user_id, actor_id, action,
                rationale, cited_evidence_ids, receipt_id, created_at)
            SELECT md5(v.id::text || 'more'), v.id, ({users})[{who.format("v.id")}], ({actors})[{who.format("v.id")}],
                'MORE_EVIDENCE', 'send more', '[]'::jsonb, NULL, LEAST(now(), v.created_at + interval '2 hours')
            FROM verification_verification v
            WHERE v.reason = 'missing-baseline' AND abs(hashtext(v.id::text)) %% 100 = 0
              AND NOT EXISTS (SELECT 1 FROM verification_reviewdecision d WHERE d.verification_id = v.id)
            """,  # noqa: S608
            [],
        ),
        # Findings on 1 in 200 verifications, each with its raised event; half of them closed by a reviewer.
        (
            """
            INSERT INTO verification_finding (kind, reason, subject, verification_id, refs, receipt_refs, detail,
                dedupe_key, created_at)
            SELECT CASE WHEN abs(hashtext(v.id::text)) %% 2 = 0 THEN 'evidence_integrity' ELSE 'disagreement' END,
                CASE WHEN abs(hashtext(v.id::text)) %% 2 = 0 THEN 'evidence-integrity' ELSE 'disagreement' END,
                v.task_id::text || '@1', v.id, jsonb_build_array(v.id::text), '[]'::jsonb, 'bench',
                md5(v.id::text || 'f') || md5(v.id::text || 'f2'), v.created_at
            FROM verification_verification v
            WHERE abs(hashtext(v.id::text || 'f')) %% 200 = 0
              AND NOT EXISTS (SELECT 1 FROM verification_finding f WHERE f.verification_id = v.id)
            """,
            [],
        ),
        (
            """
            INSERT INTO verification_findingevent (finding_id, action, actor_id, rationale, created_at)
            SELECT f.id, 'raised', %s, '', f.created_at FROM verification_finding f
            WHERE NOT EXISTS (SELECT 1 FROM verification_findingevent e WHERE e.finding_id = f.id)
            """,
            [portal],
        ),
        (
            f"""
            INSERT INTO verification_findingevent (finding_id, action, actor_id, rationale, created_at)
            SELECT f.id, 'closed', ({actors})[1 + f.id %% 5], 'looked into it',
                LEAST(now(), f.created_at + interval '1 day')
            FROM verification_finding f
            WHERE f.id %% 2 = 0
              AND NOT EXISTS (SELECT 1 FROM verification_findingevent e WHERE e.finding_id = f.id
                              AND e.action = 'closed')
            """,  # noqa: S608
            [],
        ),
        ("VACUUM ANALYZE", []),  # the steady state autovacuum keeps a live table in (statistics, visibility map)
    ]
    with connection.cursor() as cur:
        for sql, params in statements:
            cur.execute(sql, params)


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _use(name: str) -> None:
    """Point Django's connection at database ``name`` (outside any timing)."""
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = name
    connection.ensure_connection()


def _admin_sql(sql: str) -> None:
    """Run ``sql`` on the server's maintenance database (CREATE/DROP DATABASE cannot run inside the one they copy)."""
    import psycopg
    from django.db import connection

    settings = connection.settings_dict
    params = {"host": settings.get("HOST") or None, "port": settings.get("PORT") or None,
              "user": settings.get("USER") or None, "password": settings.get("PASSWORD") or None, "dbname": "postgres"}
    with psycopg.connect(**{k: v for k, v in params.items() if v is not None}, autocommit=True) as conn:
        conn.execute(sql)


def _measure(client: Any, small_db: str, large_db: str) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Response times per URL on each database. Requests alternate between the two databases, each with its own
    connection kept open and swapped in for its requests (as a server keeps its connections), so the machine's other
    load hits both sizes alike and neither pays for reconnecting (a new backend plans its first queries slowly)."""
    from django.db import connections

    _use(small_db)
    first = connections["default"]
    wrappers = {small_db: first, large_db: type(first)({**first.settings_dict, "NAME": large_db}, "default")}
    try:
        for db in (small_db, large_db):
            connections["default"] = wrappers[db]
            for url in URLS:
                for _ in range(WARMUP):
                    response = client.get(url)
                    if response.status_code != 200:
                        raise RuntimeError(f"{url}: {response.status_code}")
        # The warmed-up heap is frozen (as a server that preloads its app does): a full collection of this process's
        # own objects (Django, the data set-up) took ~50 ms and landed in 1 request in 16, on either side, at random.
        gc.collect()
        gc.freeze()
        small: dict[str, list[float]] = {url: [] for url in URLS}
        large: dict[str, list[float]] = {url: [] for url in URLS}
        for _ in range(REQUESTS):
            for db, samples in ((small_db, small), (large_db, large)):
                connections["default"] = wrappers[db]
                for url in URLS:
                    started = time.perf_counter()
                    response = client.get(url)
                    samples[url].append(time.perf_counter() - started)
                    assert response.status_code == 200
    finally:
        gc.unfreeze()
        wrappers[large_db].close()
        connections["default"] = first
    return small, large


def main() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.split("://", 1)[0].lower().startswith(("postgres", "pgsql")):
        return "bench_history: skipped: needs PostgreSQL (set DATABASE_URL=postgres://user@host:5432/name)"
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        _setup_django(Path(tmp) / "var")
        from django.db import connection
        from django.test import Client
        from django.test.utils import setup_test_environment, teardown_test_environment

        from verification.runs.models import Verification
        from verification.trust.services.keys import signing_key_create

        base_name = connection.settings_dict["NAME"]
        connection.settings_dict.setdefault("TEST", {})["NAME"] = f"bench_history_{base_name}"
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
        small_db = connection.settings_dict["NAME"]
        large_db = f"{small_db}_large"
        setup_test_environment()  # the test client's host, as the test suite has it
        try:
            key, _ = signing_key_create()
            manager, reviewers, portal = _people()
            client = Client()
            client.force_login(manager)  # the session is copied with the database below
            started = time.perf_counter()
            _populate(SMALL, offset=0, key_id=key.key_id, reviewers=reviewers, portal=portal)
            connection.close()
            _admin_sql(f'DROP DATABASE IF EXISTS "{large_db}"')
            _admin_sql(f'CREATE DATABASE "{large_db}" TEMPLATE "{small_db}"')
            _use(large_db)
            _populate(LARGE - SMALL, offset=SMALL, key_id=key.key_id, reviewers=reviewers, portal=portal)
            populated = time.perf_counter() - started
            count = Verification.objects.count()
            small, large = _measure(client, small_db, large_db)
            lines = [
                f"history and dashboards through the test client (full middleware), {REQUESTS} requests each, "
                f"alternating between {count:,} and {SMALL:,} verifications; data written in {populated:.1f} s.",
                "p95 ratio large/small (target <= 1.5); medians in brackets:",
            ]
            width = max(len(u) for u in URLS)
            for page in URLS:
                ratio = _p95(large[page]) / _p95(small[page])
                mark = "" if ratio <= 1.5 else "  (above target)"
                lines.append(
                    f"  {page:<{width}}  p95 {_p95(small[page]) * 1000:6.1f} -> {_p95(large[page]) * 1000:6.1f} ms "
                    f"[{statistics.median(small[page]) * 1000:5.1f} -> {statistics.median(large[page]) * 1000:5.1f}]"
                    f"  ratio {ratio:.2f}{mark}"
                )
        finally:
            teardown_test_environment()
            _use(small_db)
            connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)
            _admin_sql(f'DROP DATABASE IF EXISTS "{large_db}"')
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    print(main())

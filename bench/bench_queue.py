"""Reviewer queue benchmark (issue 5 "The reviewer queue", acceptance; run by ``make bench``).

(a) the queue page (``GET /queue/`` through ``django.test.Client``, every middleware, a signed-in reviewer) with
    100,000 verifications (``BENCH_QUEUE_ROWS``) as a ratio to the same page with 100 verifications
    (``BENCH_QUEUE_SMALL_ROWS``), p95 against p95 (target <= 1.5), and its absolute p50/p95. Measured twice: with the
    counts per reason reused for 5 s as deployed (``REVIEWPORTAL_QUEUE_COUNTS_SECONDS``, so the timed requests read
    the list and reuse the counts), and with them recounted on every request (the page a cold cache gets; issue 15:
    <= 1.2, both for 100,000 against 100 and for 1,000,000 against 100,000:
    ``BENCH_QUEUE_ROWS=1000000 BENCH_QUEUE_SMALL_ROWS=100000 BENCH_QUEUE_PARTS=ac``).
(b) claims per second through ``review_claim_next_id`` (what "Next item" calls) with 4 reviewers at once (threads,
    one connection each) as a ratio to a bare claim loop in psycopg on the same data in the same run: the same queue
    query written by hand, ``SELECT … FOR UPDATE SKIP LOCKED``, the same conditional upsert of the lease, one
    transaction per claim (target >= 0.5); and, after every round, the claims not held by their claimer alone (must
    be 0: an item claimed twice, or a claim whose lease another reviewer holds), and the "Next item" calls that came
    back empty (the service answers None only when its query finds no candidate). Measured again with the 4
    reviewers as forked processes (a web server's workers share no interpreter lock), so that the lock's share of the
    ratio shows, and with 1 reviewer.
(d) every reviewer action over real HTTP (``bench/_reviewer_http.py``: gunicorn, one sync worker, a new connection
    per request, one reviewer): the queue page, "Next item" with the review page it opens, a decision with the page
    it redirects to; each as absolute p50/p95, as a ratio to a trivial view through the same middleware in the same
    run, and its p50 against Label Studio's figure in issue 15 (goal: a third of it).

The data. Eleven items are built through the real services (``reviewportal.portal.demo.seed_queue``, the ``make run``
demo: a MISMATCH, a grounded semantic ``cited-conflict``, an expired PENDING, a deterministic FAIL, a NOT_RUN and
UNKNOWN ``missing-baseline`` items; plus a clean deterministic PASS, one UNKNOWN decided PASS by a reviewer through
``review_decide`` and one sent back with ``review_request_evidence``). Every other row is a copy of one of these,
built set-based in SQL (``bench/_seed_sql.py``: what ``_rows_for`` builds for one copy, for all the copies of a
category in one statement per table; 1,000,000 rows took 15-17 min on 2 shared CPUs at load 7-11): a new ``Task``
(with its ``TaskCycle`` 1), a ``Verification`` with the template's submission and indexed head columns (verdict,
determination, flagged, flag_reason, reason, human_decided, pending_until, automated_verdict, evidence_key,
awaiting_evidence) and its own ``submitted_at``, and the template's receipt chain re-signed for the copy with the
active key: the template's canonical envelope with the copy's verification id, created_at, task (``subject``),
PENDING deadline and previous hashes in place, hashed (``content_hash_of``: PostgreSQL's ``sha256``) and signed
(``signing_message``, in Python) (the first copy of each template receipt ``_rows_for`` builds is checked byte for
byte against ``kernel.chain.sign_entry``, and sample SQL copies against ``_rows_for``'s column for column), so the
page reads real signed heads; the reviewer's ``ReviewDecision`` of a decided or
sent-back template is copied too. Not copied: evidence bindings, claims and links (the queue and the claim never read
them). The mix, as fractions of the total: in the queue MISMATCH 6%, cited-conflict 6%, deterministic FAIL (other
flagged) 6%, UNKNOWN 26%, PENDING expired long ago 4%, NOT_RUN 10%; PENDING with deadlines within now +/- 30 min 1%
(about half of them in the queue, the rest joining it during the run); out of the queue: clean PASS 34%, decided by a
reviewer 3%, superseded by a re-run of the same task 1% (the re-runs are among the UNKNOWNs), sent back for more
evidence 1% (with its ``ReviewDecision``), PENDING due later 1%, submitted and not run yet 1% (no receipt).
Submission times are spread over 30 days. Leases: 0.1% of the rows are held now by one of ten other reviewers
(MISMATCH items, the front of the queue), 1% were released and 1% ran out.

PostgreSQL only (DATABASE_URL=postgres://...). Two scratch databases, ``bench_queue_<name>`` (created and migrated
like bench_receipts') and ``bench_queue_<name>_small`` (a copy of it taken after the templates were built), both
dropped at the end; the two sizes are requested in turn, one request each, so that the machine's other load hits
both alike (each size has its own connection, swapped in for its requests); the claim sides run in alternating
rounds. A benchmark, not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import math
import os
import random
import secrets
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]

ROWS = int(os.environ.get("BENCH_QUEUE_ROWS", "100000"))
SMALL_ROWS = int(os.environ.get("BENCH_QUEUE_SMALL_ROWS", "100"))
PAGE_REQUESTS = int(os.environ.get("BENCH_QUEUE_PAGE_REQUESTS", "100"))  # per size and configuration
PAGE_WARM_UP = 10
CLAIMERS = 4
CLAIM_ROUNDS = int(os.environ.get("BENCH_QUEUE_CLAIM_ROUNDS", "3"))
CLAIMS_EACH = int(os.environ.get("BENCH_QUEUE_CLAIMS_EACH", "100"))  # per reviewer and round
CHUNK = 1000
DEEP_ROWS = int(os.environ.get("BENCH_QUEUE_DEEP_ROWS", "30000"))  # (c): how deep the far page is
HTTP_ROUNDS = int(os.environ.get("BENCH_QUEUE_HTTP_ROUNDS", "60"))  # (d): rounds of the reviewer actions
#: Which parts run: any of a, b, c, d (e.g. ``BENCH_QUEUE_PARTS=b`` for the claims alone; the data is built alike).
PARTS = frozenset(os.environ.get("BENCH_QUEUE_PARTS", "abcd").replace(",", ""))
#: (b): a file to write a cProfile of ``PROFILE_CLAIMS`` "Next item" calls to (one reviewer, before the rounds).
PROFILE_PATH = os.environ.get("BENCH_QUEUE_PROFILE", "")
PROFILE_CLAIMS = 200
SEED = 15
#: Keep the two scratch databases at the end (``BENCH_QUEUE_KEEP=1``), named in the report.
KEEP = os.environ.get("BENCH_QUEUE_KEEP", "") not in ("", "0")

#: (category, fraction of all rows, the template it copies). The first seven are in the queue (pending-now: half).
MIX: tuple[tuple[str, float, str], ...] = (
    ("mismatch", 0.06, "demo:mismatch"),
    ("cited-conflict", 0.06, "demo:semantic-conflict"),
    ("deterministic-fail", 0.06, "demo:deterministic-fail"),
    ("unknown", 0.26, "demo:unknown-1"),
    ("pending-expired", 0.04, "demo:expired-pending"),
    ("not-run", 0.10, "demo:not-run"),
    ("pending-now", 0.01, "demo:expired-pending"),
    ("pass", 0.34, "bench:pass"),
    ("decided", 0.03, "demo:unknown-2"),
    ("superseded", 0.01, "demo:unknown-1"),
    ("awaiting-evidence", 0.01, "demo:unknown-3"),
    ("pending-later", 0.01, "demo:expired-pending"),
    ("not-yet-run", 0.01, "demo:unknown-1"),
)
#: The service-built rows, by the category they count in.
TEMPLATE_CATEGORY = {
    "demo:mismatch": "mismatch",
    "demo:semantic-conflict": "cited-conflict",
    "demo:deterministic-fail": "deterministic-fail",
    "demo:unknown-1": "unknown",
    "demo:self-review-trap": "unknown",
    "demo:missing-bytes": "unknown",
    "demo:expired-pending": "pending-expired",
    "demo:not-run": "not-run",
    "bench:pass": "pass",
    "demo:unknown-2": "decided",
    "demo:unknown-3": "awaiting-evidence",
}
HELD_FRACTION, RELEASED_FRACTION, RAN_OUT_FRACTION = 0.001, 0.01, 0.01
#: The categories in the queue whose copies may carry a released or run-out lease (held ones: MISMATCH copies).
QUEUED = ("mismatch", "cited-conflict", "deterministic-fail", "unknown", "pending-expired", "not-run")
OTHER_REVIEWERS = 10
SPREAD = timedelta(days=30)

# The claim loop of the comparison: the queue's claimable items (review_selectors.claimable) written by hand, in
# queue order over migration 0007's expression (so the same partial index serves it), the first one locked with
# SKIP LOCKED; then services.reviews._take_lease's upsert, whose row count decides a race.
RANK_SQL = (
    "CASE WHEN v.verdict = 'MISMATCH' THEN 0 WHEN v.reason = 'cited-conflict' THEN 1 "
    "WHEN v.verdict IN ('UNKNOWN', 'PENDING') THEN 3 WHEN v.verdict = 'NOT_RUN' THEN 4 ELSE 2 END"
)
BARE_PICK = (
    "SELECT v.id FROM verification_verification v "  # noqa: S608 - constant text
    "LEFT JOIN verification_reviewlease l ON l.verification_id = v.id "
    "WHERE v.verdict IS NOT NULL AND NOT v.human_decided "
    "AND (v.flagged OR (v.verdict = 'PENDING' AND v.pending_until <= %(now)s)) "
    "AND (v.flagged OR v.verdict = 'PENDING') "
    "AND NOT EXISTS (SELECT 1 FROM verification_verification s WHERE s.supersedes_id = v.id) "
    "AND NOT EXISTS (SELECT 1 FROM verification_reviewdecision d "
    "WHERE d.verification_id = v.id AND d.action = 'MORE_EVIDENCE') "
    "AND (l.verification_id IS NULL OR l.released_at IS NOT NULL OR l.expires_at <= %(now)s) "
    "AND v.id <> ALL(%(skipped)s::uuid[]) "
    f"ORDER BY {RANK_SQL}, v.submitted_at, v.id LIMIT 1 FOR UPDATE OF v SKIP LOCKED"
)
BARE_TAKE = (
    "INSERT INTO verification_reviewlease (verification_id, holder_id, claimed_at, expires_at, released_at, "
    "end_reason) VALUES (%(id)s, %(holder)s, %(now)s, %(until)s, NULL, '') "
    "ON CONFLICT (verification_id) DO UPDATE SET holder_id = excluded.holder_id, claimed_at = excluded.claimed_at, "
    "expires_at = excluded.expires_at, released_at = NULL, end_reason = '' "
    "WHERE verification_reviewlease.released_at IS NOT NULL OR verification_reviewlease.expires_at <= %(now)s"
)
CLAIM_ATTEMPTS = 8  # as services.reviews.CLAIM_ATTEMPTS


# --- the data --------------------------------------------------------------------------------------------------------


@dataclass
class Template:
    """A service-built verification to copy: its row, its task's title, its receipts (payload and indexed columns)."""

    verification: Any
    title: str
    receipts: list[dict[str, Any]]
    decision: Any = None  # the reviewer's ReviewDecision (PASS or MORE_EVIDENCE) of a decided template


@dataclass
class World:
    owner_id: int
    reviewer: Any  # signs in to read the page; owns the copied ReviewDecisions
    claimers: list[Any]
    others: list[Any]  # hold the dataset's leases
    key_id: str
    private_key: Any
    templates: dict[str, Template] = field(default_factory=dict)


def _users() -> tuple[Any, list[Any], list[Any]]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    group = Group.objects.get(name="reviewer")
    users: Any = get_user_model().objects
    made = []
    for name in ["reviewer", *(f"bench-claimer-{i}" for i in range(CLAIMERS)),
                 *(f"bench-other-{i}" for i in range(OTHER_REVIEWERS))]:
        user = users.create_user(username=name, password=secrets.token_urlsafe(16))
        user.groups.add(group)
        made.append(user)
    return made[0], made[1 : 1 + CLAIMERS], made[1 + CLAIMERS :]


def _service_templates(reviewer: Any) -> None:
    """The demo queue, a clean PASS, one UNKNOWN decided PASS and one sent back for more evidence: real services."""
    from reviewportal.portal.demo import seed_queue
    from verification.actors.models import ApiToken
    from verification.actors.selectors import actor_get
    from verification.kernel.digests import sha256_digest
    from verification.reviews.services.claims import review_claim
    from verification.reviews.services.decisions import new_request_key, review_decide, review_request_evidence
    from verification.runs.models import Verification
    from verification.runs.services.rubrics import rubric_register
    from verification.runs.services.run import verification_run
    from verification.runs.services.submit import verification_submit
    from verification.runs.services.tasks import claim_record, contract_accept, task_create
    from verification.trust.selectors import head_of, receipt_payload

    seed_queue(reviewer=reviewer)
    owner, agent = actor_get("demo-owner"), actor_get("demo-agent")
    assert owner is not None and agent is not None
    token = ApiToken.objects.filter(actor=agent, revoked_at__isnull=True).order_by("created_at", "id").first()
    notes = b"release-notes v1.2\n- fix: retry on timeout\n"
    task = task_create(actor=owner, title="Release notes match the agreed digest", external_ref="bench:pass")
    criterion = {"id": "notes-digest", "kind": "digest", "observable": "evidence.content-digest",
                 "expression": f'(= notes "{sha256_digest(notes)}")'}
    rubric = rubric_register(actor=owner, document={"name": "notes", "criteria": [criterion]})
    contract_accept(actor=owner, task=task, rubric_hash=rubric.rubric_hash)
    claim_record(actor=agent, token=token, task=task)
    body = {"evidence": [{"symbol": "notes", "content_base64": base64.b64encode(notes).decode("ascii")}]}
    verification, _ = verification_submit(actor=agent, token=token, task=task, body=body, idempotency_key=None)
    verification_run(verification_id=verification.pk)

    decided = Verification.objects.get(task__external_ref="demo:unknown-2")
    head = head_of(decided)
    assert head is not None
    cited = [str(e["id"]) for e in receipt_payload(head)["evidence"]]
    review_claim(user=reviewer, verification=decided)
    review_decide(user=reviewer, verification=decided, verdict="PASS", rationale="the new timeout is intended",
                  cited_evidence_ids=cited, request_key=new_request_key())
    sent_back = Verification.objects.get(task__external_ref="demo:unknown-3")
    review_claim(user=reviewer, verification=sent_back)
    review_request_evidence(user=reviewer, verification=sent_back, rationale="attach the deployment diff",
                            request_key=new_request_key())


def _load_templates(world: World) -> None:
    from verification.kernel.canonical import loads_strict
    from verification.reviews.models import ReviewDecision
    from verification.runs.models import Verification
    from verification.trust.models import Receipt
    from verification.trust.selectors import receipt_payload

    for verification in Verification.objects.select_related("task").filter(task__external_ref__in=TEMPLATE_CATEGORY):
        receipts = [
            {
                "payload": receipt_payload(r),
                "kind": r.kind,
                "verdict": r.verdict,
                "determination": r.determination,
                "authority": r.authority,
                "actor": r.actor,
                "after": r.created_at - verification.submitted_at,
                "created": loads_strict(r.envelope)["created_at"],
                "hash": r.content_hash,
                "envelope": r.envelope,
                "checked": False,
            }
            for r in Receipt.objects.filter(verification=verification).order_by("seq")
        ]
        decision = ReviewDecision.objects.filter(verification=verification).first()
        if verification.pending_until is not None:  # the copies move the deadline by its text in the envelope
            assert verification.pending_until.isoformat() in receipts[0]["envelope"], verification.task.external_ref
        world.templates[verification.task.external_ref] = Template(verification, verification.task.title, receipts,
                                                                   decision)
    assert set(world.templates) == set(TEMPLATE_CATEGORY), sorted(set(TEMPLATE_CATEGORY) - set(world.templates))


def _allocate(total: int) -> dict[str, int]:
    """Rows per category for ``total`` rows (each at least 1), the rounding taken up by the clean PASSes."""
    counts = {name: max(1, round(total * fraction)) for name, fraction, _ in MIX}
    counts["pass"] += total - sum(counts.values())
    return counts


def _substitute(value: Any, mapping: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, dict):
        return {k: _substitute(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, mapping) for v in value]
    return value


@dataclass
class Spec:
    """One row to copy: its category and template, its ids and times, and what refers to it."""

    category: str
    template: str
    verification_id: uuid.UUID
    task_id: uuid.UUID
    submitted_at: datetime
    deadline: datetime | None = None
    supersedes: uuid.UUID | None = None
    own_task: bool = True
    lease: str | None = None  # held, released, ran-out


def _copy_envelope(r: dict[str, Any], mapping: Mapping[str, str]) -> str:
    """The template receipt's canonical envelope with the copy's values in place of the template's.

    Only string values change (ids, hashes, RFC 3339 times, none needing an escape) and no key does, so the text is
    what canonicalizing the substituted body gives; the first copy of each template receipt is checked against
    ``sign_entry`` byte for byte (``_rows_for``)."""
    envelope = str(r["envelope"])
    for old, new in mapping.items():
        envelope = envelope.replace(old, new)
    return envelope


def _rows_for(spec: Spec, world: World, rng: random.Random) -> dict[str, list[Any]]:
    from verification.kernel.chain import content_hash_of, format_created_at, sign_entry, signing_message
    from verification.reviews.models import ReviewDecision, ReviewLease
    from verification.runs.models import Task, TaskCycle, Verification
    from verification.trust.models import Receipt

    t = world.templates[spec.template]
    tv = t.verification
    rows: dict[str, list[Any]] = {"tasks": [], "cycles": [], "verifications": [], "receipts": [], "decisions": [],
                                  "leases": []}
    if spec.own_task:
        opened = spec.submitted_at - timedelta(hours=1)
        rows["tasks"].append(Task(id=spec.task_id, title=f"{t.title} · {spec.category} {str(spec.task_id)[:8]}",
                                  external_ref=f"bench:{spec.category}", created_by_id=world.owner_id,
                                  created_at=opened))
        rows["cycles"].append(TaskCycle(task_id=spec.task_id, number=1, opened_at=opened, opened_by_id=world.owner_id))
    ran = spec.category != "not-yet-run"
    v = Verification(
        id=spec.verification_id, rubric_hash=tv.rubric_hash, submission_hash=tv.submission_hash,
        created_at=spec.submitted_at, task_id=spec.task_id, cycle=1, rubric_id=tv.rubric_id,
        submitted_by_id=tv.submitted_by_id, submitted_boundary=tv.submitted_boundary, body=tv.body,
        submitted_at=spec.submitted_at, supersedes_id=spec.supersedes, awaiting_evidence=tv.awaiting_evidence,
        attempts=1 if ran else 0, started_at=spec.submitted_at if ran else None,
        verdict=tv.verdict if ran else None, determination=tv.determination if ran else None,
        flagged=tv.flagged if ran else False, flag_reason=tv.flag_reason if ran else None,
        reason=tv.reason if ran else None, human_decided=tv.human_decided,
        automated_verdict=tv.automated_verdict if ran else None,
        pending_until=spec.deadline if spec.deadline is not None else tv.pending_until if ran else None,
        evidence_key=tv.evidence_key,
    )
    rows["verifications"].append(v)
    mapping = {str(tv.id): str(v.id), str(tv.task_id): str(spec.task_id)}
    if ran:
        if spec.deadline is not None and tv.pending_until is not None:
            mapping[tv.pending_until.isoformat()] = spec.deadline.isoformat()
        prev = None
        for seq, r in enumerate(t.receipts):
            created = spec.submitted_at + r["after"]
            mapping[r["created"]] = format_created_at(created)
            envelope = _copy_envelope(r, mapping)
            content_hash = content_hash_of(envelope)
            if not r["checked"]:  # the first copy: the kernel's own signing gives the same bytes
                entry = sign_entry(private_key=world.private_key, verification_id=str(v.id), seq=seq,
                                   rubric_hash=v.rubric_hash, submission_hash=v.submission_hash, prev_hash=prev,
                                   payload=_substitute(r["payload"], mapping), created_at=created)
                assert (entry.envelope, entry.content_hash) == (envelope, content_hash), spec.template
                r["checked"] = True
            signature = base64.b64encode(world.private_key.sign(signing_message(content_hash))).decode("ascii")
            mapping[r["hash"]] = content_hash
            supersedes = r["payload"].get("supersedes_receipt_id")
            rows["receipts"].append(Receipt(
                content_hash=content_hash, verification_id=v.id, seq=seq, key_id=world.key_id, prev_hash=prev,
                signature=signature, envelope=envelope, created_at=created, kind=r["kind"], verdict=r["verdict"],
                determination=r["determination"], authority=r["authority"], actor=r["actor"],
                supersedes_receipt_id=mapping[supersedes] if supersedes else None,
            ))
            prev = content_hash
    if t.decision is not None:
        d = t.decision
        rows["decisions"].append(ReviewDecision(
            request_key=secrets.token_urlsafe(24), verification_id=v.id, user_id=d.user_id, actor_id=d.actor_id,
            action=d.action, rationale=d.rationale, cited_evidence_ids=d.cited_evidence_ids,
            receipt_id=mapping.get(d.receipt_id) if d.receipt_id else None,
            created_at=spec.submitted_at + timedelta(hours=2),
        ))
    if spec.lease is not None:
        now = datetime.now(UTC)
        holder = rng.choice(world.others)
        if spec.lease == "held":
            claimed = now - timedelta(minutes=5)
            lease = ReviewLease(verification_id=v.id, holder_id=holder.pk, claimed_at=claimed,
                                expires_at=claimed + timedelta(minutes=15))
        else:
            claimed = spec.submitted_at + timedelta(minutes=30)
            lease = ReviewLease(verification_id=v.id, holder_id=holder.pk, claimed_at=claimed,
                                expires_at=claimed + timedelta(minutes=15),
                                released_at=claimed + timedelta(minutes=5) if spec.lease == "released" else None,
                                end_reason="released" if spec.lease == "released" else "")
        rows["leases"].append(lease)
    return rows


def _fill(total: int, world: World) -> tuple[dict[str, int], str]:
    """Add copies until the database holds ``total`` verifications, set-based (``bench/_seed_sql.py``: the plan and
    every row in SQL, the signatures in Python), check sample copies against ``_rows_for`` and the rollup's counts
    against a recount; VACUUM ANALYZE. The rows per category, and a note on the build."""
    from django.db import connection

    from bench import _seed_sql
    from verification.runs.models import Verification

    started = time.perf_counter()
    counts = _allocate(total)
    for category in TEMPLATE_CATEGORY.values():
        counts[category] -= 1
    assert min(counts.values()) >= 0, f"{total} rows are too few for the mix"
    template_of = {name: template for name, _, template in MIX}
    rng = random.Random(SEED + total)

    def prototype(category: str, vid: uuid.UUID, task_id: uuid.UUID, submitted: datetime, deadline: datetime | None,
                  supersedes: uuid.UUID | None, lease: str | None) -> dict[str, list[Any]]:
        spec = Spec(category, template_of[category], vid, task_id, submitted, deadline, supersedes,
                    own_task=supersedes is None, lease=lease)
        return _rows_for(spec, world, rng)

    plan = _seed_sql.Plan(
        counts=counts, queued=QUEUED, held=max(1, round(total * HELD_FRACTION)),
        released=max(1, round(total * RELEASED_FRACTION)), ran_out=max(1, round(total * RAN_OUT_FRACTION)),
        holders=[u.pk for u in world.others], now=datetime.now(UTC), spread=SPREAD,
        seed=((SEED + total) % 1000) / 1000,
    )
    seeded = _seed_sql.seed(plan, {name: world.templates[t] for name, t in template_of.items()}, prototype,
                            world.key_id, world.private_key)
    problems = _seed_sql.check(prototype)
    assert not problems, "the set-based copies differ from _rows_for's:\n" + "\n".join(problems[:20])
    _seed_sql.drop()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    assert Verification.objects.count() == total
    for category in TEMPLATE_CATEGORY.values():
        counts[category] += 1
    steps = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in seeded.steps.items())
    rows = ", ".join(f"{name} {n:,}" for name, n in seeded.rows.items())
    return counts, f"{total:,} built in {time.perf_counter() - started:.0f} s ({steps}; rows added: {rows})"


# --- databases -------------------------------------------------------------------------------------------------------


def _dsn(name: str | None = None) -> dict[str, Any]:
    from django.db import connection

    s = connection.settings_dict
    dsn = {"host": s.get("HOST") or None, "port": s.get("PORT") or None, "user": s.get("USER") or None,
           "password": s.get("PASSWORD") or None, "dbname": name or s["NAME"]}
    return {k: v for k, v in dsn.items() if v is not None}


def _admin(sql: str) -> None:
    """One statement on the server's ``postgres`` database (CREATE/DROP DATABASE need autocommit)."""
    import psycopg

    with psycopg.connect(**_dsn("postgres"), autocommit=True) as conn:
        conn.execute(sql)


def _use(name: str) -> None:
    """Point Django's connection (and every thread's next one) at database ``name``; drop cached counts."""
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = name
    settings.DATABASES["default"]["NAME"] = name
    cache.clear()


def _wrapper(name: str) -> Any:
    """A second connection object of the ``default`` alias, to database ``name`` (swapped in for a request)."""
    from django.db import connections

    current = connections["default"]
    return type(current)({**current.settings_dict, "NAME": name}, "default")


# --- (a) the page ----------------------------------------------------------------------------------------------------


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _page_client(reviewer_name: str) -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=reviewer_name))
    return client


def _get_queue(client: Any, url: str = "/queue/") -> float:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.status_code
    rows = response.content.count(b"data-queue-row=")
    assert rows == 50, f"the page shows {rows} rows, not a full page of 50"
    return elapsed


@dataclass(frozen=True)
class PageSQL:
    queries: int
    sql_ms: float  # all of a page's statements (median of 5 pages)
    counts_ms: float  # of which the counts per reason


def _page_sql(client: Any) -> PageSQL:
    """The statements of a page as the server timed them (the counts recounted)."""
    import statistics

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    pages = []
    for _ in range(5):
        with CaptureQueriesContext(connection) as captured:
            _get_queue(client)
        times = [(float(q["time"]) * 1000, "COUNT(" in q["sql"]) for q in captured]
        pages.append((len(times), sum(t for t, _ in times), sum(t for t, counting in times if counting)))
    return PageSQL(pages[0][0], statistics.median(p[1] for p in pages), statistics.median(p[2] for p in pages))


def _time_pages(
    wrappers: dict[str, Any], counts_seconds: int
) -> tuple[dict[str, list[float]], dict[str, PageSQL]]:
    """Seconds per request for each size, one request of each in turn (so that the machine's other load hits both
    alike), after a warm-up; and the queries of one page of each (with the counts recounted)."""
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connections

    def activate(size: str) -> None:
        connections["default"] = wrappers[size]
        cache.key_prefix = f"bench-queue-{size}"  # each size its own cached counts

    settings.REVIEWPORTAL_QUEUE_COUNTS_SECONDS = counts_seconds
    clients: dict[str, Any] = {}
    for size in wrappers:
        activate(size)
        cache.clear()
        clients[size] = _page_client("reviewer")
        for _ in range(PAGE_WARM_UP):  # the connection, templates, the planner's statistics, the counts
            _get_queue(clients[size])
    queries: dict[str, PageSQL] = {}
    if counts_seconds == 0:
        for size in wrappers:
            activate(size)
            queries[size] = _page_sql(clients[size])
    samples: dict[str, list[float]] = {size: [] for size in wrappers}
    order = list(wrappers)
    for i in range(PAGE_REQUESTS):
        for size in order if i % 2 == 0 else reversed(order):
            activate(size)
            samples[size].append(_get_queue(clients[size]))
    return samples, queries


def _deep_cursor(depth: int) -> tuple[str, int]:
    """The cursor of the queue row ``depth`` rows from the front (what ``depth / 50`` "Next page" follows reach),
    and the depth used (less when the queue is shorter)."""
    from django.utils import timezone

    from verification.reviews.selectors import Cursor, queue_items

    items = queue_items(now=timezone.now())
    depth = max(0, min(depth, items.count() - 60))
    rank, submitted_at, pk = items.values_list("queue_rank", "submitted_at", "pk")[depth]
    return Cursor(int(rank), submitted_at, pk).encode(), depth


def _time_deep(depth: int) -> tuple[dict[str, list[float]], int]:
    """Page 1 and a page ``depth`` rows deep, one request of each in turn, counts recounted on every request."""
    from django.conf import settings

    settings.REVIEWPORTAL_QUEUE_COUNTS_SECONDS = 0
    cursor, used = _deep_cursor(depth)
    client = _page_client("reviewer")
    urls = {"page 1": "/queue/", "deep": f"/queue/?cursor={cursor}"}
    for _ in range(PAGE_WARM_UP):
        for url in urls.values():
            _get_queue(client, url)
    samples: dict[str, list[float]] = {name: [] for name in urls}
    for i in range(PAGE_REQUESTS):
        for name in urls if i % 2 == 0 else reversed(list(urls)):
            samples[name].append(_get_queue(client, urls[name]))
    return samples, used


def _time_http(large: str) -> Any:
    """The reviewer actions over real HTTP (``bench/_reviewer_http.py``), against database ``large``."""
    from django.conf import settings

    from bench._reviewer_http import measure

    url = os.environ["DATABASE_URL"]
    scheme, rest = url.split("://", 1)
    server = rest.split("/", 1)[0]
    client = _page_client("reviewer")
    return measure(database_url=f"{scheme}://{server}/{large}", session_key=client.cookies["sessionid"].value,
                   secret_key=settings.SECRET_KEY, rounds=HTTP_ROUNDS)


# --- (b) claims ------------------------------------------------------------------------------------------------------


def _service_claimer(
    user: Any, claims: int, got: list[Any], tally: list[tuple[float, int]], start: Any, errors: list[Any]
) -> None:
    """``claims`` times "Next item" through the service; ``tally`` gets (CPU seconds, claims that came back empty)."""
    from django.db import connection

    from verification.reviews.services.claims import review_claim_next_id

    try:
        connection.ensure_connection()
        user.has_perm("reviewportal.decide_verification")  # the permission cache, as a signed-in request has it
        start.wait(timeout=120)
        began, empty = time.thread_time(), 0
        for _ in range(claims):
            claimed = review_claim_next_id(user=user)  # what "Next item" (portal.views.claim_next) calls
            if claimed is None:  # the queue ran dry
                empty += 1
            else:
                got.append(claimed)
        tally.append((time.thread_time() - began, empty))
    except BaseException as exc:  # noqa: BLE001 - reported by the caller
        errors.append(exc)
        start.abort()
    finally:
        connection.close()


def _bare_claimer(
    user: Any, claims: int, got: list[Any], tally: list[tuple[float, int]], start: Any, errors: list[Any]
) -> None:
    """The same with the bare loop: pick with SKIP LOCKED, upsert, commit; on a lost race the next candidate."""
    import psycopg

    try:
        with psycopg.connect(**_dsn()) as conn:
            conn.execute("SELECT 1")
            conn.commit()
            start.wait(timeout=120)
            began, empty = time.thread_time(), 0
            for _ in range(claims):
                skipped: list[uuid.UUID] = []
                taken = None
                for _ in range(CLAIM_ATTEMPTS):
                    now = datetime.now(UTC)
                    with conn.transaction():
                        row = conn.execute(BARE_PICK, {"now": now, "skipped": skipped}).fetchone()
                        if row is None:
                            break
                        cursor = conn.execute(BARE_TAKE, {"id": row[0], "holder": user.pk, "now": now,
                                                          "until": now + timedelta(minutes=15)})
                        if cursor.rowcount == 1:
                            taken = row[0]
                    if taken is not None:
                        break
                    skipped.append(row[0])
                if taken is None:
                    empty += 1
                else:
                    got.append(taken)
            tally.append((time.thread_time() - began, empty))
    except BaseException as exc:  # noqa: BLE001 - reported by the caller
        errors.append(exc)
        start.abort()


def _claim_round(
    claimer: Callable[..., None], users: list[Any], claims: int
) -> tuple[float, tuple[float, int], list[list[Any]]]:
    """Every reviewer claims ``claims`` items at once, each in its own thread on its own connection; (seconds, (CPU
    seconds of the claiming threads, claims that came back empty), each one's items)."""
    got: list[list[Any]] = [[] for _ in users]
    tally: list[tuple[float, int]] = []
    errors: list[Any] = []
    start = threading.Barrier(len(users) + 1)
    threads = [
        threading.Thread(target=claimer, args=(u, claims, got[i], tally, start, errors)) for i, u in enumerate(users)
    ]
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a claimer that failed broke it: reported below
        start.wait(timeout=120)
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed, (sum(t[0] for t in tally), sum(t[1] for t in tally)), got


def _worker_loop(user_pk: int, pipe: Any, start: Any) -> None:
    """One reviewer in a forked process (as one of a web server's workers), kept for every round: on ("service" |
    "bare", claims) claim and answer (pks, CPU seconds, error or None); on None stop."""
    from django.contrib.auth import get_user_model
    from django.db import connections

    try:
        user = get_user_model().objects.get(pk=user_pk)
        while (order := pipe.recv()) is not None:
            side, claims = order
            got: list[Any] = []
            tally: list[tuple[float, int]] = []
            errors: list[Any] = []
            (_service_claimer if side == "service" else _bare_claimer)(user, claims, got, tally, start, errors)
            pipe.send(([str(pk) for pk in got], tally[0] if tally else (0.0, 0), repr(errors[0]) if errors else None))
    finally:
        connections.close_all()


class _Workers:
    """``CLAIMERS`` forked reviewer processes, each with its own interpreter and connection."""

    def __init__(self, users: list[Any]) -> None:
        import gc
        import multiprocessing

        from django.db import connections

        context = multiprocessing.get_context("fork")
        self.users = users
        self.start = context.Barrier(len(users) + 1)
        self.pipes: list[Any] = []
        self.processes: list[Any] = []
        connections.close_all()  # a child must not inherit an open connection
        gc.freeze()  # the children share the parent's heap pages instead of copying them at their first collection
        try:
            for user in users:
                parent_end, child_end = context.Pipe()
                process = context.Process(target=_worker_loop, args=(user.pk, child_end, self.start), daemon=True)
                process.start()
                self.pipes.append(parent_end)
                self.processes.append(process)
        finally:
            gc.unfreeze()

    def round(self, side: str, claims: int) -> tuple[float, tuple[float, int], list[list[Any]]]:
        """As ``_claim_round``, with the reviewers in these processes."""
        for pipe in self.pipes:
            pipe.send((side, claims))
        with contextlib.suppress(threading.BrokenBarrierError):  # a claimer that failed broke it: reported below
            self.start.wait(timeout=120)
        started = time.perf_counter()
        reports = [pipe.recv() for pipe in self.pipes]
        elapsed = time.perf_counter() - started
        failed = [error for *_, error in reports if error is not None]
        if failed:
            raise RuntimeError(f"a claiming process failed: {failed[0]}")
        tally = (sum(t[0] for _, t, _ in reports), sum(t[1] for _, t, _ in reports))
        return elapsed, tally, [[uuid.UUID(pk) for pk in pks] for pks, _, _ in reports]

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()


def _not_exclusive(users: list[Any], got: list[list[Any]]) -> int:
    """Claims not held by their claimer alone: an item claimed twice, or a claim whose lease someone else holds."""
    from verification.reviews.models import ReviewLease

    claimed = [pk for items in got for pk in items]
    twice = sum(n - 1 for n in Counter(claimed).values() if n > 1)
    now = datetime.now(UTC)
    holders = dict(
        ReviewLease.objects.filter(verification_id__in=claimed, released_at__isnull=True, expires_at__gt=now)
        .values_list("verification_id", "holder_id")
    )
    lost = sum(1 for user, items in zip(users, got, strict=True) for pk in items if holders.get(pk) != user.pk)
    return twice + lost


def _restore_leases(claimed: list[Any]) -> None:
    """Put the lease rows of the claimed items back as the data had them, so every round starts alike."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM verification_reviewlease WHERE verification_id = ANY(%s)", [claimed])
        cursor.execute(
            "INSERT INTO verification_reviewlease SELECT * FROM bench_lease_snapshot WHERE verification_id = ANY(%s)",
            [claimed],
        )
        cursor.execute("VACUUM ANALYZE verification_reviewlease")


@dataclass
class ClaimSide:
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    empty: int = 0  # "Next item" calls that came back empty although the queue was not (every round)
    claims: int = 0  # timed
    checked: int = 0  # every round's claims, the warm-up's too
    not_exclusive: int = 0  # of the checked

    @property
    def rate(self) -> float:
        return self.claims / self.seconds

    @property
    def cpu_ms_per_claim(self) -> float:
        return 1000 * self.cpu_seconds / self.claims


def _claim_rounds(
    mode: str, users: list[Any], claimers: dict[str, Callable[..., None]], workers: _Workers | None,
    sides: dict[tuple[str, str], ClaimSide],
) -> None:
    """Round 0 warms both sides up (its claims are checked, not timed); then alternating timed rounds."""
    for round_no in range(CLAIM_ROUNDS + 1):  # round 0 warms both sides up and is not counted
        for name in ("service", "bare") if round_no % 2 == 0 else ("bare", "service"):
            claims = CLAIMS_EACH if round_no else 20
            if workers is None:
                elapsed, (cpu, empty), got = _claim_round(claimers[name], users, claims)
            else:
                elapsed, (cpu, empty), got = workers.round(name, claims)
            side = sides[mode, name]
            side.not_exclusive += _not_exclusive(users, got)
            claimed = [pk for items in got for pk in items]
            side.checked += len(claimed)
            side.empty += empty
            _restore_leases(claimed)
            if round_no:
                side.seconds += elapsed
                side.cpu_seconds += cpu
                side.claims += len(claimed)


#: (mode, reviewers, how they run): the target's 4 reviewers as threads, as processes, and 1 reviewer for scale.
CLAIM_MODES = (("threads", CLAIMERS, "threads"), ("processes", CLAIMERS, "processes"), ("one", 1, "threads"))


def _claims(users: list[Any]) -> dict[tuple[str, str], ClaimSide]:
    """Alternating rounds of the service and the bare loop on the same data (the leases are put back each time),
    for each of ``CLAIM_MODES``; keyed by (mode, service|bare). The leases as the data has them are in
    ``bench_lease_snapshot``."""
    sides = {(mode, name): ClaimSide() for mode, _, _ in CLAIM_MODES for name in ("service", "bare")}
    claimers = {"service": _service_claimer, "bare": _bare_claimer}
    for mode, n, how in CLAIM_MODES:
        workers = _Workers(users[:n]) if how == "processes" else None
        try:
            _claim_rounds(mode, users[:n], claimers, workers, sides)
        finally:
            if workers is not None:
                workers.close()
    return sides


def _profile_claims(user: Any, path: str) -> str:
    """cProfile of ``PROFILE_CLAIMS`` "Next item" calls by one reviewer, written to ``path`` (pstats); the leases are
    put back after. A note for the report: the claims made and the Python CPU per claim under the profiler."""
    import cProfile

    from verification.reviews.services.claims import review_claim_next_id

    user.has_perm("reviewportal.decide_verification")  # the permission cache, as a signed-in request has it
    profiler = cProfile.Profile()
    began = time.process_time()
    profiler.enable()
    got = [review_claim_next_id(user=user) for _ in range(PROFILE_CLAIMS)]
    profiler.disable()
    cpu = time.process_time() - began
    profiler.dump_stats(path)
    claimed = [pk for pk in got if pk is not None]
    _restore_leases(claimed)
    return f"(b) profile: {len(claimed)} claims, {1000 * cpu / PROFILE_CLAIMS:.2f} ms CPU each under cProfile; {path}"


# --- the run ---------------------------------------------------------------------------------------------------------


def _table(rows: list[tuple[str, str, str, str, str]]) -> str:
    head = ("measure", "value", "comparison (same run)", "ratio (p95)", "target")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(5)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in (head, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _queue_census() -> tuple[int, list[tuple[str, int]], bool]:
    """The queue's length and counts per reason from the rollup (as the page reads them), and whether a recount of
    the queue itself (``queue_items`` grouped by its reason as read) gives the same."""
    from django.db.models import Count
    from django.utils import timezone

    from verification.reviews.selectors import queue_counts, queue_items

    now = timezone.now()
    counts = queue_counts(now=now, cached=False)
    rows = queue_items(now=now).order_by().values("queue_reason").annotate(n=Count("pk"))
    recount = sorted(((str(r["queue_reason"]), int(r["n"])) for r in rows), key=lambda pair: (-pair[1], pair[0]))
    return sum(n for _, n in counts), counts, recount == counts


def main() -> str | None:
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from bench.bench_receipts import _postgres_skip_reason, _setup_django  # one way to reach the scratch database

    skipped = _postgres_skip_reason(os.environ.get("DATABASE_URL", ""))
    if skipped is not None:
        return f"bench_queue: skipped: {skipped}"
    for noisy in ("celery", "kombu", "axes", "verification", "reviewportal"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Kept with the databases (BENCH_QUEUE_KEEP): the signing key the kept chains were signed with lives in it.
    var_dir = (
        contextlib.nullcontext(tempfile.mkdtemp(prefix="bench-queue-"))
        if KEEP
        else tempfile.TemporaryDirectory(prefix="bench-queue-")
    )
    with var_dir as tmp:
        _setup_django(Path(tmp) / "var")
        from django.conf import settings
        from django.db import connection, connections

        from verification.actors.models import Actor
        from verification.trust import signing
        from verification.trust.services.keys import signing_key_create

        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the test client's host name
        base_name = connection.settings_dict["NAME"]
        large, small = f"bench_queue_{base_name}", f"bench_queue_{base_name}_small"
        connection.settings_dict.setdefault("TEST", {})["NAME"] = large
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
        small_made = False
        try:
            signing_key_create()
            key_row, private_key = signing.active_signer()
            reviewer, claimers, others = _users()
            _service_templates(reviewer)
            owner = Actor.objects.get(name="demo-owner")
            world = World(owner.pk, reviewer, claimers, others, key_row.key_id, private_key)
            _load_templates(world)
            connection.close()
            _admin(f'DROP DATABASE IF EXISTS "{small}"')
            _admin(f'CREATE DATABASE "{small}" TEMPLATE "{large}"')
            small_made = True

            mix, built = _fill(ROWS, world)
            large_queue, large_counts, large_agree = _queue_census()
            _use(small)
            _, small_built = _fill(SMALL_ROWS, world)
            small_queue, _, small_agree = _queue_census()

            _use(large)
            if "a" in PARTS:
                wrappers = {"large": connections["default"], "small": _wrapper(small)}
                try:
                    deployed, _ = _time_pages(wrappers, counts_seconds=5)
                    cold, queries = _time_pages(wrappers, counts_seconds=0)
                finally:
                    connections["default"] = wrappers["large"]
                    wrappers["small"].close()
            if "c" in PARTS:
                deep, depth = _time_deep(DEEP_ROWS)
            if "b" in PARTS:
                with connection.cursor() as cursor:
                    cursor.execute("CREATE TABLE bench_lease_snapshot AS SELECT * FROM verification_reviewlease")
                profiled = _profile_claims(claimers[0], PROFILE_PATH) if PROFILE_PATH else ""
                claims = _claims(claimers)
            if "d" in PARTS:
                http = _time_http(large)
        finally:
            _use(large)
            if KEEP:  # to look into them afterwards (EXPLAIN ANALYZE); the next run replaces them
                connection.close()
                connection.settings_dict["NAME"] = old_name
            else:
                connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)
                if small_made:
                    _admin(f'DROP DATABASE IF EXISTS "{small}"')

    def page_row(label: str, samples: dict[str, list[float]]) -> tuple[str, str, str, str, str]:
        big, little = samples["large"], samples["small"]
        return (
            label,
            f"p50 {_ms(_percentile(big, 0.5))}, p95 {_ms(_percentile(big, 0.95))}",
            f"{SMALL_ROWS:,} verifications: p50 {_ms(_percentile(little, 0.5))}, p95 {_ms(_percentile(little, 0.95))}",
            f"{_percentile(big, 0.95) / _percentile(little, 0.95):.2f} "
            f"(p50: {_percentile(big, 0.5) / _percentile(little, 0.5):.2f})",
            "<= 1.5",
        )

    rows: list[tuple[str, str, str, str, str]] = []
    notes: list[str] = []
    if "a" in PARTS:
        rows += [
            page_row(f"(a) GET /queue/, {ROWS:,} verifications, counts reused 5 s (as deployed)", deployed),
            (*page_row("    the same, counts recounted on every request", cold)[:4], "<= 1.2"),
        ]
    if "b" in PARTS:
        labels = {
            "threads": f"(b) claims/s, review_claim_next_id, {CLAIMERS} reviewers as threads of one process",
            "processes": f"    the same, {CLAIMERS} reviewers as processes (a web server's workers)",
            "one": "    the same, 1 reviewer alone",
        }
        for mode, _, _ in CLAIM_MODES:
            service, bare = claims[mode, "service"], claims[mode, "bare"]
            rows.append((
                labels[mode],
                f"{service.rate:,.0f}/s",
                f"bare psycopg SKIP LOCKED loop, same query and upsert: {bare.rate:,.0f}/s",
                f"{service.rate / bare.rate:.2f}",
                ">= 0.5" if mode == "threads" else "(none)",
            ))
        sides = ("service", "bare")
        not_exclusive = {name: sum(claims[mode, name].not_exclusive for mode, _, _ in CLAIM_MODES) for name in sides}
        checked = {name: sum(claims[mode, name].checked for mode, _, _ in CLAIM_MODES) for name in sides}
        empty = {name: sum(claims[mode, name].empty for mode, _, _ in CLAIM_MODES) for name in sides}
        rows.append((
            '    "Next item" calls that came back empty (none left; bare: or 8 lost races), every round',
            f"{empty['service']}",
            f"bare loop: {empty['bare']}",
            "",
            "",
        ))
        rows.append((
            "    claims not held by their claimer alone, every round",
            f"{not_exclusive['service']} of {checked['service']:,}",
            f"bare loop: {not_exclusive['bare']} of {checked['bare']:,}",
            "",
            "0",
        ))
    if "c" in PARTS:
        rows.append((
            f"(c) GET /queue/ a page {depth:,} rows deep (its cursor), {ROWS:,} verifications, counts recounted",
            f"p50 {_ms(_percentile(deep['deep'], 0.5))}, p95 {_ms(_percentile(deep['deep'], 0.95))}",
            f"page 1, same run: p50 {_ms(_percentile(deep['page 1'], 0.5))}, "
            f"p95 {_ms(_percentile(deep['page 1'], 0.95))}",
            f"{_percentile(deep['deep'], 0.5) / _percentile(deep['page 1'], 0.5):.2f} "
            f"(p95: {_percentile(deep['deep'], 0.95) / _percentile(deep['page 1'], 0.95):.2f})",
            "<= 1.1",
        ))
    if "d" in PARTS:
        from bench._reviewer_http import LABEL_STUDIO_GOAL, LABEL_STUDIO_P50_MS, against_label_studio

        trivial = http.samples["trivial"]
        http_labels = {
            "queue": "(d) HTTP (gunicorn): queue page, GET /queue/",
            "claim": '    "Next item": POST /queue/claim-next + the review page it opens',
            "decide": "    decision: POST …/decide (FAIL) + the next item's page it redirects to",
            "decide-post": "    the decision's POST alone (records it, claims the next item, answers the redirect)",
        }
        goal_of = {**LABEL_STUDIO_P50_MS, "decide-post": LABEL_STUDIO_P50_MS["decide"]}
        for action, label in http_labels.items():
            got = http.samples[action]
            rows.append((
                f"{label}, {ROWS:,} verifications",
                f"p50 {_ms(_percentile(got, 0.5))}, p95 {_ms(_percentile(got, 0.95))}",
                f"trivial view, same middleware: p50 {_ms(_percentile(trivial, 0.5))}, "
                f"p95 {_ms(_percentile(trivial, 0.95))}",
                f"{_percentile(got, 0.5) / _percentile(trivial, 0.5):.1f} "
                f"(p95: {_percentile(got, 0.95) / _percentile(trivial, 0.95):.1f})",
                f"p50 <= {goal_of[action] * LABEL_STUDIO_GOAL:.0f} ms (Label Studio / 3)",
            ))
    if "a" in PARTS:
        census = ", ".join(f"{code} {n:,}" for code, n in large_counts)
    if "a" in PARTS:
        notes.append(
            f"(a) {ROWS:,} verifications, {large_queue:,} in the queue when counted ({census}); "
            f"{SMALL_ROWS:,} verifications, {small_queue} in the queue. Each page shows 50 rows. "
            f"{PAGE_REQUESTS} requests per size and configuration, the two sizes in turn, after {PAGE_WARM_UP} to warm "
            "up; "
            f"statements per page: {queries['large'].queries} with {ROWS:,}, {queries['small'].queries} with "
            f"{SMALL_ROWS:,}; their time in the database with the counts recounted: "
            f"{queries['large'].sql_ms:.1f} ms, of "
            f"which counting {queries['large'].counts_ms:.1f} ms, with {ROWS:,}; {queries['small'].sql_ms:.1f} ms, of "
            f"which counting {queries['small'].counts_ms:.1f} ms, with {SMALL_ROWS:,}."
        )
    if "b" in PARTS:
        notes.append(
            f"(b) each side and mode: {CLAIM_ROUNDS} alternating rounds of {CLAIMS_EACH} claims per reviewer timed, "
            "after a warm-up round of 20 each (checked, not timed); the leases are put back after every round. "
            "The service also checks the permission and writes a security-log entry per claim; on PostgreSQL an "
            "attempt is one statement (pick, lease and entry in one data-modifying WITH, atomic without a "
            "transaction block) against the bare loop's BEGIN, pick, upsert, COMMIT. Python CPU per claim "
            "(4 threads / 4 processes / "
            "1 reviewer): service "
            + " / ".join(f"{claims[mode, 'service'].cpu_ms_per_claim:.1f}" for mode, _, _ in CLAIM_MODES)
            + " ms, bare "
            + " / ".join(f"{claims[mode, 'bare'].cpu_ms_per_claim:.1f}" for mode, _, _ in CLAIM_MODES)
            + f" ms; this machine has {os.cpu_count()} CPUs."
        )
        if profiled:
            notes.append(profiled)
    if "c" in PARTS:
        notes.append(
            f"(c) {PAGE_REQUESTS} requests each, page 1 and the deep page in turn, counts recounted on every request "
            "(REVIEWPORTAL_QUEUE_COUNTS_SECONDS=0: from the rollup); the deep page's cursor is the queue row "
            f"{depth:,} rows from the front."
        )
    if "d" in PARTS:
        notes.append(
            f"(d) one reviewer, {http.rounds} rounds after 5 to warm up, gunicorn with {http.workers} sync worker "
            "(a new connection per request), DEBUG off, counts recounted on every request; a claim is timed every "
            "other round (the other rounds decide the item the previous decision's redirect claimed); "
            f"{http.refused} decisions "
            f"refused; samples: queue {len(http.samples['queue'])}, claim {len(http.samples['claim'])}, decide "
            f"{len(http.samples['decide'])}, trivial {len(trivial)}; the decision's POST alone is what Label Studio's "
            "annotation POST compares with (it records the annotation; its UI asks /next apart), the target stays on "
            "the POST with its page; load average at the end "
            f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}."
        )
        notes.append(against_label_studio({a: 1000 * _percentile(http.samples[a], 0.5) for a in LABEL_STUDIO_P50_MS}))
    if KEEP:
        notes.append(
            f"kept: the databases {large} ({ROWS:,}) and {small} ({SMALL_ROWS:,}) (BENCH_QUEUE_KEEP), and their "
            f"var directory {os.environ['REVIEWPORTAL_VAR_DIR']} (its signing key)."
        )
    notes.append(
        f"data: {', '.join(f'{name} {n:,}' for name, n in mix.items())}; {built}; {small_built} (set-based, each "
        "copy's receipts re-signed; sample copies equal _rows_for's column for column and their chains verify); the "
        "rollup's queue counts equal a recount of the queue: "
        f"{'yes' if large_agree else 'NO'} with {ROWS:,}, {'yes' if small_agree else 'NO'} with {SMALL_ROWS:,}; "
        f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs."
    )
    return _table(rows) + "\n" + "\n".join(notes)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO_ROOT))
    print(main())

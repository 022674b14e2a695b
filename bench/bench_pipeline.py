"""Pipeline benchmark (issue 15; run by ``make bench``): the direct pipeline against a bare one written by hand.

Direct: ``verification_submit`` then ``verification_run`` called in this process (a digest rubric, one inline
evidence item; the run is called directly, so the submission's Celery publish is switched off), round-robin over
16 tasks as agents submit. Bare: the same durable work with psycopg and nothing else, one transaction per
verification — canonicalize the submission (RFC 8785), hash it, insert the verification row, its evidence row and
binding, the receipt (canonicalize + sign with Ed25519), the event row, commit — into tables of the same shape
(``LIKE ... INCLUDING ALL``: columns, defaults, indexes; no foreign keys, no triggers).

Both sides run in alternating rounds in one run, so the machine's other load hits both alike; the rows each side
wrote are printed so the comparison is checkably like for like, and each side's time is split into this process's
CPU and the rest (waiting for the server and its disk), so a run shows which side of the wire a gap is on. The last
line is ``pipeline: ratio R (direct X/s, bare Y/s, queries per run Q)`` (Q: the statements of one
``verification_run``, its transaction's BEGIN and COMMIT left out, as the query-count test counts them). PostgreSQL
only (DATABASE_URL=postgres://...), in a scratch database ``bench_<name>`` that it creates, migrates and drops. A
benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bench_receipts import _postgres_skip_reason, _setup_django  # one way to reach the scratch database

COUNT = int(os.environ.get("BENCH_PIPELINE_COUNT", "400"))
ROUNDS = 8
TASKS = 16
NOTES = b"release-notes v1.2\n- fix: retry on timeout\n"
BARE_TABLES = {
    "verification": "verification_verification",
    "evidence": "verification_evidence",
    "binding": "verification_verificationevidence",
    "receipt": "verification_receipt",
    "event": "verification_event",
}


# --- the direct side --------------------------------------------------------------------------------------------------


class Direct:
    """The portal's services, called in this process."""

    def __init__(self) -> None:
        from verification.actors.services.actors import actor_create, token_issue
        from verification.kernel.digests import sha256_digest
        from verification.runs.services import submit
        from verification.runs.services.rubrics import rubric_register
        from verification.runs.services.tasks import claim_record, contract_accept, task_create

        submit._enqueue = lambda verification_id: None  # the run is called directly below
        owner = actor_create(name="bench-owner", kind="contract_owner")
        self.agent = actor_create(name="bench-agent", kind="agent")
        self.token, _ = token_issue(actor=self.agent, boundary="bench-worker", scopes=["verifications:write"])
        literal = sha256_digest(NOTES)
        document = {
            "name": "bench pipeline",
            "criteria": [{"id": "notes-digest", "kind": "digest", "observable": "evidence.content-digest",
                          "expression": f'(= notes "{literal}")'}],
        }
        rubric = rubric_register(actor=owner, document=document)
        self.tasks = []
        for n in range(TASKS):
            task = task_create(actor=owner, title=f"bench {n}")
            contract_accept(actor=owner, task=task, rubric_hash=rubric.rubric_hash)
            claim_record(actor=self.agent, token=self.token, task=task)
            self.tasks.append(task)
        self.body = {"evidence": [{"symbol": "notes", "content_base64": base64.b64encode(NOTES).decode("ascii")}]}
        self.done = 0

    def one(self) -> str:
        from verification.runs.services.run import verification_run
        from verification.runs.services.submit import verification_submit

        task = self.tasks[self.done % TASKS]
        self.done += 1
        verification, _ = verification_submit(
            actor=self.agent, token=self.token, task=task, body=self.body, idempotency_key=None
        )
        receipt = verification_run(verification_id=verification.pk)
        assert receipt is not None and receipt.verdict == "PASS", receipt
        return str(verification.pk)

    def batch(self, count: int) -> float:
        started = time.perf_counter()
        for _ in range(count):
            self.one()
        return time.perf_counter() - started

    def queries_per_run(self) -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from verification.runs.services.run import verification_run
        from verification.runs.services.submit import verification_submit

        task = self.tasks[self.done % TASKS]
        self.done += 1
        verification, _ = verification_submit(
            actor=self.agent, token=self.token, task=task, body=self.body, idempotency_key=None
        )
        with CaptureQueriesContext(connection) as captured:
            verification_run(verification_id=verification.pk)
        # Every statement of the run, counted as tests/verification/test_query_counts.py counts it: the transaction's
        # open and close (BEGIN/COMMIT, which Django logs too) left out.
        control = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT ", "RELEASE SAVEPOINT ")
        return sum(1 for q in captured.captured_queries if not q["sql"].startswith(control))


# --- the bare side ----------------------------------------------------------------------------------------------------


class Bare:
    """psycopg, rfc8785, hashlib and Ed25519, nothing else: the same rows, one transaction per verification."""

    def __init__(self, dsn: dict[str, Any], seed: bytes, agent_id: int, task_ids: list[uuid.UUID]) -> None:
        import psycopg
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        self.signer = Ed25519PrivateKey.from_private_bytes(seed)
        self.key_id = "ed25519-" + hashlib.sha256(self.signer.public_key().public_bytes_raw()).hexdigest()[:16]
        # Autocommit, so that each ``transaction()`` below is a transaction of its own with its COMMIT. Without it, the
        # first statement of the connection (the column check) opened a transaction that was never committed, and
        # every verification's ``transaction()`` was a SAVEPOINT inside it: until 2026-12-07 the bare side committed
        # nothing per verification (no flush to disk), and its rows were rolled back when it closed.
        self.conn = psycopg.connect(**dsn, autocommit=True)
        for short, table in BARE_TABLES.items():
            self.conn.execute(f"CREATE TABLE bare_{short} (LIKE {table} INCLUDING ALL)")
        self.agent_id, self.task_ids, self.done = agent_id, task_ids, 0
        self.expected = "sha256:" + hashlib.sha256(NOTES).hexdigest()

    def one(self) -> None:
        import rfc8785

        task_id = self.task_ids[self.done % TASKS]
        self.done += 1
        now = datetime.now(UTC)
        digest = "sha256:" + hashlib.sha256(NOTES).hexdigest()
        stored_body = {"evidence": [{"symbol": "notes", "content_base64": digest}]}
        submission_hash = hashlib.sha256(rfc8785.dumps(stored_body)).hexdigest()
        rubric_hash = "3" * 64
        verification_id, evidence_id = uuid.uuid4(), uuid.uuid4()
        evidence_key = hashlib.sha256(rfc8785.dumps([digest])).hexdigest()
        verdict = "PASS" if digest == self.expected else "FAIL"
        payload = {
            "kind": "run", "verdict": verdict, "determination": "met", "authority": "deterministic",
            "actor": {"id": "portal", "kind": "service"}, "flagged": False, "score": 1,
            "checks": [{"criterion": "notes-digest", "authority": "deterministic", "verdict": verdict,
                        "reason": "digest-match", "evidence_ids": [str(evidence_id)]}],
            "evidence": [{"id": str(evidence_id), "symbol": "notes", "sha256": digest, "trust_tier": "claimant"}],
            "integrity_proof": [{"evidence_id": str(evidence_id), "recorded": digest, "recomputed": digest}],
            "subject": {"task": str(task_id), "cycle": 1}, "contract": rubric_hash,
        }
        envelope = rfc8785.dumps({
            "format": "acretix-verify/proof/2", "algo": "ed25519", "key_id": self.key_id,
            "verification_id": str(verification_id), "seq": 0, "rubric_hash": rubric_hash,
            "submission_hash": submission_hash, "prev_hash": None, "payload": payload,
            "created_at": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        })
        content_hash = hashlib.sha256(envelope).hexdigest()
        signature = base64.b64encode(self.signer.sign(b"acretix-verify/proof-sig/2:" + content_hash.encode())).decode()
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO bare_verification (id, rubric_hash, submission_hash, created_at, task_id, cycle, "
                "submitted_by_id, submitted_boundary, body, submitted_at, awaiting_evidence, attempts, last_error, "
                "flagged, evidence_key, verdict, automated_verdict, determination, human_decided) "
                "VALUES (%s, %s, %s, %s, %s, 1, %s, 'bench-worker', %s, %s, false, 1, '', false, %s, %s, %s, 'met', "
                "false)",
                (verification_id, rubric_hash, submission_hash, now, task_id, self.agent_id, json.dumps(stored_body),
                 now, evidence_key, verdict, verdict),
            )
            self.conn.execute(
                "INSERT INTO bare_evidence (id, digest, size, media_type, evidence_type, admission_source, mutability, "
                "custody, admitted_by_id, admitted_boundary, source_key_id, source_signature, source_verified, "
                "trust_tier, task_id, admitted_at, redaction_reason) VALUES (%s, %s, %s, 'text/plain', 'artifact', "
                "'producer', 'immutable', 'boundary:bench-worker', %s, 'bench-worker', '', '', false, 'claimant', %s, "
                "%s, '')",
                (evidence_id, digest, len(NOTES), self.agent_id, task_id, now),
            )
            self.conn.execute(
                "INSERT INTO bare_binding (verification_id, symbol, evidence_id, as_manifest) "
                "VALUES (%s, 'notes', %s, false)",
                (verification_id, evidence_id),
            )
            self.conn.execute(
                "INSERT INTO bare_receipt (content_hash, verification_id, seq, key_id, prev_hash, signature, "
                "envelope, created_at, kind, verdict, determination, authority, actor) "
                "VALUES (%s, %s, 0, %s, NULL, %s, %s, %s, 'run', %s, 'met', 'deterministic', 'portal')",
                (content_hash, verification_id, self.key_id, signature, envelope.decode(), now, verdict),
            )
            self.conn.execute(
                "INSERT INTO bare_event (kind, verification_id, payload, created_at) "
                "VALUES ('verification.finished', %s, %s, %s)",
                (verification_id, json.dumps({"verification_id": str(verification_id), "receipt_id": content_hash,
                                              "verdict": verdict}), now),
            )

    def batch(self, count: int) -> float:
        started = time.perf_counter()
        for _ in range(count):
            self.one()
        return time.perf_counter() - started

    def rows(self) -> dict[str, int]:
        """The rows each bare table holds, as another session sees them: committed ones only."""
        from django.db import connection

        with connection.cursor() as cursor:
            counted = {}
            for short in BARE_TABLES:
                cursor.execute(f"SELECT count(*) FROM bare_{short}")  # noqa: S608 - our own table names
                counted[short] = int(cursor.fetchone()[0])
        return counted

    def close(self) -> None:
        self.conn.close()


def _direct_rows() -> dict[str, int]:
    from verification.evidence.models import Evidence, VerificationEvidence
    from verification.runs.models import Event, Verification
    from verification.trust.models import Receipt

    models = {"verification": Verification, "evidence": Evidence, "binding": VerificationEvidence,
              "receipt": Receipt, "event": Event}
    return {short: model.objects.count() for short, model in models.items()}


#: The columns each bare INSERT fills (checked against the real tables' required columns before the run).
FILLED = {
    "verification": {"id", "rubric_hash", "submission_hash", "created_at", "task_id", "cycle", "submitted_by_id",
                     "submitted_boundary", "body", "submitted_at", "awaiting_evidence", "attempts", "last_error",
                     "flagged", "evidence_key", "verdict", "automated_verdict", "determination", "human_decided"},
    "evidence": {"id", "digest", "size", "media_type", "evidence_type", "admission_source", "mutability", "custody",
                 "admitted_by_id", "admitted_boundary", "source_key_id", "source_signature", "source_verified",
                 "trust_tier", "task_id", "admitted_at", "redaction_reason"},
    "binding": {"verification_id", "symbol", "evidence_id", "as_manifest"},
    "receipt": {"content_hash", "verification_id", "seq", "key_id", "prev_hash", "signature", "envelope",
                "created_at", "kind", "verdict", "determination", "authority", "actor"},
    "event": {"kind", "verification_id", "payload", "created_at"},
}


def _bare_columns_fit(conn: Any) -> str | None:
    """The bare INSERTs name columns of the real tables; say which required one they miss if the schema moved on."""
    missing = []
    for short, table in BARE_TABLES.items():
        cur = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s AND is_nullable = 'NO' "
            "AND column_default IS NULL AND is_identity = 'NO'", (f"bare_{short}",)
        )
        missing.extend(f"{table}.{row[0]}" for row in cur.fetchall() if row[0] not in FILLED[short])
    return ", ".join(missing) if missing else None


def main() -> str | None:
    skipped = _postgres_skip_reason(os.environ.get("DATABASE_URL", ""))
    if skipped is not None:
        return f"bench_pipeline: skipped: {skipped}"
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        _setup_django(Path(tmp) / "var")
        from django.db import connection

        from verification.trust import signing
        from verification.trust.services.keys import signing_key_create

        base_name = connection.settings_dict["NAME"]
        connection.settings_dict.setdefault("TEST", {})["NAME"] = f"bench_{base_name}"
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
        bare = None
        try:
            signing_key_create()
            _, private_key = signing.active_signer()
            s = connection.settings_dict
            dsn = {"host": s.get("HOST") or None, "port": s.get("PORT") or None, "user": s.get("USER") or None,
                   "password": s.get("PASSWORD") or None, "dbname": s["NAME"]}
            dsn = {k: v for k, v in dsn.items() if v is not None}
            direct = Direct()
            bare = Bare(dsn, private_key.seed, direct.agent.pk, [t.pk for t in direct.tasks])
            missing = _bare_columns_fit(bare.conn)
            if missing:
                bare.close()
                raise RuntimeError(f"the bare INSERTs do not fill these required columns any more: {missing}")
            before = _direct_rows()
            direct.batch(20)  # warm up both: caches, prepared statements, the connection
            bare.batch(20)
            per_round = max(1, COUNT // ROUNDS)
            direct_s = bare_s = direct_cpu = bare_cpu = 0.0
            for _ in range(ROUNDS):
                cpu = time.process_time()
                direct_s += direct.batch(per_round)
                direct_cpu += time.process_time() - cpu
                cpu = time.process_time()
                bare_s += bare.batch(per_round)
                bare_cpu += time.process_time() - cpu
            queries = direct.queries_per_run()
            after = _direct_rows()
            direct_rows = {k: after[k] - before[k] for k in after}
            bare_rows = bare.rows()
        finally:
            if bare is not None:
                bare.close()
            connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)
    n = per_round * ROUNDS
    direct_rate, bare_rate = n / direct_s, n / bare_s
    ratio = direct_rate / bare_rate
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        f"{n} verifications each side (+20 warm-up each, +1 direct one counted for queries), {ROUNDS} alternating "
        f"rounds, {TASKS} tasks round-robin; load average {load}; {os.cpu_count()} CPUs",
        f"rows written  direct: {json.dumps(direct_rows, sort_keys=True)}",
        f"rows written  bare:   {json.dumps(bare_rows, sort_keys=True)} (counted from another session: committed)",
        f"direct: {direct_rate:,.1f}/s ({1000 * direct_s / n:.2f} ms per submit + run); "
        f"bare: {bare_rate:,.1f}/s ({1000 * bare_s / n:.2f} ms per verification)",
        # Where each side's time goes: this process's CPU (Python, psycopg, the crypto), the rest waiting for the
        # server (its statements, triggers and constraint checks, the commit's flush to disk) and the machine.
        f"this process's CPU per verification: direct {1000 * direct_cpu / n:.2f} ms, "
        f"bare {1000 * bare_cpu / n:.2f} ms; "
        f"the rest waiting for the server: direct {1000 * (direct_s - direct_cpu) / n:.2f} ms, "
        f"bare {1000 * (bare_s - bare_cpu) / n:.2f} ms",
        f"pipeline: ratio {ratio:.2f} (direct {direct_rate:,.1f}/s, bare {bare_rate:,.1f}/s, "
        f"queries per run {queries})",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    print(main())

"""Receipts benchmark (issue "Signed receipts, keys, and strict proof verification", acceptance; run by ``make bench``).

(a) receipts issued per second through ``receipt_issue`` (one verification each) as a ratio to a bare pipeline in
    the same run: rfc8785 + sha256 + Ed25519 sign + one INSERT per transaction with psycopg directly. Target >= 0.5.
(b) time to verify a stored 10,000-entry chain (fetch: ``proof_text`` rendered by the proof endpoint's renderer,
    the bytes ``GET .../proof`` serves; + ``verify_proof_bytes``, the function ``manage.py verify_proof`` uses) as a
    ratio to bare Ed25519 verification of the same 10,000 signatures.
    Target <= 1.3 (issue 15; it was 2.0). Both sides are timed in alternating rounds (``BENCH_RECEIPTS_ROUNDS``,
    default 5), best of each; every round's own ratio is printed as well. The verifier checks a long chain's
    signatures on two threads where two CPUs are there, the bare side on one: the CPU time of both sides (every
    thread's) is printed too, the verifier's cost beside its wall time.

PostgreSQL only (DATABASE_URL=postgres://...). It works in a scratch database ``bench_<name>`` that it creates,
migrates and drops, so no benchmark receipt (append-only forever) ever lands in your database. Prints figures; a
benchmark, not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ISSUE_COUNT = int(os.environ.get("BENCH_RECEIPTS_ISSUE", "1000"))
CHAIN_LENGTH = int(os.environ.get("BENCH_RECEIPTS_CHAIN", "10000"))
VERIFY_ROUNDS = int(os.environ.get("BENCH_RECEIPTS_ROUNDS", "5"))
RUBRIC_HASH = "1" * 64
SUBMISSION_HASH = "2" * 64
PAYLOAD = {
    "verdict": "PASS",
    "determination": "met",
    "authority": "deterministic",
    "actor": "portal",
    "flagged": False,
    "score": 1,
    "checks": [{"criterion": "c1", "authority": "deterministic", "verdict": "PASS", "reason": "digest-match"}],
    "integrity_proof": [{"evidence_id": "e1", "recorded": "sha256:" + "a" * 64, "recomputed": "sha256:" + "a" * 64}],
}


def _setup_django(var: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewportal.settings_test")
    os.environ["REVIEWPORTAL_VAR_DIR"] = str(var)
    for name in ("REVIEWPORTAL_SIGNING_KEY", "REVIEWPORTAL_SIGNING_KEY_FILE", "REVIEWPORTAL_CHECKPOINT_LOG"):
        os.environ.pop(name, None)
    import django

    django.setup()


class _BarePipeline:
    """The bare pipeline: canonical JSON, sha256, sign, one INSERT per transaction, psycopg directly.

    ``shape="minimal"`` inserts into a table with only the wire columns, a primary key and unique (verification, seq);
    ``shape="receipt"`` into a copy of the receipts table (``LIKE verification_receipt INCLUDING ALL``: the same
    columns and indexes, the indexed payload copies filled; no triggers, no foreign keys), i.e. the same row.
    """

    def __init__(self, dsn: dict[str, Any], seed: bytes, shape: str = "minimal") -> None:
        import psycopg
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        self.signer = Ed25519PrivateKey.from_private_bytes(seed)
        self.key_id = "ed25519-" + hashlib.sha256(self.signer.public_key().public_bytes_raw()).hexdigest()[:16]
        self.conn = psycopg.connect(**dsn)
        self.table = f"bench_bare_{shape}"
        if shape == "minimal":
            self.conn.execute(
                f"CREATE TABLE {self.table} (content_hash varchar(64) PRIMARY KEY, verification_id uuid NOT NULL, "
                "seq integer NOT NULL, key_id varchar(32) NOT NULL, prev_hash varchar(64), signature text NOT NULL, "
                "envelope text NOT NULL, created_at timestamptz NOT NULL, kind varchar(16) NOT NULL, "
                "verdict varchar(16), determination varchar(32), authority varchar(32), actor varchar(200), "
                "supersedes_receipt_id varchar(64), UNIQUE (verification_id, seq))"
            )
        else:
            self.conn.execute(f"CREATE TABLE {self.table} (LIKE verification_receipt INCLUDING ALL)")
        self.conn.commit()

    def issue(self, count: int) -> float:
        """Issue ``count`` receipts (one new verification id each); seconds taken."""
        import rfc8785

        started = time.perf_counter()
        for _ in range(count):
            verification_id = uuid.uuid4()
            now = datetime.now(UTC)
            body: dict[str, Any] = {
                "format": "acretix-verify/proof/2",
                "algo": "ed25519",
                "key_id": self.key_id,
                "verification_id": str(verification_id),
                "seq": 0,
                "rubric_hash": RUBRIC_HASH,
                "submission_hash": SUBMISSION_HASH,
                "prev_hash": None,
                "payload": {**PAYLOAD, "kind": "run"},
                "created_at": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }
            envelope = rfc8785.dumps(body)
            content_hash = hashlib.sha256(envelope).hexdigest()
            signed = self.signer.sign(b"acretix-verify/proof-sig/2:" + content_hash.encode())
            with self.conn.transaction():
                self.conn.execute(
                    f"INSERT INTO {self.table} (content_hash, verification_id, seq, key_id, prev_hash, signature, "  # noqa: S608
                    "envelope, created_at, kind, verdict, determination, authority, actor, supersedes_receipt_id) "
                    "VALUES (%s, %s, 0, %s, NULL, %s, %s, %s, 'run', %s, %s, %s, %s, NULL)",
                    (
                        content_hash,
                        verification_id,
                        self.key_id,
                        base64.b64encode(signed).decode(),
                        envelope.decode(),
                        now,
                        PAYLOAD["verdict"],
                        PAYLOAD["determination"],
                        PAYLOAD["authority"],
                        PAYLOAD["actor"],
                    ),
                )
        return time.perf_counter() - started

    def close(self) -> None:
        self.conn.close()


def _service_issue(count: int) -> float:
    """receipt_issue, one verification each (the verifications are made beforehand); seconds taken."""
    from verification.runs.models import Verification
    from verification.trust.services.receipts import receipt_issue

    verifications = Verification.objects.bulk_create(
        [Verification(rubric_hash=RUBRIC_HASH, submission_hash=SUBMISSION_HASH) for _ in range(count)]
    )
    started = time.perf_counter()
    for verification in verifications:
        receipt_issue(verification=verification, kind="run", payload=PAYLOAD)
    return time.perf_counter() - started


def _issue_rates(dsn: dict[str, Any], seed: bytes, total: int, rounds: int = 10) -> tuple[float, float, float]:
    """(service, bare minimal table, bare receipt-shaped table) in receipts/s, measured in alternating rounds so that
    the machine's other load and the database's commit latency hit all three alike."""
    minimal, shaped = _BarePipeline(dsn, seed, "minimal"), _BarePipeline(dsn, seed, "receipt")
    try:
        _service_issue(20)  # warm up: the private key cache, the connection
        minimal.issue(20)
        shaped.issue(20)
        per_round = max(1, total // rounds)
        service_s = minimal_s = shaped_s = 0.0
        for _ in range(rounds):
            service_s += _service_issue(per_round)
            minimal_s += minimal.issue(per_round)
            shaped_s += shaped.issue(per_round)
    finally:
        minimal.close()
        shaped.close()
    n = per_round * rounds
    return n / service_s, n / minimal_s, n / shaped_s


def _store_chain(length: int) -> Any:
    """A stored chain of ``length`` receipts, signed with the active key (bulk-inserted for speed)."""
    from verification.kernel.chain import sign_entry
    from verification.runs.models import Verification
    from verification.trust import signing
    from verification.trust.models import Receipt

    verification = Verification.objects.create(rubric_hash=RUBRIC_HASH, submission_hash=SUBMISSION_HASH)
    key_row, private_key = signing.active_signer()
    rows, prev = [], None
    now = datetime.now(UTC)
    for seq in range(length):
        entry = sign_entry(
            private_key=private_key,
            verification_id=str(verification.id),
            seq=seq,
            rubric_hash=RUBRIC_HASH,
            submission_hash=SUBMISSION_HASH,
            prev_hash=prev,
            payload={**PAYLOAD, "kind": "run", "n": seq},
            created_at=now,
        )
        rows.append(
            Receipt(
                content_hash=entry.content_hash,
                verification=verification,
                seq=seq,
                key=key_row,
                prev_hash=entry.prev_hash,
                signature=entry.signature,
                envelope=entry.envelope,
                created_at=now,
                kind="run",
                verdict="PASS",
            )
        )
        prev = entry.content_hash
    Receipt.objects.bulk_create(rows, batch_size=1000)
    return verification


def _verify_stored(verification: Any) -> tuple[float, float, Any, float]:
    """Fetch the chain and verify it as ``manage.py verify_proof`` does; (fetch seconds, verify seconds, report, CPU
    seconds of both in this process, every thread's: a long chain's signatures are verified on two threads).

    The fetch is what ``GET /v1/verifications/<id>/proof`` does: ``proof_text`` (the document written as JSON text),
    rendered by the endpoint's renderer (``ApiJSONRenderer``: the bytes DRF's ``JSONRenderer`` writes for
    ``proof_for``'s document), so the bytes verified are the bytes the endpoint serves."""
    from verification.api.renderers import ApiJSONRenderer, JSONText
    from verification.kernel.verifier import verify_proof_bytes
    from verification.trust.selectors import head_of, proof_text, trusted_keys

    cpu = time.process_time()
    started = time.perf_counter()
    text = proof_text(verification)
    assert text is not None
    data = ApiJSONRenderer().render(JSONText(text))
    keys = trusted_keys("proof-signing")
    head = head_of(verification)
    assert head is not None
    fetched = time.perf_counter()
    report = verify_proof_bytes(
        data,
        keys=keys,
        trusted_head=head.content_hash,
        expected_verification_id=str(verification.id),
        expected_submission_hash=SUBMISSION_HASH,
    )
    return fetched - started, time.perf_counter() - fetched, report, time.process_time() - cpu


def _bare_verify(verification: Any) -> tuple[float, float]:
    """Bare Ed25519 verification of the same signatures (keys and messages prepared beforehand), one after the other
    on one thread; (seconds taken, CPU seconds)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from verification.trust.models import Receipt, SigningKey

    rows = Receipt.objects.filter(verification=verification).values_list("content_hash", "signature", "key_id")
    keys = {k.key_id: Ed25519PublicKey.from_public_bytes(bytes(k.public_key)) for k in SigningKey.objects.all()}
    prepared = [
        (keys[key_id], base64.b64decode(signature), b"acretix-verify/proof-sig/2:" + content_hash.encode())
        for content_hash, signature, key_id in rows
    ]
    cpu = time.process_time()
    started = time.perf_counter()
    for key, signature, message in prepared:
        key.verify(signature, message)
    return time.perf_counter() - started, time.process_time() - cpu


def _postgres_skip_reason(url: str) -> str | None:
    """Why PostgreSQL at ``url`` cannot be used (not PostgreSQL, or no answer), or None."""
    if not url.split("://", 1)[0].lower().startswith(("postgres", "pgsql")):
        return "needs PostgreSQL (set DATABASE_URL=postgres://user@host:5432/name)"
    try:
        import psycopg

        psycopg.connect(url.replace("pgsql://", "postgres://", 1), dbname="postgres", connect_timeout=3).close()
    except Exception as exc:  # noqa: BLE001 - any failure means: no usable database server here
        return f"needs PostgreSQL: the server at DATABASE_URL does not answer ({type(exc).__name__})"
    return None


def _table(rows: list[tuple[str, str, str, str]]) -> str:
    head = ("measure", "value", "comparison (bare, same run)", "ratio")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in (head, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> str | None:
    skipped = _postgres_skip_reason(os.environ.get("DATABASE_URL", ""))
    if skipped is not None:
        return f"bench_receipts: skipped: {skipped}"
    with tempfile.TemporaryDirectory(prefix="bench-receipts-") as tmp:
        _setup_django(Path(tmp) / "var")
        from django.db import connection

        from verification.trust import signing
        from verification.trust.services.keys import signing_key_create

        base_name = connection.settings_dict["NAME"]
        connection.settings_dict.setdefault("TEST", {})["NAME"] = f"bench_{base_name}"
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
        try:
            signing_key_create()
            _, private_key = signing.active_signer()
            dsn = {
                "host": connection.settings_dict.get("HOST") or None,
                "port": connection.settings_dict.get("PORT") or None,
                "user": connection.settings_dict.get("USER") or None,
                "password": connection.settings_dict.get("PASSWORD") or None,
                "dbname": connection.settings_dict["NAME"],
            }
            dsn = {k: v for k, v in dsn.items() if v is not None}
            service_rate, minimal_rate, shaped_rate = _issue_rates(dsn, private_key.seed, ISSUE_COUNT)
            verification = _store_chain(CHAIN_LENGTH)
            # Best of VERIFY_ROUNDS for both sides, measured in alternating rounds (verify, bare, verify, ...) so that
            # the machine's other load, which is noise, not cost, falls on both alike; each round's own ratio too.
            runs, bares = [], []
            for _ in range(VERIFY_ROUNDS):
                runs.append(_verify_stored(verification))
                bares.append(_bare_verify(verification))
            fetch_s, verify_s, report, cpu_s = min(runs, key=lambda run: run[0] + run[1])
            bare_s, bare_cpu_s = min(bares)
            total = fetch_s + verify_s
            round_ratios = sorted((run[0] + run[1]) / bare[0] for run, bare in zip(runs, bares, strict=True))
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)
    rows = [
        (
            "(a) receipts/s through receipt_issue (target ratio >= 0.5)",
            f"{service_rate:,.0f}/s",
            f"rfc8785 + sha256 + sign + INSERT, receipts-shaped table: {shaped_rate:,.0f}/s",
            f"{service_rate / shaped_rate:.2f}",
        ),
        (
            "    the same, against a smaller table (no target)",
            "",
            f"the same into a minimal table (primary key, unique (verification, seq)): {minimal_rate:,.0f}/s",
            f"{service_rate / minimal_rate:.2f}",
        ),
        (
            f"(b) fetch + verify a stored {CHAIN_LENGTH:,}-entry chain (target ratio <= 1.3)",
            f"{total:.3f} s",
            f"bare Ed25519 verification of the same signatures: {bare_s:.3f} s",
            f"{total / bare_s:.2f}",
        ),
        (
            "    the same in CPU time, every thread's (the verifier's cost; no target)",
            f"{cpu_s:.3f} s",
            f"bare Ed25519, one thread: {bare_cpu_s:.3f} s",
            f"{cpu_s / bare_cpu_s:.2f}",
        ),
    ]
    notes = [
        f"(a) {ISSUE_COUNT} receipts each side, one verification and one transaction per receipt, in 10 alternating "
        "rounds; the receipts-shaped table has the receipts table's columns and indexes (no foreign keys, no triggers)",
        f"(b) fetch {fetch_s:.3f} s + verify_proof_bytes {verify_s:.3f} s (its signatures on two threads where "
        f"{os.cpu_count()} CPUs allow; the bare side on one), best of {VERIFY_ROUNDS} alternating rounds "
        f"for both sides; each round's ratio: min {round_ratios[0]:.2f}, median "
        f"{round_ratios[len(round_ratios) // 2]:.2f}, max {round_ratios[-1]:.2f}; load average "
        f"{' '.join(f'{load:.2f}' for load in os.getloadavg())}; the proof "
        f"verified: {'ok' if report.ok else report.reason}",
    ]
    return _table(rows) + "\n" + "\n".join(notes)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    print(main())

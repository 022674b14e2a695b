"""Audit benchmark (issue 7 acceptance; run by ``make bench``).

The continuous audit (``services.audit.audit_run``: every chain re-verified with the strict verifier, every key
checked against the pin log, the RFC 6962 tree over all receipts rebuilt and checked for consistency with the last
checkpoint, a signed tree head appended) over 100,000 stored receipts, as a ratio to bare Ed25519 verification of
the same 100,000 signatures in the same run (keys and messages prepared beforehand). Target <= 2.5.

Two figures: the first run (it also gives every receipt its position in the tree) and a steady-state run (the tree
positions exist; what the beat task does every hour), best of three.

PostgreSQL only (DATABASE_URL=postgres://...). It works in a scratch database ``bench_<name>`` that it creates,
migrates and drops, and a scratch var dir (the checkpoint log), so nothing lands in your database. Prints figures; a
benchmark, not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import base64
import os
import resource
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.bench_receipts import _setup_django  # one way to reach the scratch database

RECEIPTS = int(os.environ.get("BENCH_AUDIT_RECEIPTS", "100000"))
CHAIN_LENGTH = int(os.environ.get("BENCH_AUDIT_CHAIN", "5"))
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


def _store(total: int, length: int) -> int:
    """``total`` receipts in chains of ``length``, signed with the active key, bulk-inserted; how many chains."""
    from verification.kernel.chain import sign_entry
    from verification.runs.models import Verification
    from verification.trust import signing
    from verification.trust.models import Receipt

    key_row, private_key = signing.active_signer()
    chains = max(1, total // length)
    start = datetime.now(UTC) - timedelta(days=1)
    batch_v: list[Any] = []
    batch_r: list[Any] = []
    made = 0
    for c in range(chains):
        verification = Verification(id=uuid.uuid4(), rubric_hash=RUBRIC_HASH, submission_hash=SUBMISSION_HASH)
        batch_v.append(verification)
        prev = None
        for seq in range(length):
            when = start + timedelta(milliseconds=c * length + seq)
            entry = sign_entry(
                private_key=private_key,
                verification_id=str(verification.id),
                seq=seq,
                rubric_hash=RUBRIC_HASH,
                submission_hash=SUBMISSION_HASH,
                prev_hash=prev,
                payload={**PAYLOAD, "kind": "run", "n": seq},
                created_at=when,
            )
            batch_r.append(
                Receipt(
                    content_hash=entry.content_hash, verification=verification, seq=seq, key=key_row,
                    prev_hash=entry.prev_hash, signature=entry.signature, envelope=entry.envelope,
                    created_at=when, kind="run", verdict="PASS",
                )
            )
            prev = entry.content_hash
            made += 1
        if len(batch_r) >= 5000:
            Verification.objects.bulk_create(batch_v, batch_size=2000)
            Receipt.objects.bulk_create(batch_r, batch_size=2000)
            batch_v, batch_r = [], []
    if batch_r:
        Verification.objects.bulk_create(batch_v, batch_size=2000)
        Receipt.objects.bulk_create(batch_r, batch_size=2000)
    return chains


def _bare_verify() -> tuple[float, int]:
    """Bare Ed25519 verification of every stored receipt's signature (prepared beforehand); (seconds, count)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from verification.trust.models import Receipt, SigningKey

    keys = {k.key_id: Ed25519PublicKey.from_public_bytes(bytes(k.public_key)) for k in SigningKey.objects.all()}
    prepared = [
        (keys[key_id], base64.b64decode(signature), b"acretix-verify/proof-sig/2:" + content_hash.encode())
        for content_hash, signature, key_id in Receipt.objects.values_list("content_hash", "signature", "key_id")
    ]
    started = time.perf_counter()
    for key, signature, message in prepared:
        key.verify(signature, message)
    return time.perf_counter() - started, len(prepared)


def _audit() -> tuple[float, Any]:
    from verification.trust.services.audit import audit_run

    started = time.perf_counter()
    report = audit_run()
    return time.perf_counter() - started, report


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.split("://", 1)[0].lower().startswith(("postgres", "pgsql")):
        return "bench_audit: skipped: needs PostgreSQL (set DATABASE_URL=postgres://user@host:5432/name)"
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        _setup_django(Path(tmp) / "var")
        from django.db import connection

        from verification.trust.services.keys import signing_key_create

        base_name = connection.settings_dict["NAME"]
        connection.settings_dict.setdefault("TEST", {})["NAME"] = f"bench_{base_name}"
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
        try:
            signing_key_create()
            started = time.perf_counter()
            chains = _store(RECEIPTS, CHAIN_LENGTH)
            stored_s = time.perf_counter() - started
            with connection.cursor() as cursor:
                # As a database that has been running a while would be: statistics gathered, hint bits set.
                cursor.execute("VACUUM ANALYZE")
            rss_before = _maxrss_mib()
            first_s, first = _audit()
            rss_audit = _maxrss_mib()
            # Alternating rounds, so the machine's other load hits both sides alike; best of each, and the median of
            # the per-round ratios.
            rounds = []
            for _ in range(3):
                audit_s, report = _audit()
                bare_s, count = _bare_verify()
                rounds.append((audit_s, bare_s))
            steady_s = min(a for a, _ in rounds)
            bare_s = min(b for _, b in rounds)
            ratios = sorted(a / b for a, b in rounds)
            lines = [
                f"{count:,} receipts in {chains:,} chains of {CHAIN_LENGTH} (stored in {stored_s:.1f} s)",
                f"bare Ed25519 verification of their signatures: {bare_s:.3f} s ({count / bare_s:,.0f}/s), best of 3",
                f"audit, first run (also assigns every tree position): {first_s:.3f} s; ratio {first_s / bare_s:.2f}"
                f" ({'ok' if first.ok else 'PROBLEMS'}, {len(first.problems)} problem(s), tree {first.tree_size})",
                f"audit, steady state (what the beat task does): {steady_s:.3f} s, best of 3; ratio "
                f"{steady_s / bare_s:.2f} best to best, {ratios[1]:.2f} median of rounds (target <= 2.5) "
                f"({'ok' if report.ok else 'PROBLEMS'}, consistent={report.consistent})",
                f"peak resident memory: {rss_before:.0f} MiB before the audits, {rss_audit:.0f} MiB after the first "
                f"(the chains are streamed one at a time)",
            ]
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    print(main())

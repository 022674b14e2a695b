"""Fault injection, bounded (issue 16): ``scripts/chaos.py`` with 100 submissions per fault.

The script starts its own PostgreSQL and Redis on other ports (never the shared ones this suite uses), gunicorn with
2 workers, 2 Celery workers and beat; restarts PostgreSQL, restarts Redis (no persistence) and SIGKILLs a worker's
main process during the load. Every acknowledged verification must have exactly one seq-0 receipt; none stuck, none
duplicated, no 500. Each fault must strike mid-load: when it began some submissions were acknowledged and others
not yet, client threads were still sending, and they sent requests while it lasted. ``make chaos`` runs the same
with 1,000 per fault.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.broker, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
PER_FAULT = 100


def test_nothing_acknowledged_is_lost_under_database_broker_and_worker_faults() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/chaos.py", "--per-fault", str(PER_FAULT), "--json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500, check=False, stdin=subprocess.DEVNULL,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("CHAOS ")), None)
    assert line is not None, proc.stdout[-4000:] + proc.stderr[-4000:]
    rows = {row["fault"]: row for row in json.loads(line[len("CHAOS "):])}
    assert set(rows) == {"none", "postgres", "redis", "worker"}
    for fault, row in rows.items():
        assert row["acknowledged"] == PER_FAULT, (fault, row)
        assert row["exactly_once"] == row["acknowledged"], (fault, row)
        assert row["stuck"] == 0 and row["failed"] == 0 and row["duplicates"] == 0, (fault, row)
        assert row["http_500"] == 0 and row["http_503_without_retry_after"] == 0, (fault, row)
        if fault != "none":  # the fault struck while work was in flight, not before the load or after it
            assert 0 < row["acknowledged_at_fault"] < PER_FAULT, (fault, row)
            assert row["clients_sending_at_fault"] > 0, (fault, row)
            assert row["requests_during_fault"] > 0, (fault, row)
    assert proc.returncode == 0, proc.stdout[-4000:]

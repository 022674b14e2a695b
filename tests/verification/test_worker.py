"""Scale beyond one machine (issue 4 §4): real Celery workers on PostgreSQL + Redis.

Three ``celery -A reviewportal worker --pool=prefork --concurrency=1`` processes, started here against the test
database and the broker, take 1,000 verifications submitted through the service: every one gets exactly one seq-0
receipt, none missing, none duplicated. Then one task is made slow (the workers are started by
``tests/verification/slow_worker.py``, which wraps the run path's ``receipt_issue_held``: a seam of the tests,
nothing in the app) and its pool child is killed with SIGKILL in the middle of the run, inside the transaction that
would sign: the broker redelivers it (``acks_late``, ``reject_on_worker_lost``) and the chain still has exactly one
seq 0. The workers are killed at the end whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection
from django.db.models import Count

from tests.conftest import DATABASE_VARIABLES
from tests.verification.service_world import NOTES, World, digest_entry
from tests.verification.slow_worker import SLOW_DIR_ENV, SLOW_SECONDS_ENV
from verification.evidence.services import evidence_admit
from verification.runs.models import Verification
from verification.runs.services.submit import verification_submit
from verification.trust.models import Receipt

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
VERIFICATIONS = 1000
BATCH_DEADLINE_SECONDS = 240
SLOW_RUN_SECONDS = 5
WORKER_START_SECONDS = 60
# What the workers must not inherit from this process.
_SCRUBBED = (
    *DATABASE_VARIABLES,
    "REVIEWPORTAL_VAR_DIR",
    "REVIEWPORTAL_SIGNING_KEY",
    "REVIEWPORTAL_SIGNING_KEY_FILE",
    "DJANGO_SETTINGS_MODULE",
    SLOW_DIR_ENV,
    SLOW_SECONDS_ENV,
)


def test_database_url() -> str:
    """The URL of the database this test runs in (pytest-django's ``test_<name>``), for the worker processes."""
    s = connection.settings_dict
    user = quote(str(s.get("USER") or ""), safe="")
    password = quote(str(s.get("PASSWORD") or ""), safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host, port = s.get("HOST") or "127.0.0.1", s.get("PORT") or "5432"
    return f"postgres://{auth}{host}:{port}/{quote(str(s['NAME']), safe='')}"


test_database_url.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


class Workers:
    """Worker processes started by this test; each in its own session so its pool children die with it."""

    def __init__(self, var: Path, logs: Path, slow_dir: Path) -> None:
        self.var, self.logs, self.slow_dir = var, logs, slow_dir
        self.processes: list[subprocess.Popen[bytes]] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "reviewportal.settings_test",
                "DATABASE_URL": test_database_url(),
                "CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"],
                "REVIEWPORTAL_VAR_DIR": str(self.var),
                SLOW_DIR_ENV: str(self.slow_dir),
                SLOW_SECONDS_ENV: str(SLOW_RUN_SECONDS),
                "PYTHONUNBUFFERED": "1",
                # A run that meets a transient database error (a deadlock among workers starting at once) is retried;
                # production waits minutes (docs/deployment.md), this test's deadlines allow seconds.
                "REVIEWPORTAL_RUN_RETRY_BASE_SECONDS": "1",
            }
        )
        return env

    def start(self, count: int) -> None:
        for n in range(count):
            log = (self.logs / f"worker{n}.log").open("wb")
            self.processes.append(
                subprocess.Popen(
                    [
                        sys.executable, "-m", "tests.verification.slow_worker", "worker",
                        "--pool=prefork", "--concurrency=1", "--loglevel=WARNING",
                        "--without-gossip", "--without-mingle", "--without-heartbeat",
                        "-n", f"h9-test-{n}@%h",
                    ],
                    cwd=REPO_ROOT,
                    env=self.env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            log.close()

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.processes)

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for path in sorted(self.logs.glob("worker*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # the worker and its pool child (its own session)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL is not ignorable; never hang here
                process.wait(timeout=30)


@pytest.fixture
def workers(var_dir: Path, tmp_path: Path) -> Iterator[Workers]:
    from reviewportal.celery import app

    app.control.purge()  # nothing left over from earlier runs may reach these workers
    slow_dir = tmp_path / "slow"
    slow_dir.mkdir()
    started = Workers(var_dir, tmp_path, slow_dir)
    try:
        yield started
    finally:
        started.stop()


def wait_for(condition: Callable[[], bool], *, seconds: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


@pytest.mark.django_db(transaction=True)
def test_three_workers_take_a_thousand_verifications_once_each_and_survive_a_killed_pool_child(
    signing_key: Any, workers: Workers, capsys: Any
) -> None:
    world = World.build()
    world.contract(digest_entry())
    notes = evidence_admit(actor=world.collector.actor, token=world.collector.token, content=NOTES, task=world.task)
    body = {"evidence": [{"symbol": "notes", "evidence_id": str(notes.pk)}]}
    workers.start(WORKERS)

    # --- 1,000 verifications through the service; each commit enqueues its run ------------------------------------
    started = time.monotonic()
    ids = [
        verification_submit(
            actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=f"batch-{i}"
        )[0].pk
        for i in range(VERIFICATIONS)
    ]
    submitted = time.monotonic()

    def seq0_count() -> int:
        return Receipt.objects.filter(verification_id__in=ids, seq=0).count()

    done = wait_for(lambda: seq0_count() == VERIFICATIONS or not workers.alive(), seconds=BATCH_DEADLINE_SECONDS)
    finished = time.monotonic()
    assert done and workers.alive(), f"{seq0_count()}/{VERIFICATIONS} receipts\n{workers.log_tail()}"
    per_verification = (
        Verification.objects.filter(pk__in=ids).annotate(n=Count("receipts")).values_list("n", flat=True)
    )
    assert sorted(set(per_verification)) == [1], "exactly one receipt each: no duplicate, none missing"
    assert Receipt.objects.filter(verification_id__in=ids).exclude(seq=0).count() == 0
    assert Verification.objects.filter(pk__in=ids, failed_at__isnull=False).count() == 0
    assert Verification.objects.filter(pk__in=ids, determination="met").count() == VERIFICATIONS
    with capsys.disabled():
        print(
            f"\n[test_worker] {VERIFICATIONS} verifications: submitted in {submitted - started:.1f} s, all receipts "
            f"{finished - started:.1f} s after the first submit ({VERIFICATIONS / (finished - started):.0f}/s) "
            f"with {WORKERS} workers"
        )

    # --- a pool child killed with SIGKILL in the middle of a run: redelivered, one seq 0 -----------------------------
    slow, _ = verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key="slow-1"
    )
    marker = f"{slow.pk}."
    assert wait_for(lambda: any(p.name.startswith(marker) for p in workers.slow_dir.iterdir()), seconds=60), (
        workers.log_tail()
    )
    first = next(p for p in workers.slow_dir.iterdir() if p.name.startswith(marker))
    child = int(first.read_text())
    os.kill(child, signal.SIGKILL)  # a pool child this test's workers forked: it is sleeping inside the run
    assert not Receipt.objects.filter(verification=slow).exists()

    def redelivered_and_done() -> bool:
        return Receipt.objects.filter(verification=slow).exists() and len(list(workers.slow_dir.iterdir())) >= 2

    assert wait_for(redelivered_and_done, seconds=90), workers.log_tail()
    pids = {int(p.read_text()) for p in workers.slow_dir.iterdir() if p.name.startswith(marker)}
    assert child in pids and len(pids) >= 2, "a second pool child ran the redelivered task"
    receipts = list(Receipt.objects.filter(verification=slow).values_list("seq", "kind"))
    assert receipts == [(0, "run")]
    slow.refresh_from_db()
    assert slow.attempts >= 2 and slow.failed_at is None and slow.determination == "met"
    time.sleep(1)  # any straggling duplicate would have landed by now
    assert Receipt.objects.filter(verification=slow).count() == 1
    assert workers.alive(), workers.log_tail()

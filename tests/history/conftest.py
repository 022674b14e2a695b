"""Fixtures for the history, findings, dashboards and exports (issue 6).

``story`` is a subject with a fail, a repair and a pass, all on record, built through the real services: the
evidence bytes of a digest criterion vanish before the run (UNKNOWN ``missing-evidence-integrity-proof``, and an
evidence-integrity finding), a reviewer FAILs it (a human decision receipt superseding the run), new evidence brings a
re-run that PASSes (its first receipt superseding the decision; the two automated verdicts disagree, a second
finding). ``bulk`` writes many verifications at once with only their head columns, for sizes the services would take
minutes to build.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from tests.portal.conftest import (  # noqa: F401 - fixtures shared with the portal tests
    PASSWORD,
    Queue,
    admin_user,
    ensure_roles,
    make_user,
    manager,
    queue,
    reviewer,
    reviewer2,
)
from tests.verification.conftest import signing_key, var_dir  # noqa: F401 - fixtures shared with the receipts tests
from tests.verification.service_world import NOTES, inline
from verification.reviews.models import Finding
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_decide
from verification.runs.models import Task, Verification
from verification.runs.services import submit
from verification.runs.services.run import verification_run
from verification.runs.services.submit import verification_add_evidence
from verification.runs.services.tasks import task_create


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@dataclass
class Story:
    """fail → repair → pass on one subject."""

    task: Task
    failed: Verification  # UNKNOWN, then a person's FAIL (its head is the decision receipt)
    passed: Verification  # the re-run with new evidence: PASS, met
    integrity_finding: Finding
    disagreement_finding: Finding | None


def decide(user: Any, verification: Verification, verdict: str, *, rationale: str, cited: Any = (),
           now: datetime | None = None) -> Any:
    review_claim(user=user, verification=verification, now=now)
    return review_decide(
        user=user,
        verification=verification,
        verdict=verdict,
        rationale=rationale,
        cited_evidence_ids=list(cited),
        request_key=new_request_key(),
        now=now,
    )


@pytest.fixture
def story(queue: Queue, reviewer: Any) -> Story:  # noqa: F811 - the fixtures imported above, by name
    # Runs happen when this fixture says (``verification_run``), not when a submission commits: under a transactional
    # test (the browser's) the on-commit enqueue would run the first verification before its bytes vanish.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(submit, "_enqueue", lambda verification_id: None)
        failed = queue.bytes_gone_digest("Release notes v1.2")
        decide(reviewer, failed, "FAIL", rationale="The notes file is gone from the store; resubmit it.")
        world = queue.world
        passed = verification_add_evidence(
            actor=world.agent.actor, token=world.agent.token, verification=failed,
            body={"evidence": [inline("notes", NOTES)]},
        )
        verification_run(verification_id=passed.pk)
    failed.refresh_from_db()
    passed.refresh_from_db()
    assert (failed.verdict, failed.human_decided) == ("FAIL", True)
    assert (passed.verdict, passed.determination, passed.supersedes_id) == ("PASS", "met", failed.pk)
    integrity = Finding.objects.get(kind="evidence_integrity", verification=failed)
    disagreement = Finding.objects.filter(kind="disagreement").first()
    assert failed.task is not None
    return Story(failed.task, failed, passed, integrity, disagreement)


@dataclass
class Bulk:
    """Writes verifications with head columns only (no receipts), fast."""

    task: Task
    counter: int = 0

    def add(self, n: int, *, start: datetime | None = None, step: timedelta = timedelta(seconds=1),
            task: Task | None = None, **columns: Any) -> list[Verification]:
        base = start or timezone.now()
        defaults: dict[str, Any] = {
            "verdict": "PASS",
            "automated_verdict": "PASS",
            "determination": "met",
            "flagged": False,
            "reason": "digest-match",
            "attempts": 1,
        }
        defaults.update(columns)
        rows = []
        for i in range(n):
            self.counter += 1
            when = base - step * i
            rows.append(
                Verification(
                    rubric_hash="1" * 64,
                    submission_hash=uuid.uuid4().hex * 2,
                    task=task or self.task,
                    cycle=1,
                    submitted_at=when,
                    created_at=when,
                    **defaults,
                )
            )
        return Verification.objects.bulk_create(rows, batch_size=2000)


    def add_fast(self, n: int, *, start: datetime | None = None, step: timedelta = timedelta(seconds=1),
                 **columns: Any) -> None:
        """Like ``add`` (same defaults), in one ``INSERT … SELECT generate_series`` on PostgreSQL; ``add`` elsewhere."""
        if connection.vendor != "postgresql":
            self.add(n, start=start, step=step, **columns)
            return
        values: dict[str, Any] = {
            "verdict": "PASS",
            "automated_verdict": "PASS",
            "determination": "met",
            "flagged": False,
            "reason": "digest-match",
            "attempts": 1,
            "flag_reason": None,
            "human_decided": False,
        }
        values.update(columns)
        names = sorted(values)  # column names from this function's own keywords; every value is a parameter
        sql = (
            "INSERT INTO verification_verification (id, rubric_hash, submission_hash, created_at, submitted_at, "  # noqa: S608
            "task_id, cycle, submitted_boundary, body, awaiting_evidence, last_error, evidence_key, "
            + ", ".join(names)
            + ") SELECT gen_random_uuid(), repeat('1', 64), md5(random()::text) || md5(random()::text), "
            "%s::timestamptz - CAST(g AS bigint) * %s * interval '1 microsecond', "
            "%s::timestamptz - CAST(g AS bigint) * %s * interval '1 microsecond', "
            "%s, 1, '', '{}'::jsonb, false, '', '', "
            + ", ".join(["%s"] * len(names))
            + " FROM generate_series(0, %s) AS g"
        )
        base = start or timezone.now()
        micros = int(step / timedelta(microseconds=1))
        params = [base, micros, base, micros, self.task.pk, *(values[k] for k in names), n - 1]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        self.counter += n


@pytest.fixture
def bulk(queue: Queue) -> Bulk:  # noqa: F811 - the fixture imported above, by name
    return Bulk(task_create(actor=queue.world.owner.actor, title="bulk subject"))

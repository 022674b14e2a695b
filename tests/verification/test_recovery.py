"""Nothing acknowledged is ever lost (issue 16): one test per cause the issue found, each failing before the fix.

1. the retry budget outlasts a restart (a floor under the jitter), and a failure that cannot be recorded (database
   down) is retried, never acknowledged into limbo;
2. a publish that fails after commit is a 202 whose row waits; a replay of its Idempotency-Key and the sweeper
   publish the run again; the run stays idempotent (two deliveries, one seq 0);
3. database and broker unavailability answer 503 ``service-unavailable`` with ``Retry-After``, not 500;
4. production settings: an explicit visibility timeout above the longest run plus retries, the database's
   connect_timeout, Celery's cancel-on-connection-loss;
5. verifications queued or running too long are shown in /healthz's detail and on the admin operations page.

The whole system under faults (PostgreSQL and Redis restarted, a worker's main process killed) is
tests/verification/test_chaos.py (scripts/chaos.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import Retry
from django.conf import settings
from django.db import OperationalError
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerOperationalError

from tests.api.conftest import assert_error
from tests.conftest import DATABASE_VARIABLES
from tests.portal.conftest import admin_user, make_user, manager  # noqa: F401 - fixtures by name
from tests.verification.service_world import NOTES, World, digest_entry, inline
from verification import tasks
from verification.kernel.reasons import Reason
from verification.runs.models import Verification
from verification.runs.services import run as services
from verification.runs.services import submit as submit_services
from verification.runs.services.sweeper import verification_sweep
from verification.trust.models import Receipt

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(transactional_db: None, signing_key: Any) -> World:
    built = World.build()
    built.contract(digest_entry())
    return built


class Publishes:
    """Stands in for the broker: records each published run (``fail``: the broker refuses instead)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.fail = False

    def __call__(self, verification_id: str) -> None:
        if self.fail:
            raise BrokerOperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.ids.append(str(verification_id))


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Publishes:
    published = Publishes()
    monkeypatch.setattr(tasks.verification_run, "delay", published)
    return published


def body(world: World) -> dict[str, Any]:
    return {"task": str(world.task.pk), "evidence": [inline("notes", NOTES)], "wait_ms": 0}


def post(world: World, key: str) -> Any:
    return Client().post(
        "/v1/verifications",
        data=json.dumps(body(world)),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world.agent.raw}",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def backdate(verification: Verification, *, seconds: int, **fields: Any) -> None:
    old = timezone.now() - timedelta(seconds=seconds)
    Verification.objects.filter(pk=verification.pk).update(created_at=old, submitted_at=old, **fields)


# --- 1. the retry budget, and a failure that cannot be recorded ------------------------------------------------------


def run_task(monkeypatch: pytest.MonkeyPatch, verification_id: str, *, retries: int, **kwargs: Any) -> list[dict]:
    """Deliver ``verification.run`` as a worker would (not eagerly), on its ``retries``-th retry; the retries it asks
    for are returned instead of published."""
    task = tasks.verification_run
    asked: list[dict] = []

    def retry(**options: Any) -> Retry:
        asked.append(options)
        return Retry("retry", when=options.get("countdown"))

    monkeypatch.setattr(task, "retry", retry)
    task.push_request(retries=retries, is_eager=False, args=[verification_id], kwargs=kwargs)
    try:
        task.run(verification_id, **kwargs)
    except Retry:
        pass
    finally:
        task.pop_request()
    return asked


def test_the_retry_budget_outlasts_a_restart_with_a_floor_under_the_jitter() -> None:
    assert settings.REVIEWPORTAL_RUN_RETRY_BASE_SECONDS == 60
    lowest = [tasks.retry_delay(n, rng=lambda: 0.0) for n in range(services.MAX_ATTEMPTS - 1)]
    highest = [tasks.retry_delay(n, rng=lambda: 1.0) for n in range(services.MAX_ATTEMPTS - 1)]
    assert lowest == [30.0, 60.0]  # never 0-2 s then 0-4 s: a backlog cannot drain its attempts during a restart
    assert highest == [60.0, 120.0]
    assert sum(lowest) >= 90
    assert tasks.retry_delay(1, base=10, rng=lambda: 0.5) == 15.0


def test_an_operational_error_before_the_last_attempt_is_retried_after_the_floor(
    world: World, broker: Publishes, monkeypatch: pytest.MonkeyPatch
) -> None:
    verification = world.submit(body(world), key="k1")

    def down(**kwargs: Any) -> Any:
        raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")

    monkeypatch.setattr(services, "verification_run", down)
    asked = run_task(monkeypatch, str(verification.pk), retries=0)
    assert len(asked) == 1 and asked[0]["countdown"] >= 30
    verification.refresh_from_db()
    assert verification.failed_at is None


def test_a_failure_that_cannot_be_recorded_is_retried_not_acknowledged_into_limbo(
    world: World, broker: Publishes, monkeypatch: pytest.MonkeyPatch
) -> None:
    verification = world.submit(body(world), key="k1")

    def down(**kwargs: Any) -> Any:
        raise OperationalError("the database system is shutting down")

    monkeypatch.setattr(services, "verification_run", down)
    monkeypatch.setattr(services, "verification_mark_failed", down)
    asked = run_task(monkeypatch, str(verification.pk), retries=services.MAX_ATTEMPTS - 1)
    assert len(asked) == 1, "the last attempt's failure could not be written: the task must be retried"
    assert asked[0]["args"] == [str(verification.pk)]
    assert asked[0]["kwargs"]["failure"].startswith("OperationalError: the database system is shutting down")
    assert asked[0]["countdown"] >= 30

    # The retried delivery, with the database back: it only records the failure (no 4th attempt of the run).
    monkeypatch.undo()
    monkeypatch.setattr(services, "verification_run", lambda **kwargs: pytest.fail("no attempt after the last"))
    assert run_task(monkeypatch, str(verification.pk), retries=3, failure=asked[0]["kwargs"]["failure"]) == []
    verification.refresh_from_db()
    assert verification.failed_at is not None
    assert verification.last_error.startswith("OperationalError")
    assert not Receipt.objects.filter(verification=verification).exists()


# --- 2. a publish that fails after commit; replay and sweeper; idempotent run ---------------------------------------


def test_a_publish_that_fails_after_commit_is_acknowledged_and_its_row_waits(world: World, broker: Publishes) -> None:
    broker.fail = True
    before = Verification.objects.count()
    response = post(world, "key-1")
    assert response.status_code == 202, response.content[:300]
    assert response.json()["status"] == "queued"
    assert Verification.objects.count() == before + 1
    verification = Verification.objects.get(pk=response.json()["id"])
    assert verification.failed_at is None and not Receipt.objects.filter(verification=verification).exists()


def test_a_replay_of_a_verification_that_has_not_run_publishes_its_run_again(
    world: World, broker: Publishes
) -> None:
    broker.fail = True
    first = post(world, "key-1")
    assert first.status_code == 202
    broker.fail = False
    again = post(world, "key-1")
    assert again.status_code == 202 and again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert broker.ids == [first.json()["id"]]
    assert Verification.objects.filter(idempotency_key="key-1").count() == 1


def test_a_replay_of_a_finished_verification_publishes_nothing(world: World, broker: Publishes) -> None:
    first = post(world, "key-1")
    world.run(Verification.objects.get(pk=first.json()["id"]))
    broker.ids.clear()
    again = post(world, "key-1")
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"  # finished: the result itself
    assert broker.ids == []


def test_the_sweeper_publishes_every_owed_run_and_only_those(world: World, broker: Publishes) -> None:
    lost = world.submit(body(world), key="lost")
    backdate(lost, seconds=3600)
    attempted_long_ago = world.submit(body(world), key="attempted")
    backdate(attempted_long_ago, seconds=3600, attempts=1, started_at=timezone.now() - timedelta(seconds=3600))
    attempting_now = world.submit(body(world), key="attempting")
    backdate(attempting_now, seconds=3600, attempts=1, started_at=timezone.now())
    done = world.submit(body(world), key="done")
    world.run(done)
    backdate(done, seconds=3600)
    failed = world.submit(body(world), key="failed")
    services.verification_mark_failed(verification_id=failed.pk, error="OperationalError: gone")
    backdate(failed, seconds=3600)
    world.submit(body(world), key="fresh")  # submitted just now: its message is not late
    broker.ids.clear()

    report = verification_sweep(after_seconds=600)
    assert sorted(broker.ids) == sorted([str(lost.pk), str(attempted_long_ago.pk)])
    assert report.summary() == {"owed": 2, "enqueued": 2, "publish_failed": 0}

    # The broker refuses: the sweep stops and says so; nothing changes, the next sweep tries again.
    broker.ids.clear()
    broker.fail = True
    assert verification_sweep(after_seconds=600).summary() == {"owed": 2, "enqueued": 0, "publish_failed": 1}


def test_two_deliveries_of_a_swept_run_give_one_seq0(world: World, broker: Publishes) -> None:
    verification = world.submit(body(world), key="twice")
    first = services.verification_run(verification_id=verification.pk)
    second = services.verification_run(verification_id=verification.pk)
    assert first is not None and second is not None and first.content_hash == second.content_hash
    assert list(Receipt.objects.filter(verification=verification).values_list("seq", flat=True)) == [0]


def test_beat_runs_the_sweeper() -> None:
    from reviewportal.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["sweep-verifications"]
    assert entry["task"] == "verification.sweep" and "verification.sweep" in app.tasks
    assert entry["schedule"] == float(settings.REVIEWPORTAL_SWEEP_INTERVAL_SECONDS)


# --- 3. 503 with Retry-After, not 500 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "outage",
    [
        OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused"),
        BrokerOperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
    ],
    ids=["database", "broker"],
)
def test_an_unavailable_dependency_answers_503_with_retry_after(
    world: World, monkeypatch: pytest.MonkeyPatch, outage: Exception
) -> None:
    def down(**kwargs: Any) -> Any:
        raise outage

    monkeypatch.setattr(submit_services, "verification_submit", down)
    before = Verification.objects.count()
    response = post(world, "key-503")
    error = assert_error(response, 503, Reason.SERVICE_UNAVAILABLE)
    assert error["details"] == {}
    assert response["Retry-After"] == str(settings.REVIEWPORTAL_RETRY_AFTER_SECONDS)
    assert "5432" not in response.content.decode() and "6379" not in response.content.decode()
    assert Verification.objects.count() == before


# --- 4. production settings ----------------------------------------------------------------------------------------


def production_settings(tmp_path: Path, argv: list[str] | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (default: print what Celery and Django read) with the production settings, nothing inherited."""
    script = (
        "import json, django; django.setup()\n"
        "from django.conf import settings as s\n"
        "from reviewportal.celery import app\n"
        "c = app.conf\n"
        "print(json.dumps({'transport': c.broker_transport_options,"
        " 'cancel': c.worker_cancel_long_running_tasks_on_connection_loss,"
        " 'limits': c.task_annotations['verification.run'],"
        " 'longest_retry': s.REVIEWPORTAL_RUN_RETRY_BASE_SECONDS * 2,"
        " 'connect_timeout': s.DATABASES['default']['OPTIONS'].get('connect_timeout')}))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("REVIEWPORTAL_", "CELERY_", "DJANGO_"))}
    for name in DATABASE_VARIABLES:
        clean.pop(name, None)
    clean.update(
        {
            "DJANGO_SETTINGS_MODULE": "reviewportal.settings",
            "DATABASE_URL": "postgres://app@127.0.0.1:5432/portal",
            "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
            "SECRET_KEY": "x" * 50,
            "REVIEWPORTAL_VAR_DIR": str(tmp_path / "var"),
            **env,
        }
    )
    return subprocess.run(
        argv or [sys.executable, "-c", script], cwd=REPO_ROOT, env=clean, capture_output=True, text=True, timeout=120,
        check=False, stdin=subprocess.DEVNULL,
    )


def test_production_settings_bound_redelivery_and_connection_waits(tmp_path: Path) -> None:
    proc = production_settings(tmp_path)
    assert proc.returncode == 0, proc.stderr
    conf = json.loads(proc.stdout)
    visibility = conf["transport"]["visibility_timeout"]
    assert visibility > conf["limits"]["time_limit"] + conf["longest_retry"], "a live worker's message is never stolen"
    assert visibility < 3600, "a killed worker's message does not wait kombu's default hour"
    assert conf["limits"]["soft_time_limit"] < conf["limits"]["time_limit"]
    assert conf["cancel"] is True
    assert conf["connect_timeout"] == 5


def test_a_visibility_timeout_below_the_run_and_its_retries_is_refused(tmp_path: Path) -> None:
    argv = [sys.executable, "manage.py", "check"]
    proc = production_settings(tmp_path, argv, REVIEWPORTAL_BROKER_VISIBILITY_TIMEOUT_SECONDS="60")
    assert proc.returncode == 2
    assert proc.stderr.startswith("reviewportal: configuration error: REVIEWPORTAL_BROKER_VISIBILITY_TIMEOUT_SECONDS")


# --- 5. seen in operations ------------------------------------------------------------------------------------------


def stuck_world(world: World) -> tuple[Verification, Verification, Verification]:
    queued = world.submit(body(world), key="queued")
    running = world.submit(body(world), key="running")
    fresh = world.submit(body(world), key="fresh")
    after = int(settings.REVIEWPORTAL_STUCK_AFTER_SECONDS)
    backdate(queued, seconds=after + 60)
    backdate(running, seconds=after + 60, attempts=2, started_at=timezone.now(), last_error="OperationalError: down")
    return queued, running, fresh


def test_healthz_details_the_verifications_queued_or_running_too_long(world: World, broker: Publishes) -> None:
    stuck_world(world)
    response = Client().get("/healthz")
    assert response.json()["detail"] == {
        "stuck_verifications": {
            "queued": 1,
            "running": 1,
            "older_than_seconds": settings.REVIEWPORTAL_STUCK_AFTER_SECONDS,
        }
    }


def test_the_operations_page_lists_them_for_admins_only(
    world: World, broker: Publishes, admin_user: Any, manager: Any  # noqa: F811 - fixtures by name
) -> None:
    queued, running, fresh = stuck_world(world)
    client = Client()
    client.force_login(admin_user)
    page = client.get(reverse("adminportal:operations"))
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-stuck-queued="1"' in text and 'data-stuck-running="1"' in text
    assert f'data-stuck-verification="{queued.pk}"' in text and f'data-stuck-verification="{running.pk}"' in text
    assert str(fresh.pk) not in text
    assert "OperationalError: down" in text
    outsider = Client()
    outsider.force_login(manager)
    assert outsider.get(reverse("adminportal:operations")).status_code == 403

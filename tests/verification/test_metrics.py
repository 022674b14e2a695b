"""``/metrics`` (issue 15): Prometheus text, restricted to a token or a network; the counters move with the work.

A few verifications are submitted and run through the services (as the API and the workers do), one request is
refused by the API, and the endpoint is read before and after: runs, submissions, the latency histogram by verdict
and the refusals by reason code moved by exactly what was done; the queue depth is the database's count per reason.
The Celery retries counter moves when the real ``verification.run`` task retries a run that hit an operational error
once (through the broker's retry path and eagerly), read from prometheus-client's registry and from the endpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from celery.exceptions import Retry
from django.db import OperationalError
from django.test import Client
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from tests.verification.service_world import NOTES, OTHER_DIGEST, World, digest_entry, inline, unchanged_entry
from verification import tasks
from verification.kernel.reasons import Reason
from verification.reviews.selectors import count_queue_reasons
from verification.runs.models import Verification
from verification.runs.services import run as services
from verification.runs.services.tasks import task_create
from verification.trust.models import Receipt

pytestmark = pytest.mark.django_db


def scrape(client: Client, **extra: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode("utf-8")):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def moved(before: dict[Any, float], after: dict[Any, float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_the_counters_move_with_runs_submissions_and_refusals(
    signing_key: Any, django_capture_on_commit_callbacks: Callable[..., Any], settings: Any
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False  # the runs below are called directly, as a worker would
    client = Client()  # REMOTE_ADDR 127.0.0.1: inside the default networks
    world = World.build()
    world.contract(digest_entry())
    before = scrape(client)

    with django_capture_on_commit_callbacks(execute=False):
        for _ in range(2):
            world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    world.task = task_create(actor=world.owner.actor, title="a second task")
    world.contract(digest_entry("other", literal=OTHER_DIGEST), unchanged_entry())
    with django_capture_on_commit_callbacks(execute=False):
        world.submit_and_run({"evidence": [inline("notes", NOTES), inline("config", b"x = 1\n")]})
    refused = client.get("/v1/verifications/not-a-verification", HTTP_AUTHORIZATION=f"Bearer {world.agent.raw}")
    assert refused.status_code == 404 and refused.json()["error"]["code"] == Reason.NOT_FOUND.value

    after = scrape(client)
    assert moved(before, after, "reviewportal_runs_total", status="signed") == 3
    assert moved(before, after, "reviewportal_run_seconds_count", verdict="PASS") == 2
    assert moved(before, after, "reviewportal_run_seconds_count", verdict="FAIL") == 1
    assert moved(before, after, "reviewportal_run_seconds_bucket", verdict="PASS", le="+Inf") == 2
    assert moved(before, after, "reviewportal_refusals_total", reason=Reason.NOT_FOUND.value) == 1
    # The queue depth is the database's own count per reason, read when scraped.
    from django.utils import timezone

    reasons = count_queue_reasons(now=timezone.now())
    assert reasons  # the FAIL run's unchanged criterion has no baseline: flagged, queued for review
    for reason, n in reasons:
        assert after[("reviewportal_queue_depth", (("reason", reason),))] == n
    assert after[("reviewportal_verifications", (("status", "queued"),))] == 0
    assert after[("reviewportal_decisions_per_minute", ())] == 0


def test_submissions_are_counted_when_committed_and_replays_apart(
    signing_key: Any, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    client = Client()
    world = World.build()
    world.contract(digest_entry())
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        world.submit({"evidence": [inline("notes", NOTES)]}, key="k-1")
    world.submit({"evidence": [inline("notes", NOTES)]}, key="k-1")  # the same key and body: a replay
    after = scrape(client)
    assert moved(before, after, "reviewportal_submissions_total", status="created") == 1
    assert moved(before, after, "reviewportal_submissions_total", status="replayed") == 1


def test_metrics_refuse_a_client_outside_the_networks_without_the_token(settings: Any, db: None) -> None:
    settings.REVIEWPORTAL_METRICS_TOKEN = "s3cret-scrape-token"
    settings.REVIEWPORTAL_METRICS_NETWORKS = "10.1.0.0/16"
    client = Client()
    outside = client.get("/metrics", REMOTE_ADDR="192.0.2.7")
    assert outside.status_code == 403 and b"reviewportal_" not in outside.content
    wrong = client.get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403  # loopback is not in the list now
    assert scrape(client, REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token") is not None
    assert scrape(client, REMOTE_ADDR="10.1.3.4") is not None
    assert client.post("/metrics", REMOTE_ADDR="10.1.3.4").status_code == 405


# --- Celery retries ----------------------------------------------------------------------------------------------


def retries_counted() -> float:
    """``reviewportal_celery_retries_total{task="verification.run"}`` as prometheus-client's registry holds it now."""
    value = REGISTRY.get_sample_value("reviewportal_celery_retries_total", {"task": tasks.RUN_TASK})
    return value or 0.0


def flaky_once(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run service raises an operational error on its first call, then runs for real; the calls are listed."""
    real = services.verification_run
    calls: list[str] = []

    def run(*, verification_id: Any, now: Any = None) -> Any:
        calls.append(str(verification_id))
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(verification_id=verification_id, now=now)

    monkeypatch.setattr(services, "verification_run", run)
    return calls


def submitted(world: World, django_capture_on_commit_callbacks: Callable[..., Any]) -> Verification:
    """A verification submitted but not run (its on-commit publish is held back)."""
    if not world.rubric_doc:
        world.contract(digest_entry())
    with django_capture_on_commit_callbacks(execute=False):
        return world.submit({"evidence": [inline("notes", NOTES)]})


def test_a_run_retried_through_the_broker_path_moves_the_retries_counter(
    signing_key: Any, django_capture_on_commit_callbacks: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's delivery (not eager) hits an operational error: the task's own ``self.retry`` re-sends it (run in
    this process: ``task_always_eager``, no broker needed) and the retried delivery signs the run."""
    client = Client()
    verification = submitted(World.build(), django_capture_on_commit_callbacks)
    calls = flaky_once(monkeypatch)
    task = tasks.verification_run
    monkeypatch.setattr(tasks, "retry_delay", lambda retries: 0.0)
    before, scraped = retries_counted(), scrape(client)

    eager = task.app.conf.task_always_eager
    task.app.conf.task_always_eager = True  # the re-sent task runs here, not on a broker
    task.push_request(retries=0, is_eager=False, called_directly=False, args=[str(verification.pk)], kwargs={})
    try:
        with pytest.raises(Retry):
            task.run(str(verification.pk))
    finally:
        task.pop_request()
        task.app.conf.task_always_eager = eager

    assert calls == [str(verification.pk)] * 2  # the failed attempt and the retried one
    assert Receipt.objects.filter(verification=verification, seq=0).count() == 1
    assert retries_counted() - before == 1
    after = scrape(client)
    assert moved(scraped, after, "reviewportal_celery_retries_total", task=tasks.RUN_TASK) == 1
    assert moved(scraped, after, "reviewportal_runs_total", status="signed") == 1


def test_an_eager_attempt_after_an_operational_error_moves_the_retries_counter(
    signing_key: Any, django_capture_on_commit_callbacks: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded default (no broker): the task runs in the caller and its second attempt is a retry too."""
    world = World.build()
    verification = submitted(world, django_capture_on_commit_callbacks)
    calls = flaky_once(monkeypatch)
    monkeypatch.setattr(tasks, "EAGER_BACKOFF_SECONDS", 0.0)
    before = retries_counted()
    result = tasks.verification_run.apply(args=[str(verification.pk)])
    assert result.successful() and result.result is not None
    assert len(calls) == 2
    assert Receipt.objects.filter(verification=verification, seq=0).count() == 1
    assert retries_counted() - before == 1
    # A run that succeeds at once is no retry.
    again = submitted(world, django_capture_on_commit_callbacks)
    monkeypatch.undo()
    before = retries_counted()
    assert tasks.verification_run.apply(args=[str(again.pk)]).result is not None
    assert retries_counted() == before


def test_a_retry_that_only_records_the_failure_is_counted(
    signing_key: Any, django_capture_on_commit_callbacks: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last attempt fails and so does writing the failure: the task retries the write, and that is a retry."""
    verification = submitted(World.build(), django_capture_on_commit_callbacks)

    def down(**kwargs: Any) -> Any:
        raise OperationalError("the database system is shutting down")

    monkeypatch.setattr(services, "verification_run", down)
    monkeypatch.setattr(services, "verification_mark_failed", down)
    task = tasks.verification_run
    asked: list[dict[str, Any]] = []
    monkeypatch.setattr(task, "retry", lambda **options: asked.append(options) or Retry("retry"))
    before = retries_counted()
    task.push_request(retries=services.MAX_ATTEMPTS - 1, is_eager=False, called_directly=False)
    try:
        with pytest.raises(Retry):
            task.run(str(verification.pk))
    finally:
        task.pop_request()
    assert len(asked) == 1 and asked[0]["kwargs"]["failure"].startswith("OperationalError")
    assert retries_counted() - before == 1

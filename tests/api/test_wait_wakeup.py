"""A ``wait_ms`` submission is woken by its run's announcement, not by sleeping (issue 15).

The view subscribes to the verification's channel (``verification.runs.run_signal``) and waits on it; a test seam stands
in for the channel and for the worker, so no timing is involved: the view must answer 200 with the finished result
without calling ``time.sleep`` once. The channels themselves are tested against the real services: Redis pub/sub on
the broker (``broker`` marker) and PostgreSQL LISTEN/NOTIFY (``postgres`` marker): an announcement made after the
subscription is received, one for another verification is not.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.api.conftest import NOTES, Api, Cast, b64, contracted_task
from verification.runs import run_signal


@pytest.fixture
def ready(signing_key: Any, api: Api, cast: Cast) -> tuple[Api, Cast, str]:
    return api, cast, contracted_task(api, cast)


def test_the_wait_is_woken_by_the_announcement_and_never_sleeps(
    ready: tuple[Api, Cast, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verification import tasks
    from verification.api.views import verifications as views
    from verification.runs.services.run import verification_run

    api, cast, task_id = ready
    monkeypatch.setattr(tasks.verification_run, "delay", lambda verification_id: None)  # no worker: the seam runs it

    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"the view slept {seconds} s instead of waiting for the announcement")

    monkeypatch.setattr(views.time, "sleep", no_sleep)
    woken: list[float] = []

    @contextlib.contextmanager
    def channel(verification_id: Any) -> Iterator[Callable[[float], bool]]:
        def wait(seconds: float) -> bool:
            woken.append(seconds)
            verification_run(verification_id=verification_id)  # the worker commits, then announces
            return True

        yield wait

    monkeypatch.setattr(run_signal, "subscription", channel)
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 5000}
    answered = api.post("/v1/verifications", body, caller=cast.agent)
    assert answered.status_code == 200, answered.content
    assert (answered.json()["status"], answered.json()["determination"]) == ("succeeded", "met")
    assert len(woken) == 1 and 0 < woken[0] <= 5.0


def test_without_a_broker_there_is_no_channel_and_the_eager_run_answers_in_the_request(
    engine: str, api: Api, cast: Cast, settings: Any
) -> None:
    if engine != "eager":
        pytest.skip("a broker is configured: runs are not eager")
    task_id = contracted_task(api, cast)
    assert settings.CELERY_TASK_ALWAYS_EAGER is True and run_signal.mode() is None
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 5000}
    answered = api.post("/v1/verifications", body, caller=cast.agent)
    assert answered.status_code == 200 and answered.json()["status"] == "succeeded"


@pytest.fixture
def redis_broker(settings: Any) -> str:
    """The configured broker, when it is Redis, with runs no longer eager: ``run_signal`` announces on it."""
    broker = os.environ["CELERY_BROKER_URL"]
    if not broker.startswith(("redis://", "rediss://")):
        pytest.skip("the broker is not Redis")
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = broker
    return broker


@pytest.mark.broker
def test_redis_pubsub_delivers_the_announcement_made_after_subscribing(redis_broker: str) -> None:
    assert run_signal.mode() == "redis"
    mine, other = uuid.uuid4(), uuid.uuid4()
    with run_signal.subscription(mine) as wait:
        assert wait is not None
        run_signal.announce(other)
        assert wait(0.05) is False  # another verification's run does not wake this waiter
        run_signal.announce(mine)
        assert wait(5.0) is True


@pytest.mark.broker
def test_the_redis_announcement_carries_the_time_it_was_made(redis_broker: str) -> None:
    """The message is the wall-clock time of the announcement, after the commit (the wait benchmark's reference)."""
    import redis

    mine = uuid.uuid4()
    pubsub = redis.Redis.from_url(redis_broker).pubsub(ignore_subscribe_messages=True)
    try:
        pubsub.subscribe(f"{run_signal.CHANNEL_PREFIX}{mine}")
        before = time.time()
        run_signal.announce(mine)
        after = time.time()
        message = None
        deadline = time.monotonic() + 5
        while message is None and time.monotonic() < deadline:
            message = pubsub.get_message(timeout=1.0)
    finally:
        pubsub.close()
    assert message is not None and message["channel"] == f"{run_signal.CHANNEL_PREFIX}{mine}".encode()
    assert before <= float(message["data"]) <= after


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgresql_notify_delivers_the_announcement_made_after_listening(settings: Any) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = "amqp://127.0.0.1:5672//"  # a broker that is not Redis: the database's channel
    assert run_signal.mode() == "postgresql"
    mine, other = uuid.uuid4(), uuid.uuid4()
    with run_signal.subscription(mine) as wait:
        assert wait is not None
        run_signal.announce(other)
        assert wait(0.05) is False
        run_signal.announce(mine)
        assert wait(5.0) is True

"""Celery tasks: another door to a service (STYLE §11). Each task only calls its service.

``verification_run`` acknowledges late and is redelivered if its worker dies (``acks_late``,
``reject_on_worker_lost``; the app prefetches one task at a time): the service is idempotent and locks the
verification row, so a duplicate or redelivered task yields one receipt chain.

Operational failures (database or broker down, no signing key, the run's soft time limit) are retried: attempt n+1
waits ``retry_delay(n)`` — ``REVIEWPORTAL_RUN_RETRY_BASE_SECONDS * 2**n`` jittered into its upper half, so the
budget outlasts a database restart or a failover (minutes with the defaults) instead of draining a backlog through
every attempt in a few seconds of outage. After ``MAX_ATTEMPTS`` attempts in all the verification is recorded as
failed (SPEC §3: no determination, no receipt). Any other exception is a defect that would fail the same way again:
it is logged and recorded as failed at once.

Recording the failure needs the database too. When that write itself hits an operational error the task is retried
with the failure to record (``failure=``), never acknowledged into limbo; if even that retry cannot be published,
the verification still has no receipt and no ``failed_at``, and the sweeper (``sweep_verifications``, on beat)
enqueues it again. Without a broker (the embedded default) the task runs eagerly in the caller, with the same
attempts and a short backoff, and never raises into the caller.

Every retry is counted in ``reviewportal_celery_retries_total{task="verification.run"}`` (``/metrics``): a run
retried through the broker, a retry that only records the failure, and an eager attempt after the first.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, Final

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerOperationalError

from verification import metrics
from verification.errors import NotFound
from verification.runs.services import run as services
from verification.trust.signing import SigningKeyUnavailable

logger = logging.getLogger(__name__)

#: Errors of a dependency, worth another attempt (a deadlock or serialization failure is an OperationalError).
OPERATIONAL_ERRORS: Final = (
    OperationalError,
    InterfaceError,
    SigningKeyUnavailable,
    BrokerOperationalError,
    ConnectionError,
    TimeoutError,
    SoftTimeLimitExceeded,
)
#: The run task's name (and its label in the retries counter, ``reviewportal_celery_retries_total``).
RUN_TASK: Final = "verification.run"
#: Backoff between eager attempts (no broker): 0.25 s, then 0.5 s.
EAGER_BACKOFF_SECONDS: Final = 0.25


def retry_delay(retries: int, *, base: float | None = None, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before the next attempt, after ``retries`` retries: ``base * 2**retries``, jittered between
    half of that and all of it (the floor keeps a backlog from retrying at once, the jitter spreads it)."""
    step = float(settings.REVIEWPORTAL_RUN_RETRY_BASE_SECONDS if base is None else base) * 2**retries
    return step / 2 + rng() * step / 2


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _eager(verification_id: str) -> str | None:
    """The embedded default (no broker): the same attempts and backoff, in the calling process."""
    for attempt in range(services.MAX_ATTEMPTS):
        try:
            receipt = services.verification_run(verification_id=verification_id)
        except NotFound:
            return None
        except OPERATIONAL_ERRORS as exc:
            if attempt + 1 >= services.MAX_ATTEMPTS:
                logger.error("verification.run %s failed after %d attempts: %r", verification_id, attempt + 1, exc)
                _eager_failed(verification_id, _describe(exc))
                return None
            metrics.count_retry(RUN_TASK)
            time.sleep(EAGER_BACKOFF_SECONDS * 2**attempt)
            continue
        except Exception as exc:  # a defect: it would fail the same way again
            logger.exception("verification.run %s raised", verification_id)
            _eager_failed(verification_id, _describe(exc))
            return None
        return receipt.content_hash if receipt is not None else None
    return None  # pragma: no cover - the loop returns


def _eager_failed(verification_id: str, error: str) -> None:
    try:
        services.verification_mark_failed(verification_id=verification_id, error=error)
    except OPERATIONAL_ERRORS as exc:  # never into the caller: the row stays unfinished for the sweeper
        logger.error("verification.run %s: recording its failure failed too: %r", verification_id, exc)


def _record_failure(task: Any, verification_id: str, error: str) -> None:
    """SPEC §3 ``failed``, recorded; if the database cannot take it now, a retry that only records it."""
    try:
        services.verification_mark_failed(verification_id=verification_id, error=error)
    except OPERATIONAL_ERRORS as exc:
        countdown = retry_delay(min(task.request.retries, services.MAX_ATTEMPTS - 1))
        logger.warning(
            "verification.run %s: recording its failure hit %r; trying again in %.0f s", verification_id, exc, countdown
        )
        metrics.count_retry(RUN_TASK)
        raise task.retry(
            args=[verification_id], kwargs={"failure": error}, exc=exc, countdown=countdown, max_retries=None
        ) from exc


@shared_task(
    bind=True,
    name=RUN_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,  # counted here: MAX_ATTEMPTS runs, then only the recording of the failure is retried
)
def verification_run(self: Any, verification_id: str, failure: str | None = None) -> str | None:
    """Run one verification (``services.run.verification_run``); the receipt id of seq 0, or None.

    ``failure``: the run already failed its last attempt; this delivery only records that (SPEC §3).
    """
    if self.request.is_eager:
        return _eager(verification_id)
    if failure is not None:
        _record_failure(self, verification_id, failure)
        return None
    try:
        receipt = services.verification_run(verification_id=verification_id)
    except NotFound:
        logger.warning("verification.run: no verification %s; dropped", verification_id)
        return None
    except OPERATIONAL_ERRORS as exc:
        attempts = self.request.retries + 1
        if attempts < services.MAX_ATTEMPTS:
            countdown = retry_delay(self.request.retries)
            logger.warning(
                "verification.run %s: attempt %d hit %r; retrying in %.0f s", verification_id, attempts, exc, countdown
            )
            metrics.count_retry(RUN_TASK)
            raise self.retry(exc=exc, countdown=countdown, max_retries=None) from exc
        logger.error("verification.run %s failed after %d attempts: %r", verification_id, attempts, exc)
        _record_failure(self, verification_id, _describe(exc))
        return None
    except Exception as exc:  # a defect: it would fail the same way again
        logger.exception("verification.run %s raised", verification_id)
        _record_failure(self, verification_id, _describe(exc))
        return None
    return receipt.content_hash if receipt is not None else None


@shared_task(name="verification.sweep", acks_late=True, reject_on_worker_lost=True)
def sweep_verifications() -> dict[str, int]:
    """The sweeper on Celery beat (``CELERY_BEAT_SCHEDULE["sweep-verifications"]``): only calls
    ``services.sweeper.verification_sweep`` (idempotent: re-enqueuing a run that is already queued is harmless)."""
    from verification.runs.services.sweeper import verification_sweep

    return verification_sweep().summary()


@shared_task(name="verification.audit_chains", acks_late=True, reject_on_worker_lost=True)
def audit_chains() -> dict[str, Any]:
    """The continuous audit on Celery beat (``CELERY_BEAT_SCHEDULE["audit-chains"]``): only calls
    ``services.audit.audit_run`` (idempotent: a redelivered run raises no finding twice) and returns its summary."""
    from verification.trust.services.audit import audit_run

    return audit_run().summary()

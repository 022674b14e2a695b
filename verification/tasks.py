"""Celery tasks: another door to a service (STYLE §11). Each task only calls its service.

``verification_run`` acknowledges late and is redelivered if its worker dies (``acks_late``,
``reject_on_worker_lost``; the app prefetches one task at a time): the service is idempotent and locks the
verification row, so a duplicate or redelivered task yields one receipt chain. Operational failures (database or
broker down, no signing key) are retried with exponential backoff, up to ``MAX_ATTEMPTS`` attempts in all; after the
last one the verification is recorded as failed (SPEC §3: no determination, no receipt). Any other exception is a
defect that would fail the same way again: it is logged and recorded as failed at once. Without a broker (the
embedded default) the task runs eagerly in the caller, with the same attempts and a short backoff, and never raises
into the caller.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

from celery import shared_task
from django.db import InterfaceError, OperationalError

from verification.services import NotFound
from verification.services import verifications as services
from verification.signing import SigningKeyUnavailable

logger = logging.getLogger(__name__)

#: Errors of a dependency, worth another attempt (a deadlock or serialization failure is an OperationalError).
OPERATIONAL_ERRORS: Final = (OperationalError, InterfaceError, SigningKeyUnavailable, ConnectionError, TimeoutError)
#: Backoff between eager attempts (no broker): 0.25 s, then 0.5 s.
EAGER_BACKOFF_SECONDS: Final = 0.25


def _failed(verification_id: str, exc: BaseException) -> None:
    services.verification_mark_failed(verification_id=verification_id, error=f"{type(exc).__name__}: {exc}")


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
                _failed(verification_id, exc)
                return None
            time.sleep(EAGER_BACKOFF_SECONDS * 2**attempt)
            continue
        except Exception as exc:  # a defect: it would fail the same way again
            logger.exception("verification.run %s raised", verification_id)
            _failed(verification_id, exc)
            return None
        return receipt.content_hash if receipt is not None else None
    return None  # pragma: no cover - the loop returns


@shared_task(
    bind=True,
    name="verification.run",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=OPERATIONAL_ERRORS,
    max_retries=services.MAX_ATTEMPTS - 1,
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
)
def verification_run(self: Any, verification_id: str) -> str | None:
    """Run one verification (``services.verifications.verification_run``); the receipt id of seq 0, or None."""
    if self.request.is_eager:
        return _eager(verification_id)
    try:
        receipt = services.verification_run(verification_id=verification_id)
    except NotFound:
        logger.warning("verification.run: no verification %s; dropped", verification_id)
        return None
    except OPERATIONAL_ERRORS as exc:
        if self.request.retries >= self.max_retries:
            attempts = self.request.retries + 1
            logger.error("verification.run %s failed after %d attempts: %r", verification_id, attempts, exc)
            _failed(verification_id, exc)
            return None
        raise  # autoretry_for: retried after an exponential backoff (2 s, 4 s, ... with jitter)
    except Exception as exc:  # a defect: it would fail the same way again
        logger.exception("verification.run %s raised", verification_id)
        _failed(verification_id, exc)
        return None
    return receipt.content_hash if receipt is not None else None


@shared_task(name="verification.audit_chains", acks_late=True, reject_on_worker_lost=True)
def audit_chains() -> dict[str, Any]:
    """The continuous audit on Celery beat (``CELERY_BEAT_SCHEDULE["audit-chains"]``): only calls
    ``services.audit.audit_run`` (idempotent: a redelivered run raises no finding twice) and returns its summary."""
    from verification.services.audit import audit_run

    return audit_run().summary()

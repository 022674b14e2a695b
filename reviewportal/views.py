"""The portal's pages (thin views: STYLE.md 10)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from verification.actors.roles import role_of

logger = logging.getLogger(__name__)


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"role": role_of(request.user)})


def _database_health() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("healthz: database unavailable: %s", exc)
        return "unavailable"
    return "ok"


def _broker_health() -> str:
    """``eager`` without a broker (tasks run in the web process: the embedded default), else a real connection."""
    if settings.CELERY_BROKER_URL is None:
        return "eager"
    from reviewportal.celery import app

    try:
        with app.connection_for_write(settings.CELERY_BROKER_URL) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=2)
    except Exception as exc:  # any failure to reach the broker means it is down, whatever the transport says
        logger.warning("healthz: broker unavailable: %s", exc)
        return "unavailable"
    return "ok"


def _signing_key_health() -> str:
    from verification.trust.signing import SigningKeyUnavailable, active_signer

    try:
        active_signer()
    except SigningKeyUnavailable as exc:
        logger.warning("healthz: no usable signing key: %s", exc)
        return "unavailable"
    except DatabaseError:
        return "unavailable"
    return "ok"


def _stuck_detail() -> dict[str, int] | None:
    """Verifications queued or running longer than ``REVIEWPORTAL_STUCK_AFTER_SECONDS`` (issue 16): a detail for
    operators, not a failure of this process (the sweeper works them off), so it never turns the answer into 503."""
    from django.utils import timezone

    from verification.runs.operations import stuck

    try:
        found = stuck(now=timezone.now(), after_seconds=int(settings.REVIEWPORTAL_STUCK_AFTER_SECONDS), listed=0)
    except DatabaseError:
        return None
    return {"queued": found.queued, "running": found.running, "older_than_seconds": found.after_seconds}


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """The parts the portal needs, each reported: database, broker (``eager`` without one) and signing key; and in
    ``detail.stuck_verifications`` the verifications queued or running for too long.

    503 when one part is unavailable; the cause goes to the log, not the body.
    """
    database = _database_health()
    report: dict[str, object] = {
        "database": database,
        "broker": _broker_health(),
        "signing_key": _signing_key_health() if database == "ok" else "unavailable",
    }
    healthy = all(value in ("ok", "eager") for value in report.values())
    stuck = _stuck_detail() if database == "ok" else None
    report["detail"] = {"stuck_verifications": stuck}
    return JsonResponse(report, status=200 if healthy else 503)

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

from reviewportal.roles import role_of

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
    from verification.signing import SigningKeyUnavailable, active_signer

    try:
        active_signer()
    except SigningKeyUnavailable as exc:
        logger.warning("healthz: no usable signing key: %s", exc)
        return "unavailable"
    except DatabaseError:
        return "unavailable"
    return "ok"


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """The parts the portal needs, each reported: database, broker (``eager`` without one) and signing key.

    503 when one is unavailable; the cause goes to the log, not the body.
    """
    database = _database_health()
    report = {
        "database": database,
        "broker": _broker_health(),
        "signing_key": _signing_key_health() if database == "ok" else "unavailable",
    }
    healthy = all(value in ("ok", "eager") for value in report.values())
    return JsonResponse(report, status=200 if healthy else 503)

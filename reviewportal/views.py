"""The portal's pages (thin views: STYLE.md 10)."""

from __future__ import annotations

import logging

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


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness of the parts the portal needs; 503 when one is down (the cause goes to the log, not the body)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("healthz: database unavailable: %s", exc)
        return JsonResponse({"database": "unavailable"}, status=503)
    return JsonResponse({"database": "ok"})

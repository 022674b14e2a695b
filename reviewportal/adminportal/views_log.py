"""The admin pages for the security log: the filtered list and its CSV export."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import urlencode

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from reviewportal.adminportal import access
from reviewportal.adminportal.views import _htmx, _page_size, _render
from reviewportal.viewhelpers import page_links
from reviewportal.viewhelpers import refusal_words as _refusal
from verification import csv_export
from verification.kernel.errors import KernelError
from verification.trust import selectors as trust_selectors
from verification.trust.models import SecurityEventKind

LOG_CSV_HEADER: Final = ("id", "created_at", "kind", "actor", "username", "target", "ip_address", "detail")


def _log_filters(request: HttpRequest) -> dict[str, str]:
    return {name: request.GET.get(name, "").strip() for name in trust_selectors.SECURITY_FILTERS}


@require_GET
@access.security_log_reader
def security_log_page(request: HttpRequest) -> HttpResponse:
    """The security log, filterable; htmx swaps the rows in place (``#security-log``)."""
    filters = _log_filters(request)
    cursor = request.GET.get("cursor", "").strip() or None
    refusal = None
    try:
        rows, next_cursor = trust_selectors.security_log_page(filters=filters, cursor=cursor, limit=_page_size())
    except KernelError as exc:
        refusal = _refusal(exc)
        filters, cursor = dict.fromkeys(trust_selectors.SECURITY_FILTERS, ""), None
        rows, next_cursor = trust_selectors.security_log_page(filters={}, cursor=None, limit=_page_size())
    query = {k: v for k, v in filters.items() if v}
    here = reverse("adminportal:security-log")
    context = {
        "rows": rows,
        "filters": filters,
        "list_refusal": refusal,
        "kinds": [(k.value, k.label) for k in SecurityEventKind],
        "csv_url": f"{reverse('adminportal:security-log-csv')}?{urlencode(query)}",
        **page_links(here, query, cursor=cursor, next_cursor=next_cursor),
    }
    if _htmx(request):
        return _render(request, "adminportal/_security_log_rows.html", context)
    return _render(request, "adminportal/security_log.html", context)


@require_GET
@access.security_log_reader
def security_log_csv(request: HttpRequest) -> HttpResponseBase:
    """The filtered log as CSV, streamed (every matching entry, newest first)."""
    try:
        rows = trust_selectors.security_log_rows(_log_filters(request))
        first = next(rows, None)
    except KernelError as exc:
        return HttpResponse(f"{exc.reason.value}: {exc.detail}\n", status=400, content_type="text/plain")
    except DatabaseError:  # pragma: no cover - surfaced as a server error by Django otherwise
        raise

    def entries() -> Iterator[list[Any]]:
        entry = first
        while entry is not None:
            yield [
                entry.pk,
                entry.created_at.isoformat(),
                entry.kind,
                entry.actor_label,
                entry.user.get_username() if entry.user else "",
                entry.target,
                entry.ip_address,
                json.dumps(entry.detail, sort_keys=True, ensure_ascii=False),
            ]
            entry = next(rows, None)

    plain, safe = csv_export.plain_cell, csv_export.safe_cell
    lines = csv_export.stream(LOG_CSV_HEADER, entries(), [plain, plain, plain, safe, safe, safe, plain, safe])

    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="security-log-{stamp}.csv"'
    response["Cache-Control"] = "no-store"
    return response

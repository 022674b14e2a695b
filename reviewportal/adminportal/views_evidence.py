"""The admin pages for evidence (SPEC §4): the list, one item with what cites it, redaction."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET

from reviewportal.adminportal import access, presenters
from reviewportal.adminportal.forms import (
    RedactForm,
)
from reviewportal.adminportal.views import GET_POST, _denied, _htmx, _page_size, _render
from reviewportal.viewhelpers import page_links
from reviewportal.viewhelpers import refusal_words as _refusal
from verification.evidence import selectors as evidence_selectors
from verification.evidence.selectors import evidence_get
from verification.kernel.errors import KernelError
from verification.trust.services import security_log
from verification.trust.services.security_log import client_address


@require_GET
@access.evidence_inspector
def evidence_list(request: HttpRequest) -> HttpResponse:
    filters = {name: request.GET.get(name, "").strip() for name in ("q", "state")}
    cursor = request.GET.get("cursor", "").strip() or None
    refusal = None
    try:
        rows, next_cursor = evidence_selectors.evidence_list(filters=filters, cursor=cursor, limit=_page_size())
    except KernelError as exc:
        refusal = _refusal(exc)
        filters, cursor = {"q": "", "state": ""}, None
        rows, next_cursor = evidence_selectors.evidence_list(filters={}, cursor=None, limit=_page_size())
    query = {k: v for k, v in filters.items() if v}
    here = reverse("adminportal:evidence")
    context = {
        "rows": rows,
        "filters": filters,
        "list_refusal": refusal,
        "states": evidence_selectors.EVIDENCE_STATES,
        **page_links(here, query, cursor=cursor, next_cursor=next_cursor),
    }
    if _htmx(request):
        return _render(request, "adminportal/_evidence_rows.html", context)
    return _render(request, "adminportal/evidence_list.html", context)


@require_GET
@access.evidence_inspector
def evidence_detail(request: HttpRequest, evidence_id: Any) -> HttpResponse:
    evidence = evidence_get(evidence_id)
    if evidence is None:
        raise Http404("no such evidence")
    detail = presenters.evidence_detail(evidence)
    return _render(request, "adminportal/evidence_detail.html", {"detail": detail})


@GET_POST
@access.evidence_inspector
def evidence_redact(request: HttpRequest, evidence_id: Any) -> HttpResponse:
    """Redact an artifact with a reason: bytes leave the store, the digest stays, rechecks answer evidence-redacted."""
    evidence = evidence_get(evidence_id)
    if evidence is None:
        raise Http404("no such evidence")
    form = RedactForm(request.POST or None)
    detail = presenters.evidence_detail(evidence)
    context: dict[str, Any] = {"evidence": evidence, "form": form, "detail": detail}
    if request.method == "POST" and form.is_valid():
        try:
            security_log.evidence_redact_as_admin(
                user=request.user,
                evidence=evidence,
                reason=form.cleaned_data["reason"],
                ip_address=client_address(request),
            )
        except KernelError as exc:
            context["refusal"] = _refusal(exc)
            return _render(request, "adminportal/evidence_redact.html", context, 403 if _denied(exc) else 200)
        messages.success(request, "Redacted: the bytes are gone from the store; the digest and the record stay.")
        return redirect("adminportal:evidence-detail", evidence_id=evidence.pk)
    return _render(request, "adminportal/evidence_redact.html", context)

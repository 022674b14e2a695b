"""The admin pages (issue 7): thin views, one access decorator each, one service call, a render (STYLE §10).

Every refusal is shown with its code and the registry's words (SPEC §11). Every page works without JavaScript; htmx
only swaps the security log's and the evidence list's rows in place (``request.htmx``: the fragment, otherwise the
page), and every ``hx-get`` also has an ``href`` or a form action. Actions with consequences (rotate, revoke,
unpin, redact, deactivate) are a GET confirmation page naming them, then a POST.
"""

from __future__ import annotations

from typing import Any, Final

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods, require_safe

from reviewportal.adminportal import access, presenters
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.trust import selectors as trust_selectors

GET_POST: Final = require_http_methods(["GET", "POST"])


def _render(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    """Every admin page shows the portal's own key (SPEC §8: confirm it out of band) and the sections it may open."""
    base = {"portal_key": presenters.portal_key(), "admin_sections": access.sections(request.user)}
    return render(request, template, {**base, **context}, status=status)


def _htmx(request: HttpRequest) -> bool:
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def _page_size() -> int:
    return int(getattr(settings, "REVIEWPORTAL_ADMIN_PAGE_SIZE", 50))


# --- public: the portal's keys -------------------------------------------------------------------------------------


@require_safe
def public_keys(request: HttpRequest) -> HttpResponse:
    """No sign-in: the portal's fingerprints, so anyone can confirm them out of band before pinning (SPEC §8, §12)."""
    response = render(
        request,
        "adminportal/public_keys.html",
        {"portal_key": presenters.portal_key(), "keys": presenters.portal_keys()},
    )
    response["Cache-Control"] = "public, max-age=60"
    return response


# --- home -------------------------------------------------------------------------------------------------------------


@require_GET
@access.admin_required
def home(request: HttpRequest) -> HttpResponse:
    runs = trust_selectors.latest_audit_runs(1)
    return _render(request, "adminportal/home.html", {"last_run": runs[0] if runs else None})


# --- keys -----------------------------------------------------------------------------------------------------------


def _denied(exc: KernelError) -> bool:
    return exc.reason is Reason.PERMISSION_DENIED


# --- receipt chains ---------------------------------------------------------------------------------------------------


# --- operations: verifications queued or running too long (issue 16) -------------------------------------------------


# --- the audit --------------------------------------------------------------------------------------------------------


# --- evidence ---------------------------------------------------------------------------------------------------------


# --- users and tokens -------------------------------------------------------------------------------------------------


# --- the security log ------------------------------------------------------------------------------------------------

"""The portal's error pages (issue 14): 400, 403, 404 and 500 as pages of the portal, with its navigation, the
signed-in user's roles and, for a 403, what the page needed. The API under /v1/ keeps its JSON errors (its own
fallback); these handlers only render HTML for the pages people open.

A 403 is an answer, not a fault: ``reviewportal.logfilters.OneLineForbidden`` keeps Django's "Forbidden" log record
to one line (no traceback); 500s keep theirs.
"""

from __future__ import annotations

from typing import Any, Final

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve

from verification.actors.roles import ROLES

#: What each area of the portal needs, in words a person reads on a 403 page.
NEEDS: Final = {
    "adminportal": "the admin role (keys, users and tokens, chains, evidence, the security log)",
    "history": "the manager or reviewer role (history and dashboards); findings need the manager or admin role",
    "portal": "the reviewer, manager or admin role to read the queue; deciding needs the reviewer or admin role",
}


def _roles(request: HttpRequest) -> list[str]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return []
    if getattr(user, "is_superuser", False):
        return ["admin (superuser)"]
    names = set(user.groups.values_list("name", flat=True))
    return [role for role in ROLES if role in names]


def _needed(request: HttpRequest, exception: Any) -> str:
    said = str(exception or "").strip()
    try:
        namespace = resolve(request.path_info).namespace
    except Resolver404:
        namespace = ""
    area = NEEDS.get(namespace, "a role that may open this page")
    return f"{area}. {said}".strip() if said and not said.startswith("<") else area


def _page(request: HttpRequest, status: int, title: str, explanation: str, **extra: Any) -> HttpResponse:
    context = {
        "status": status,
        "title": title,
        "explanation": explanation,
        "roles": _roles(request),
        "path": request.path,
        **extra,
    }
    return render(request, f"{status}.html", context, status=status)


def bad_request(request: HttpRequest, exception: Any = None) -> HttpResponse:
    return _page(request, 400, "Bad request", "The request could not be read; go back and try again.")


def permission_denied(request: HttpRequest, exception: Any = None) -> HttpResponse:
    return _page(
        request,
        403,
        "Not for your role",
        "You are signed in, but this page is not open to your role.",
        needed=_needed(request, exception),
    )


def page_not_found(request: HttpRequest, exception: Any = None) -> HttpResponse:
    return _page(request, 404, "Not found", "Nothing is at this address: it may have been mistyped, or it is gone.")


def server_error(request: HttpRequest) -> HttpResponse:
    """Rendered without touching the database (it may be what failed): no roles, only the navigation's links."""
    context = {"status": 500, "title": "Something went wrong", "path": request.path, "roles": [],
               "explanation": "The portal failed to answer this request; it is logged. Try again in a moment."}
    try:
        return render(request, "500.html", context, status=500)
    except Exception:  # the page itself failed (the database, a template): a plain answer, never a traceback
        return HttpResponse("500: the portal failed to answer this request; it is logged.", status=500,
                            content_type="text/plain; charset=utf-8")


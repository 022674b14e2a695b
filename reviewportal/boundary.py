"""The input boundary of every page and API call: a NUL byte never reaches a view (SPEC §3; issue 13 item 3).

PostgreSQL refuses NUL in text (``A string literal cannot contain NUL``), so any filter passed to a query would
answer 500 there while SQLite answers 200: one check at the door instead of one per filter. A query string holding
NUL is refused with 400: the API's error shape (``invalid-request``) under ``/v1/``, the portal's 400 page
elsewhere. A path with NUL matches no route (404); form fields go through Django forms, whose ``CharField`` refuses
NUL already.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final
from urllib.parse import unquote_to_bytes

from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse

API_PREFIX: Final = "/v1/"
NUL: Final = b"\x00"


class NulByteRefused(SuspiciousOperation):
    """A request carrying a NUL byte (Django answers a SuspiciousOperation with its 400 handler)."""


def nul_in(request: HttpRequest) -> str | None:
    """``"query string"`` when the decoded query string holds a NUL byte, else None."""
    if NUL in unquote_to_bytes(request.META.get("QUERY_STRING", "")):
        return "query string"
    return None


class InputBoundaryMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = nul_in(request)
        if where is None:
            return self.get_response(request)
        detail = f"the {where} holds a NUL byte"
        if request.path.startswith(API_PREFIX):
            from django.http import JsonResponse

            from verification.api.errors import error_body
            from verification.kernel.reasons import Reason

            response = JsonResponse(error_body(Reason.INVALID_REQUEST, detail), status=400)
            response["Cache-Control"] = "no-store"
            return response
        raise NulByteRefused(detail)

"""One error shape for the whole API: ``{"error": {"code", "message", "details"}}`` (issue 4 §3, SPEC §11).

Every ``code`` is a registered ``Reason``; ``message`` is the registry's explanation, followed by the specific detail
when there is one. Status codes:

- 400 malformed JSON (``invalid-json`` and the strict parser's ``duplicate-key``, ``non-finite-number``, ...), unknown
  fields (``unknown-field``), bad base64 (``bad-base64``), any other invalid field (``invalid-request``);
- 422 a well-formed request refused by a rule of the domain (``obligation-not-falsifiable``, ``malformed-rubric``,
  ``source-signature-invalid``, ...): any ``KernelError`` that names no status of its own;
- 401 ``not-authenticated`` (missing, malformed, unknown or revoked token), 403 ``scope-denied`` (the token lacks the
  endpoint's scope), ``permission-denied`` or a rail refusal of the actor (``self-contract-acceptance``), 404
  ``not-found``, 405 ``method-not-allowed``, 409 for a request that conflicts with stored state
  (``idempotency-conflict``, ``pending-expired``, ``not-pending``, ``not-awaiting-evidence``), 413
  ``payload-too-large``, 415 ``unsupported-media-type``, 503 ``no-signing-key``;
- 503 ``service-unavailable`` with ``Retry-After`` when the database or the message broker does not answer (an
  operational error, not a bug): the client sends the same request again, with the same ``Idempotency-Key``;
- 500 ``internal-error`` only for a true bug: it is logged with its traceback and the body says nothing more.

A ``ServiceError`` (``verification.errors``) carries its own ``http_status``, which is used as it is.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404
from kombu.exceptions import OperationalError as BrokerOperationalError
from rest_framework import exceptions as drf
from rest_framework.response import Response

from verification.kernel.errors import KernelError, StrictJSONError
from verification.kernel.reasons import Reason, explain
from verification.metrics import count_refusal

logger = logging.getLogger("verification.api")

NO_STORE: Final = "private, no-store"
#: The challenge of every 401 (RFC 6750): the API authenticates with bearer tokens.
WWW_AUTHENTICATE: Final = 'Bearer realm="reviewportal"'

#: The status of a refusal by its code; a code not listed answers 400 from the API layer, 422 from a domain rule.
STATUS_BY_REASON: Final[Mapping[Reason, int]] = {
    Reason.NOT_AUTHENTICATED: 401,
    Reason.PERMISSION_DENIED: 403,
    Reason.SCOPE_DENIED: 403,
    Reason.NOT_FOUND: 404,
    Reason.METHOD_NOT_ALLOWED: 405,
    Reason.PENDING_EXPIRED: 409,
    Reason.NOT_PENDING: 409,
    Reason.IDEMPOTENCY_CONFLICT: 409,
    Reason.NOT_AWAITING_EVIDENCE: 409,
    Reason.ACTOR_NAME_TAKEN: 409,
    Reason.INVALID_REQUEST: 400,
    Reason.UNKNOWN_FIELD: 400,
    Reason.BAD_BASE64: 400,
    Reason.PAYLOAD_TOO_LARGE: 413,
    Reason.UNSUPPORTED_MEDIA_TYPE: 415,
    Reason.NO_SIGNING_KEY: 503,
    Reason.SERVICE_UNAVAILABLE: 503,
    Reason.INTERNAL_ERROR: 500,
}

#: A dependency that does not answer (database down or restarting, a broken connection, a serialization failure,
#: the broker down): 503 ``service-unavailable`` with ``Retry-After``, never a 500 "bug" (issue 16).
UNAVAILABLE_ERRORS: Final = (OperationalError, InterfaceError, BrokerOperationalError)

#: When a validation error holds several codes, the most specific one names the whole error.
_VALIDATION_PRIORITY: Final[tuple[Reason, ...]] = (Reason.UNKNOWN_FIELD, Reason.BAD_BASE64)


class ApiError(drf.APIException):
    """A refusal with a registered code, raised by the API layer itself (parser, authentication, serializers)."""

    def __init__(
        self, reason: Reason, detail: str = "", *, status: int | None = None, details: Mapping[str, Any] | None = None
    ) -> None:
        self.reason = Reason(reason)
        self.status_code = status if status is not None else status_for(self.reason)
        self.text = detail
        self.extra: dict[str, Any] = dict(details or {})
        super().__init__(detail or explain(self.reason), code=self.reason.value)


def status_for(reason: Reason) -> int:
    """The status of an API-layer refusal (400 unless the table says otherwise)."""
    return STATUS_BY_REASON.get(reason, 400)


def message_for(reason: Reason, detail: str = "") -> str:
    """The registry's words, then the specific detail (SPEC §11: one vocabulary everywhere)."""
    words = explain(reason)
    return f"{words} ({detail})" if detail and detail != words else words


def error_body(reason: Reason, detail: str = "", details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": reason.value, "message": message_for(reason, detail), "details": dict(details or {})}}


def error_response(
    reason: Reason,
    detail: str = "",
    *,
    status: int | None = None,
    details: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    response = Response(
        error_body(reason, detail, details), status=status if status is not None else status_for(reason)
    )
    response["Cache-Control"] = NO_STORE
    for name, value in (headers or {}).items():
        response[name] = value
    if response.status_code < 500:  # noqa: PLR2004 - a refusal, not a failure
        count_refusal(reason.value)  # /metrics: refusals by reason code
    return response


# --- validation errors ---------------------------------------------------------------------------------------------


def _flatten(detail: Any, path: str, out: dict[str, list[str]], codes: set[str]) -> None:
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            if isinstance(key, int):  # a list field's errors by index
                _flatten(value, f"{path}[{key}]", out, codes)
                continue
            name = "" if key == "non_field_errors" else str(key)
            _flatten(value, f"{path}.{name}" if path and name else (name or path), out, codes)
    elif isinstance(detail, list):
        if all(isinstance(item, drf.ErrorDetail | str) for item in detail):
            for item in detail:
                _flatten(item, path, out, codes)
        else:
            for index, item in enumerate(detail):
                if item:
                    _flatten(item, f"{path}[{index}]", out, codes)
    else:
        code = getattr(detail, "code", None)
        if isinstance(code, str):
            codes.add(code)
        out.setdefault(path or "body", []).append(str(detail))


def validation_error(detail: Any) -> tuple[Reason, str, dict[str, Any]]:
    """A DRF validation error as (code, message detail, details): ``details.fields`` maps each path to its messages."""
    fields: dict[str, list[str]] = {}
    codes: set[str] = set()
    _flatten(detail, "", fields, codes)
    reason = next((r for r in _VALIDATION_PRIORITY if r.value in codes), Reason.INVALID_REQUEST)
    first_path = next(iter(fields), "body")
    summary = f"{first_path}: {fields[first_path][0]}" if fields else ""
    return reason, summary, {"fields": fields}


# --- the handler ---------------------------------------------------------------------------------------------------


def _from_api_exception(exc: drf.APIException) -> tuple[Reason, str, int, dict[str, Any]]:
    if isinstance(exc, ApiError):
        return exc.reason, exc.text, exc.status_code, exc.extra
    if isinstance(exc, drf.ValidationError):
        reason, summary, details = validation_error(exc.detail)
        return reason, summary, 400, details
    if isinstance(exc, drf.ParseError):
        return Reason.INVALID_JSON, str(exc.detail), 400, {}
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        return Reason.NOT_AUTHENTICATED, "", 401, {}
    if isinstance(exc, drf.PermissionDenied):
        text = str(exc.detail)
        return Reason.PERMISSION_DENIED, "" if text == drf.PermissionDenied.default_detail else text, 403, {}
    if isinstance(exc, drf.NotFound):
        return Reason.NOT_FOUND, "", 404, {}
    if isinstance(exc, drf.MethodNotAllowed):
        return Reason.METHOD_NOT_ALLOWED, str(exc.detail), 405, {}
    if isinstance(exc, drf.UnsupportedMediaType):
        return Reason.UNSUPPORTED_MEDIA_TYPE, str(exc.detail), 415, {}
    if isinstance(exc, drf.NotAcceptable):
        # The API renders JSON whatever the Accept header says (negotiation.JsonOnly); kept for completeness.
        return Reason.INVALID_REQUEST, str(exc.detail), 406, {}
    if isinstance(exc, drf.Throttled):
        return Reason.RATE_LIMITED, "", 429, {}
    # Any future APIException: keep DRF's status, say what it said.
    return Reason.INVALID_REQUEST, str(exc.detail), exc.status_code, {}


def _kernel_status(exc: KernelError) -> int:
    """A service's declared status; else the table; else 400 for unparseable JSON and 422 for a rule's refusal."""
    declared = getattr(exc, "http_status", None)
    if isinstance(declared, int) and 400 <= declared <= 599:
        return declared
    if exc.reason in STATUS_BY_REASON:
        return STATUS_BY_REASON[exc.reason]
    return 400 if isinstance(exc, StrictJSONError) else 422


def api_exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response:
    """REST framework's EXCEPTION_HANDLER: every exception becomes the error shape; never HTML, never a bare 500."""
    headers: dict[str, str] = {}
    if isinstance(exc, KernelError):
        reason, detail, status, details = exc.reason, exc.detail, _kernel_status(exc), dict(exc.details)
    elif isinstance(exc, Http404):
        reason, detail, status, details = Reason.NOT_FOUND, "", 404, {}
    elif isinstance(exc, DjangoPermissionDenied):
        reason, detail, status, details = Reason.PERMISSION_DENIED, "", 403, {}
    elif isinstance(exc, RequestDataTooBig):
        reason, detail, status, details = Reason.PAYLOAD_TOO_LARGE, "", 413, {}
    elif isinstance(exc, UNAVAILABLE_ERRORS):
        logger.warning("service unavailable: %s: %s", type(exc).__name__, exc)
        reason, detail, status, details = Reason.SERVICE_UNAVAILABLE, "", 503, {}
        headers["Retry-After"] = str(int(getattr(settings, "REVIEWPORTAL_RETRY_AFTER_SECONDS", 5)))
    elif isinstance(exc, drf.APIException):
        reason, detail, status, details = _from_api_exception(exc)
        wait = getattr(exc, "wait", None)
        if wait is not None:
            headers["Retry-After"] = str(max(1, math.ceil(wait)))
    else:
        view = context.get("view")
        logger.error("API bug in %s", type(view).__name__ if view is not None else "?", exc_info=exc)
        reason, detail, status, details = Reason.INTERNAL_ERROR, "", 500, {}
    if status == 401:
        headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    from rest_framework.views import set_rollback  # not at import: rest_framework.views loads these settings

    set_rollback()
    return error_response(reason, detail, status=status, details=details, headers=headers)

"""What every API view shares: the base view, the documented error answers, body validation and the 404 lookups."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from verification.api.authentication import ApiCredentials
from verification.api.errors import NO_STORE, ApiError
from verification.api.permissions import credentials
from verification.api.serializers.base import ErrorResponseSerializer, validated_data_of
from verification.evidence import selectors as evidence_selectors
from verification.evidence.models import Evidence
from verification.kernel.reasons import Reason
from verification.runs import selectors as run_selectors
from verification.runs.models import Task, Verification


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error responses an endpoint may give, all of the one shape."""
    words = {
        400: "malformed JSON, an unknown field, a wrong type, bad base64 or an invalid value",
        401: "no token, or a malformed, unknown or revoked one (not-authenticated)",
        403: "the token lacks the scope (scope-denied), or a rule refuses this actor",
        404: "an id names nothing (not-found)",
        405: "method-not-allowed",
        409: "the request conflicts with recorded state",
        413: "the body or an inline evidence item is too large (payload-too-large)",
        415: "the body is not application/json (unsupported-media-type)",
        422: "a rule of the domain refuses the well-formed request",
    }
    return {code: OpenApiResponse(ErrorResponseSerializer, description=words[code]) for code in statuses}


WRITE_ERRORS: Final = (400, 401, 403, 404, 413, 415, 422)


#: Writes take an API token only: a portal session may read, never write (the token names the actor, SPEC §1).
TOKEN_ONLY: Final = [{"bearerAuth": []}]


READ_ERRORS: Final = (400, 401, 403, 404)


def scopes_text(scope: str) -> str:
    return f"Needs the `{scope}` scope."


class ApiView(APIView):
    """``required_scopes`` maps each method to its scope (``permissions.HasScope``); answers are never cached."""

    required_scopes: ClassVar[Mapping[str, str]] = {}
    metadata_class = None  # no OPTIONS introspection: the schema is at /api/schema/

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        if not response.has_header("Cache-Control"):
            response["Cache-Control"] = NO_STORE
        return response


@dataclass(frozen=True)
class Write:
    """What a write's view works from: the caller, the body as parsed (what services hash) and as validated."""

    creds: ApiCredentials
    raw: Any
    data: dict[str, Any]

    @property
    def actor(self) -> Any:
        return self.creds.actor

    @property
    def token(self) -> Any:
        return self.creds.token


def write_of(request: Request, serializer_class: type[serializers.Serializer]) -> Write:  # type: ignore[type-arg]
    """Every write's first steps, in the API's one order: who calls (401), then what they send (400); the records the
    path or the body names are looked up after that (404), by the view."""
    creds = credentials(request)
    raw = request.data
    return Write(creds=creds, raw=raw, data=validated_data_of(serializer_class, raw))


def task_or_404(task_id: str, *, field: str = "task") -> Task:
    task = run_selectors.task_get(task_id)
    if task is None:
        raise ApiError(Reason.NOT_FOUND, f"no task {task_id!r}", details={field: task_id})
    return task


def verification_not_found(verification_id: str) -> ApiError:
    """The refusal of an unknown verification id (404 ``not-found``)."""
    return ApiError(
        Reason.NOT_FOUND, f"no verification {verification_id!r}", details={"verification_id": verification_id}
    )


def verification_or_404(verification_id: str) -> Verification:
    verification = run_selectors.verification_get(verification_id)
    if verification is None or verification.task_id is None:
        raise verification_not_found(verification_id)
    return verification


def evidence_or_404(evidence_id: str) -> Evidence:
    evidence = evidence_selectors.evidence_get(evidence_id)
    if evidence is None:
        raise ApiError(Reason.NOT_FOUND, f"no evidence {evidence_id!r}", details={"evidence_id": evidence_id})
    return evidence


def created_response(serializer: serializers.Serializer) -> Response:  # type: ignore[type-arg]
    return Response(serializer.data, status=201)

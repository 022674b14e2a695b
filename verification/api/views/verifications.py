"""``/v1/verifications``: submit (bounded sync), read, list, deliver a result, add evidence.

Bounded sync (``wait_ms``): a submission's run is enqueued when its transaction commits (eagerly, in this process,
without a broker). The view then reads the verification until it is finished (``succeeded`` or ``failed``) or
``wait_ms`` has passed: 200 with the result, else 202 with ``Location`` to poll.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from verification.api.authentication import ApiCredentials
from verification.api.errors import ApiError
from verification.api.permissions import credentials
from verification.api.presenters import verification_view
from verification.api.serializers.base import represented
from verification.api.serializers.submissions import (
    RESULT_REQUEST,
    MoreEvidenceRequestSerializer,
    ResultRequestSerializer,
    VerificationRequestSerializer,
    submission_from_validated,
)
from verification.api.serializers.verifications import (
    VerificationListQuerySerializer,
    VerificationPageSerializer,
    VerificationResponseSerializer,
)
from verification.api.views.common import (
    READ_ERRORS,
    TOKEN_ONLY,
    WRITE_ERRORS,
    ApiView,
    error_responses,
    scopes_text,
    task_or_404,
    verification_not_found,
    verification_or_404,
    write_of,
)
from verification.kernel.reasons import Reason
from verification.runs import run_signal
from verification.runs import selectors as run_selectors
from verification.runs.models import Verification
from verification.runs.services import results as result_services
from verification.runs.services import submit as submit_services
from verification.trust import selectors as trust_selectors
from verification.trust.models import Receipt, ReceiptKind

FINISHED: Final = frozenset({"succeeded", "failed"})


POLL_FIRST_S: Final = 0.02


POLL_MAX_S: Final = 0.25


IDEMPOTENCY_HEADER: Final = "HTTP_IDEMPOTENCY_KEY"


DEFAULT_PAGE: Final = 50


def _view_of(
    verification: Verification, head: Receipt | None | run_selectors.Unread = run_selectors.UNREAD
) -> dict[str, Any]:
    """The second seed's shape (``presenters.verification_view``), resolved now, rendered through its serializer;
    ``head``: the head receipt as read with the verification (else read here)."""
    return represented(VerificationResponseSerializer, verification_view(verification, now=timezone.now(), head=head))


def location_of(verification: Verification) -> str:
    return f"/v1/verifications/{verification.pk}"


def _read_again(verification: Verification) -> dict[str, Any]:
    """The view of the verification as committed now: the row, with the submitter and the contract its view reads,
    and its head receipt, read in one round trip by statements compiled once (``refresh_from_db``, the two relations
    and the head cost four round trips on every wake-up, and compiling the queries more than running them)."""
    found = run_selectors.verification_and_head(verification.pk)
    if found is None:  # pragma: no cover - nothing is ever deleted (SPEC §7)
        raise Verification.DoesNotExist(f"no verification {verification.pk}")
    return _view_of(*found)


def wait_for_result(verification: Verification, wait_ms: int) -> tuple[dict[str, Any], bool]:
    """Read the verification until it is finished or ``wait_ms`` has passed: (its view, finished?).

    Woken by the run's announcement (``verification.runs.run_signal``: Redis pub/sub on the broker, or PostgreSQL
    NOTIFY), never by sleeping; only where no channel exists does it read again at growing intervals."""
    deadline = time.monotonic() + wait_ms / 1000
    view = _read_again(verification)
    if view["status"] in FINISHED or wait_ms <= 0:  # the eager run finished inside this request already
        return view, view["status"] in FINISHED
    pause = POLL_FIRST_S
    with run_signal.subscription(verification.pk) as wait:
        while True:
            view = _read_again(verification)  # after subscribing: a commit before is seen, one after wakes us
            if view["status"] in FINISHED:
                return view, True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return view, False
            if wait is not None:
                wait(remaining)
            else:  # no channel: read again at growing intervals
                time.sleep(min(pause, remaining))
                pause = min(pause * 2, POLL_MAX_S)


def bounded_response(verification: Verification, *, wait_ms: int, created: bool) -> Response:
    view, finished = wait_for_result(verification, wait_ms)
    response = Response(view, status=200 if finished else 202)
    response["Location"] = location_of(verification)
    if not created:
        response["Idempotent-Replayed"] = "true"
    return response


def _idempotency_key(request: Request) -> str | None:
    key = request.META.get(IDEMPOTENCY_HEADER)
    return None if key is None else str(key)


def _require_results_scope(creds: ApiCredentials, data: Mapping[str, Any]) -> None:
    if (data.get("judgments") or data.get("results")) and not creds.has_scope("results:write"):
        raise ApiError(
            Reason.SCOPE_DENIED,
            "judgments and results need the scope results:write",
            details={"required_scope": "results:write"},
        )


_BOUNDED_RESPONSES: Final = {
    200: OpenApiResponse(VerificationResponseSerializer, description="finished within wait_ms"),
    202: OpenApiResponse(VerificationResponseSerializer, description="not finished within wait_ms: poll the Location"),
}


class VerificationsView(ApiView):
    required_scopes = {"POST": "verifications:write", "GET": "verifications:read"}

    @extend_schema(
        operation_id="verifications_submit",
        summary="Submit work for verification (bounded sync)",
        description=(
            "The subject is the task: its current cycle and that cycle's accepted contract are the server's. "
            "Evidence is bound to the contract's symbols by id (from `POST /v1/evidence`) or inline (standard base64, "
            "at most 1 MiB decoded per item). `judgments` (semantic workers) and `results` (external verifiers) need "
            "the `results:write` scope; their authority comes from the token's actor, never from the body. "
            "`Idempotency-Key`: the same key and body give the same verification; the same key with another body "
            "is refused (409 `idempotency-conflict`). The run is awaited up to `wait_ms` (0–30000): 200 with the "
            "result when it finished, else 202 with `Location`. `submission_hash` is the sha256 of the RFC 8785 "
            "bytes of the body without `wait_ms`, each `content_base64` replaced by the sha256 of its bytes. "
            + scopes_text("verifications:write")
        ),
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                required=False,
                description="1-200 printable ASCII characters, unique per actor",
            )
        ],
        request=VerificationRequestSerializer,
        responses={**_BOUNDED_RESPONSES, **error_responses(*WRITE_ERRORS, 409)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        write = write_of(request, VerificationRequestSerializer)
        _require_results_scope(write.creds, write.data)
        task = task_or_404(write.data["task"])
        verification, created = submit_services.verification_submit(
            actor=write.actor,
            token=write.token,
            task=task,
            body=submission_from_validated(write.raw, write.data),  # typed and validated: the one layer (issue 13)
            idempotency_key=_idempotency_key(request),
        )
        return bounded_response(verification, wait_ms=write.data.get("wait_ms", 0), created=created)

    @extend_schema(
        operation_id="verifications_list",
        summary="List verifications (newest first, cursor pagination)",
        description=scopes_text("verifications:read") + " A portal session of a reviewer, manager or admin also may.",
        parameters=[VerificationListQuerySerializer],
        responses={200: VerificationPageSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        creds = credentials(request)
        query = VerificationListQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = dict(query.validated_data)
        cursor = params.pop("cursor", None)
        limit = params.pop("limit", DEFAULT_PAGE)
        filters = {k: (("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in params.items()}
        now = timezone.now()  # one instant for the filters and the reads (SPEC §3)
        rows, next_cursor = run_selectors.verification_list(
            actor=creds.actor, filters=filters, cursor=cursor, limit=limit, now=now
        )
        # The page's heads in one query, and the runs its decided rows superseded in one more: not one per row.
        heads = trust_selectors.heads_of([v.pk for v in rows])
        decided = [pk for pk, head in heads.items() if head.kind == ReceiptKind.DECISION]
        automated = run_selectors.latest_automated_of(decided)
        views = [
            verification_view(v, now=now, head=heads.get(v.pk), automated=automated.get(v.pk, run_selectors.UNREAD))
            for v in rows
        ]
        page = {"results": views, "next_cursor": next_cursor}
        return Response(VerificationPageSerializer(page).data)


class VerificationDetailView(ApiView):
    required_scopes = {"GET": "verifications:read"}

    @extend_schema(
        operation_id="verifications_get",
        summary="A verification's result, resolved now",
        description=(
            "The second seed's shape. A PENDING check past its deadline reads as its expiry verdict "
            "(`pending-expired`) while its receipt still says PENDING. " + scopes_text("verifications:read")
        ),
        responses={200: VerificationResponseSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request: Request, verification_id: str) -> Response:
        credentials(request)
        found = run_selectors.verification_and_head(verification_id)  # the row and its head: one round trip
        if found is None or found[0].task_id is None:
            raise verification_not_found(verification_id)
        return Response(_view_of(*found))


class VerificationResultsView(ApiView):
    required_scopes = {"POST": "results:write"}

    @extend_schema(
        operation_id="verifications_deliver_result",
        summary="Deliver the result a PENDING criterion awaits",
        description=(
            "A semantic worker sends a judgment (`outcome`, ...), an external verifier a verdict. Appends a receipt "
            "(kind `result`) superseding the head. Refused: 403 `actor-cannot-author-result`, 409 `not-pending`, 409 "
            "`pending-expired` (after the deadline). " + scopes_text("results:write")
        ),
        request=RESULT_REQUEST,
        responses={200: VerificationResponseSerializer, **error_responses(*WRITE_ERRORS, 409)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, verification_id: str) -> Response:
        write = write_of(request, ResultRequestSerializer)
        verification = verification_or_404(verification_id)
        result_services.result_deliver(
            actor=write.actor,
            token=write.token,
            verification=verification,
            criterion_id=write.data["criterion"],
            body=write.raw,
        )
        verification.refresh_from_db()
        return Response(_view_of(verification))


class VerificationEvidenceView(ApiView):
    required_scopes = {"POST": "verifications:write"}

    @extend_schema(
        operation_id="verifications_add_evidence",
        summary="More evidence for a verification waiting for it (a new verification)",
        description=(
            "Runs a new verification of the same subject with the old bindings and these (a symbol bound again is "
            "replaced); its first receipt supersedes the old head. 409 `not-awaiting-evidence` when the verification "
            "met its contract, is still running or was superseded. Bounded sync as for a submission; `Location` names "
            "the new verification. Only its submitter or a worker of its cycle (403 `not-a-worker-of-this-cycle`). "
            + scopes_text("verifications:write")
        ),
        request=MoreEvidenceRequestSerializer,
        responses={**_BOUNDED_RESPONSES, **error_responses(*WRITE_ERRORS, 409)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, verification_id: str) -> Response:
        write = write_of(request, MoreEvidenceRequestSerializer)
        verification = verification_or_404(verification_id)
        created = submit_services.verification_add_evidence(
            actor=write.actor,
            token=write.token,
            verification=verification,
            body=submission_from_validated(write.raw, write.data),
        )
        return bounded_response(created, wait_ms=write.data.get("wait_ms", 0), created=True)

"""The API's views (STYLE §10): authenticate (the token), check the scope, validate the body, call ONE service,
render. Every fact about who did what is the token's (SPEC §1); the body only says what.

Bounded sync (``wait_ms``): a submission's run is enqueued when its transaction commits (eagerly, in this process,
without a broker). The view then reads the verification until it is finished (``succeeded`` or ``failed``) or
``wait_ms`` has passed: 200 with the result, else 202 with ``Location`` to poll.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from verification.api import serializers as s
from verification.api.authentication import ApiCredentials
from verification.api.errors import NO_STORE, ApiError
from verification.api.permissions import credentials
from verification.evidence import selectors as evidence_selectors
from verification.evidence import services as evidence_services
from verification.evidence.models import Evidence
from verification.kernel.criteria import rubric_hash
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.runs import run_signal
from verification.runs import selectors as run_selectors
from verification.runs.models import Rubric, Task, Verification
from verification.runs.services import rubrics as rubric_services
from verification.runs.services import tasks as task_services
from verification.runs.services import verifications as verification_services

FINISHED: Final = frozenset({"succeeded", "failed"})
POLL_FIRST_S: Final = 0.02
POLL_MAX_S: Final = 0.25
IDEMPOTENCY_HEADER: Final = "HTTP_IDEMPOTENCY_KEY"
DEFAULT_PAGE: Final = 50
EVIDENCE_OPTIONS: Final = (
    "media_type", "evidence_type", "mutability", "collected_at", "max_age_seconds", "expires_at", "custody"
)
DEFAULT_EVENTS: Final = 100


# --- documentation helpers -------------------------------------------------------------------------------------------


def _errors(*statuses: int) -> dict[int, OpenApiResponse]:
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
    return {code: OpenApiResponse(s.ErrorResponseSerializer, description=words[code]) for code in statuses}


WRITE_ERRORS: Final = (400, 401, 403, 404, 413, 415, 422)
#: Writes take an API token only: a portal session may read, never write (the token names the actor, SPEC §1).
TOKEN_ONLY: Final = [{"bearerAuth": []}]
READ_ERRORS: Final = (400, 401, 403, 404)


def _scopes_text(scope: str) -> str:
    return f"Needs the `{scope}` scope."


# --- the base view ----------------------------------------------------------------------------------------------------


class ApiView(APIView):
    """``required_scopes`` maps each method to its scope (``permissions.HasScope``); answers are never cached."""

    required_scopes: ClassVar[Mapping[str, str]] = {}
    metadata_class = None  # no OPTIONS introspection: the schema is at /api/schema/

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        if not response.has_header("Cache-Control"):
            response["Cache-Control"] = NO_STORE
        return response


def _validated(request: Request, serializer_class: type[serializers.Serializer]) -> tuple[Any, dict[str, Any]]:  # type: ignore[type-arg]
    """The body as parsed (what services hash) and as validated (typed values)."""
    raw = request.data
    serializer = serializer_class(data=raw)
    serializer.is_valid(raise_exception=True)
    return raw, dict(serializer.validated_data)


def _task(task_id: str, *, field: str = "task") -> Task:
    task = run_selectors.task_get(task_id)
    if task is None:
        raise ApiError(Reason.NOT_FOUND, f"no task {task_id!r}", details={field: task_id})
    return task


def _verification(verification_id: str) -> Verification:
    verification = run_selectors.verification_get(verification_id)
    if verification is None or verification.task_id is None:
        raise ApiError(
            Reason.NOT_FOUND, f"no verification {verification_id!r}", details={"verification_id": verification_id}
        )
    return verification


def _evidence(evidence_id: str) -> Evidence:
    evidence = evidence_selectors.evidence_get(evidence_id)
    if evidence is None:
        raise ApiError(Reason.NOT_FOUND, f"no evidence {evidence_id!r}", details={"evidence_id": evidence_id})
    return evidence


def _created(serializer: serializers.Serializer) -> Response:  # type: ignore[type-arg]
    return Response(serializer.data, status=201)


# --- rubrics ----------------------------------------------------------------------------------------------------------


class RubricsView(ApiView):
    required_scopes = {"POST": "rubrics:write"}

    @extend_schema(
        operation_id="rubrics_register",
        summary="Register a rubric",
        description=(
            "Registers a rubric and returns its `rubric_hash` (sha256 hex of the canonical JSON as sent) and the "
            "falsifiability witnesses the registrar ran. Obligations that cannot fail are refused "
            "(422 `obligation-not-falsifiable`, `details.sub_reason`). Registering the same document again returns "
            "the stored rubric (200). " + _scopes_text("rubrics:write")
        ),
        request=s.RubricRequestSerializer,
        responses={201: s.RubricResponseSerializer, 200: s.RubricResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        creds = credentials(request)
        raw, _ = _validated(request, s.RubricRequestSerializer)
        known = _registered_already(raw)
        rubric = rubric_services.rubric_register(actor=creds.actor, document=raw)
        body = s.RubricResponseSerializer(
            {
                "rubric_hash": rubric.rubric_hash,
                "name": rubric.name,
                "criteria": len(raw.get("criteria", ())),
                "witnesses": rubric.witnesses,
                "created": not known,
            }
        ).data
        return Response(body, status=200 if known else 201)


def _registered_already(document: Mapping[str, Any]) -> bool:
    """Whether the document's hash is registered already (200 rather than 201); False when it has no hash."""
    try:
        digest = rubric_hash(document)
    except KernelError:
        return False
    return Rubric.objects.filter(rubric_hash=digest).exists()


# --- tasks, claims, contracts, reopening, cases -----------------------------------------------------------------------


def _task_body(task: Task) -> dict[str, Any]:
    return s.TaskResponseSerializer(
        {
            "id": task.pk,
            "title": task.title,
            "external_ref": task.external_ref,
            "cycle": run_selectors.current_cycle(task),
            "created_by": task.created_by.name if task.created_by is not None else None,
            "created_at": task.created_at,
        }
    ).data


class TasksView(ApiView):
    required_scopes = {"POST": "tasks:write"}

    @extend_schema(
        operation_id="tasks_create",
        summary="Create a task",
        description="A task with its first cycle (1). " + _scopes_text("tasks:write"),
        request=s.TaskRequestSerializer,
        responses={201: s.TaskResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        creds = credentials(request)
        _, data = _validated(request, s.TaskRequestSerializer)
        task = task_services.task_create(
            actor=creds.actor, title=data["title"], external_ref=data.get("external_ref", "")
        )
        return Response(_task_body(task), status=201)


class TaskClaimsView(ApiView):
    required_scopes = {"POST": "claims:write"}

    @extend_schema(
        operation_id="tasks_claim",
        summary="Claim a task",
        description=(
            "Records that the token's actor claimed the task in its current cycle (the body is `{}`). The acceptor "
            "of the cycle's contract never claims it (403 `self-contract-acceptance`). " + _scopes_text("claims:write")
        ),
        request=s.EmptySerializer,
        responses={201: s.ClaimResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, task_id: str) -> Response:
        creds = credentials(request)
        _validated(request, s.EmptySerializer)
        task = _task(task_id)
        claim = task_services.claim_record(actor=creds.actor, token=creds.token, task=task)
        return _created(s.ClaimResponseSerializer(claim))


class TaskContractView(ApiView):
    required_scopes = {"POST": "contracts:write"}

    @extend_schema(
        operation_id="tasks_accept_contract",
        summary="Accept a rubric as the contract of the task's current cycle",
        description=(
            "Only the task owner or a contract-owner actor (403 `not-task-owner`); once per cycle (409 "
            "`contract-already-accepted`: reopen to use another rubric); never by a worker of the cycle, a claimant or "
            "a submitter (403 `self-contract-acceptance`). " + _scopes_text("contracts:write")
        ),
        request=s.ContractRequestSerializer,
        responses={201: s.ContractResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, task_id: str) -> Response:
        creds = credentials(request)
        _, data = _validated(request, s.ContractRequestSerializer)
        task = _task(task_id)
        acceptance = task_services.contract_accept(actor=creds.actor, task=task, rubric_hash=data["rubric_hash"])
        return _created(s.ContractResponseSerializer(acceptance))


class TaskReopenView(ApiView):
    required_scopes = {"POST": "tasks:write"}

    @extend_schema(
        operation_id="tasks_reopen",
        summary="Reopen a task (start a new cycle)",
        description=(
            "The new cycle needs its own contract; claims and approvals of earlier cycles do not count. Only the task "
            "owner or a portal admin (403 `not-task-owner`). " + _scopes_text("tasks:write")
        ),
        request=s.EmptySerializer,
        responses={201: s.CycleResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, task_id: str) -> Response:
        creds = credentials(request)
        _validated(request, s.EmptySerializer)
        task = _task(task_id)
        cycle = task_services.task_reopen(actor=creds.actor, task=task)
        return _created(s.CycleResponseSerializer(cycle))


class TaskCasesView(ApiView):
    required_scopes = {"POST": "tasks:write"}

    @extend_schema(
        operation_id="tasks_freeze_case",
        summary="Freeze an evaluation case of a task",
        description=(
            "A semantic judgment is grounded only when bound (`case_digest`) to a frozen case of its task (SPEC §6). "
            "Idempotent on the text. Only the task owner or a contract-owner actor (403 `not-task-owner`). "
            + _scopes_text("tasks:write")
        ),
        request=s.CaseRequestSerializer,
        responses={201: s.CaseResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, task_id: str) -> Response:
        creds = credentials(request)
        _, data = _validated(request, s.CaseRequestSerializer)
        task = _task(task_id)
        case = task_services.case_freeze(actor=creds.actor, task=task, content=data["content"])
        return _created(s.CaseResponseSerializer(case))


# --- links, manifests, baselines -------------------------------------------------------------------------------------


class LinksView(ApiView):
    required_scopes = {"POST": "links:write"}

    @extend_schema(
        operation_id="links_record",
        summary="Report a commit anchoring a task's work (collectors)",
        description=(
            "`committing_actor` names an actor; an unknown name is recorded and counts as unnamed. Only collectors "
            "report links. " + _scopes_text("links:write")
        ),
        request=s.LinkRequestSerializer,
        responses={201: s.LinkResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        creds = credentials(request)
        _, data = _validated(request, s.LinkRequestSerializer)
        task = _task(data["task"])
        link = task_services.link_record(
            actor=creds.actor,
            token=creds.token,
            task=task,
            commit_id=data["commit_id"],
            committing_actor=data["committing_actor"],
            superseded=data.get("superseded", False),
        )
        return _created(s.LinkResponseSerializer(link))


class ManifestsView(ApiView):
    required_scopes = {"POST": "manifests:write"}

    @extend_schema(
        operation_id="manifests_report",
        summary="Report admitted evidence as a task's change manifest",
        description=(
            "Independently observed only when a collector that is neither the producer nor in its boundary reports "
            "it (SPEC §1); otherwise a criterion citing it answers `change-manifest-not-independently-observed`. "
            + _scopes_text("manifests:write")
        ),
        request=s.ManifestRequestSerializer,
        responses={201: s.ManifestResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        creds = credentials(request)
        _, data = _validated(request, s.ManifestRequestSerializer)
        task = _task(data["task"])
        evidence = _evidence(data["evidence_id"])
        manifest = task_services.manifest_report(actor=creds.actor, token=creds.token, task=task, evidence=evidence)
        return _created(s.ManifestResponseSerializer(manifest))


class BaselinesView(ApiView):
    required_scopes = {"POST": "baselines:write"}

    @extend_schema(
        operation_id="baselines_capture",
        summary="Capture a baseline digest of an artifact (collectors)",
        description=(
            "Authoritative only when captured by a collector outside the producer's boundary before the cycle's "
            "first claim (SPEC §1, §9 rail 5); otherwise `unchanged` answers `missing-baseline`. "
            + _scopes_text("baselines:write")
        ),
        request=s.BaselineRequestSerializer,
        responses={201: s.BaselineResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        creds = credentials(request)
        _, data = _validated(request, s.BaselineRequestSerializer)
        task = _task(data["task"])
        baseline = task_services.baseline_capture(
            actor=creds.actor, token=creds.token, task=task, artifact_key=data["artifact_key"], digest=data["digest"]
        )
        return _created(s.BaselineResponseSerializer(baseline))


# --- evidence ---------------------------------------------------------------------------------------------------------


class EvidenceView(ApiView):
    required_scopes = {"POST": "evidence:write"}

    @extend_schema(
        operation_id="evidence_admit",
        summary="Admit evidence",
        description=(
            "Bytes (standard base64, at most 1 MiB decoded) are stored by their sha256. The trust tier is derived by "
            "the server: a detached Ed25519 source signature (`source_signature_base64` + `source_key_id`) that "
            "verifies under a key pinned for `evidence-source` makes the item `source_attested`; one that does not is "
            "refused (422 `source-signature-invalid`). " + _scopes_text("evidence:write")
        ),
        request=s.EvidenceRequestSerializer,
        responses={201: s.EvidenceResponseSerializer, **_errors(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        creds = credentials(request)
        _, data = _validated(request, s.EvidenceRequestSerializer)
        task = _task(data["task"]) if data.get("task") is not None else None
        options = {
            name: data[name]
            for name in EVIDENCE_OPTIONS
            if data.get(name) is not None
        }
        evidence = evidence_services.evidence_admit(
            actor=creds.actor,
            token=creds.token,
            content=data["content_base64"],
            task=task,
            source_signature=data.get("source_signature_base64"),
            source_key_id=data.get("source_key_id"),
            **options,
        )
        return _created(s.EvidenceResponseSerializer(evidence))


# --- verifications ----------------------------------------------------------------------------------------------------


def _view_of(verification: Verification) -> dict[str, Any]:
    """The second seed's shape (``run_selectors.verification_view``), resolved now, rendered through its serializer."""
    return s.VerificationResponseSerializer(run_selectors.verification_view(verification, now=timezone.now())).data


def location_of(verification: Verification) -> str:
    return f"/v1/verifications/{verification.pk}"


def wait_for_result(verification: Verification, wait_ms: int) -> tuple[dict[str, Any], bool]:
    """Read the verification until it is finished or ``wait_ms`` has passed: (its view, finished?).

    Woken by the run's announcement (``verification.runs.run_signal``: Redis pub/sub on the broker, or PostgreSQL
    NOTIFY), never by sleeping; only where no channel exists does it read again at growing intervals."""
    deadline = time.monotonic() + wait_ms / 1000
    verification.refresh_from_db()
    view = _view_of(verification)
    if view["status"] in FINISHED or wait_ms <= 0:  # the eager run finished inside this request already
        return view, view["status"] in FINISHED
    pause = POLL_FIRST_S
    with run_signal.subscription(verification.pk) as wait:
        while True:
            verification.refresh_from_db()  # after subscribing: a commit before it is seen here, one after wakes us
            view = _view_of(verification)
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
    200: OpenApiResponse(s.VerificationResponseSerializer, description="finished within wait_ms"),
    202: OpenApiResponse(
        s.VerificationResponseSerializer, description="not finished within wait_ms: poll the Location"
    ),
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
            + _scopes_text("verifications:write")
        ),
        parameters=[
            OpenApiParameter(
                "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
                description="1-200 printable ASCII characters, unique per actor",
            )
        ],
        request=s.VerificationRequestSerializer,
        responses={**_BOUNDED_RESPONSES, **_errors(*WRITE_ERRORS, 409)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        creds = credentials(request)
        raw, data = _validated(request, s.VerificationRequestSerializer)
        _require_results_scope(creds, data)
        task = _task(data["task"])
        verification, created = verification_services.verification_submit(
            actor=creds.actor,
            token=creds.token,
            task=task,
            body=s.submission_from_validated(raw, data),  # typed and validated: the one layer (issue 13)
            idempotency_key=_idempotency_key(request),
        )
        return bounded_response(verification, wait_ms=data.get("wait_ms", 0), created=created)

    @extend_schema(
        operation_id="verifications_list",
        summary="List verifications (newest first, cursor pagination)",
        description=_scopes_text("verifications:read") + " A portal session of a reviewer, manager or admin also may.",
        parameters=[s.VerificationListQuerySerializer],
        responses={200: s.VerificationPageSerializer, **_errors(*READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        creds = credentials(request)
        query = s.VerificationListQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = dict(query.validated_data)
        cursor = params.pop("cursor", None)
        limit = params.pop("limit", DEFAULT_PAGE)
        filters = {k: (("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in params.items()}
        now = timezone.now()  # one instant for the filters and the reads (SPEC §3)
        rows, next_cursor = run_selectors.verification_list(
            actor=creds.actor, filters=filters, cursor=cursor, limit=limit, now=now
        )
        page = {"results": [run_selectors.verification_view(v, now=now) for v in rows], "next_cursor": next_cursor}
        return Response(s.VerificationPageSerializer(page).data)


class VerificationDetailView(ApiView):
    required_scopes = {"GET": "verifications:read"}

    @extend_schema(
        operation_id="verifications_get",
        summary="A verification's result, resolved now",
        description=(
            "The second seed's shape. A PENDING check past its deadline reads as its expiry verdict "
            "(`pending-expired`) while its receipt still says PENDING. " + _scopes_text("verifications:read")
        ),
        responses={200: s.VerificationResponseSerializer, **_errors(*READ_ERRORS)},
    )
    def get(self, request: Request, verification_id: str) -> Response:
        credentials(request)
        return Response(_view_of(_verification(verification_id)))


class VerificationResultsView(ApiView):
    required_scopes = {"POST": "results:write"}

    @extend_schema(
        operation_id="verifications_deliver_result",
        summary="Deliver the result a PENDING criterion awaits",
        description=(
            "A semantic worker sends a judgment (`outcome`, ...), an external verifier a verdict. Appends a receipt "
            "(kind `result`) superseding the head. Refused: 403 `actor-cannot-author-result`, 409 `not-pending`, 409 "
            "`pending-expired` (after the deadline). " + _scopes_text("results:write")
        ),
        request=s.RESULT_REQUEST,
        responses={200: s.VerificationResponseSerializer, **_errors(*WRITE_ERRORS, 409)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, verification_id: str) -> Response:
        creds = credentials(request)
        raw, data = _validated(request, s.ResultRequestSerializer)
        verification = _verification(verification_id)
        verification_services.result_deliver(
            actor=creds.actor, token=creds.token, verification=verification, criterion_id=data["criterion"], body=raw
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
            + _scopes_text("verifications:write")
        ),
        request=s.MoreEvidenceRequestSerializer,
        responses={**_BOUNDED_RESPONSES, **_errors(*WRITE_ERRORS, 409)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, verification_id: str) -> Response:
        creds = credentials(request)
        raw, data = _validated(request, s.MoreEvidenceRequestSerializer)
        verification = _verification(verification_id)
        created = verification_services.verification_add_evidence(
            actor=creds.actor, token=creds.token, verification=verification, body=s.submission_from_validated(raw, data)
        )
        return bounded_response(created, wait_ms=data.get("wait_ms", 0), created=True)


# --- events -----------------------------------------------------------------------------------------------------------


class EventsView(ApiView):
    required_scopes = {"GET": "events:read"}

    @extend_schema(
        operation_id="events_list",
        summary="The ordered feed of state changes",
        description=(
            "Events after the cursor `after` (an event id), oldest first: `verification.finished`, "
            "`verification.pending`, `verification.failed`, `verification.decided`, `result.received`, "
            "`finding.raised`. Pass `next_after` back as `after` to continue; it stays put when nothing is new. "
            + _scopes_text("events:read")
        ),
        parameters=[s.EventsQuerySerializer],
        responses={200: s.EventPageSerializer, **_errors(*READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        credentials(request)
        query = s.EventsQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        after = query.validated_data.get("after")
        limit = query.validated_data.get("limit", DEFAULT_EVENTS)
        events = run_selectors.events_after(cursor=after, limit=limit)
        page = {
            "events": [
                {
                    "id": e.id,
                    "kind": e.kind,
                    "verification_id": e.verification_id,
                    "created_at": e.created_at,
                    "payload": e.payload,
                }
                for e in events
            ],
            "next_after": events[-1].id if events else (after or 0),
        }
        return Response(s.EventPageSerializer(page).data)


__all__ = [
    "BaselinesView",
    "EventsView",
    "EvidenceView",
    "LinksView",
    "ManifestsView",
    "RubricsView",
    "TaskCasesView",
    "TaskClaimsView",
    "TaskContractView",
    "TaskReopenView",
    "TasksView",
    "VerificationDetailView",
    "VerificationEvidenceView",
    "VerificationResultsView",
    "VerificationsView",
]

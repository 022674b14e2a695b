"""``/v1/tasks`` and what hangs on a task: claims, contract, reopen, frozen cases, links, manifests, baselines."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from verification.api.serializers.base import EmptySerializer
from verification.api.serializers.tasks import (
    BaselineRequestSerializer,
    BaselineResponseSerializer,
    CaseRequestSerializer,
    CaseResponseSerializer,
    ClaimResponseSerializer,
    ContractRequestSerializer,
    ContractResponseSerializer,
    CycleResponseSerializer,
    LinkRequestSerializer,
    LinkResponseSerializer,
    ManifestRequestSerializer,
    ManifestResponseSerializer,
    TaskRequestSerializer,
    TaskResponseSerializer,
)
from verification.api.views.common import (
    TOKEN_ONLY,
    WRITE_ERRORS,
    ApiView,
    created_response,
    error_responses,
    evidence_or_404,
    scopes_text,
    task_or_404,
    write_of,
)
from verification.runs import selectors as run_selectors
from verification.runs.models import Task
from verification.runs.services import tasks as task_services


def _task_body(task: Task) -> dict[str, Any]:
    return TaskResponseSerializer(
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
        description="A task with its first cycle (1). " + scopes_text("tasks:write"),
        request=TaskRequestSerializer,
        responses={201: TaskResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        write = write_of(request, TaskRequestSerializer)
        task = task_services.task_create(
            actor=write.actor, title=write.data["title"], external_ref=write.data.get("external_ref", "")
        )
        return Response(_task_body(task), status=201)


class TaskClaimsView(ApiView):
    required_scopes = {"POST": "claims:write"}

    @extend_schema(
        operation_id="tasks_claim",
        summary="Claim a task",
        description=(
            "Records that the token's actor claimed the task in its current cycle (the body is `{}`). The acceptor "
            "of the cycle's contract never claims it (403 `self-contract-acceptance`). " + scopes_text("claims:write")
        ),
        request=EmptySerializer,
        responses={201: ClaimResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, task_id: str) -> Response:
        write = write_of(request, EmptySerializer)
        task = task_or_404(task_id)
        claim = task_services.claim_record(actor=write.actor, token=write.token, task=task)
        return created_response(ClaimResponseSerializer(claim))


class TaskContractView(ApiView):
    required_scopes = {"POST": "contracts:write"}

    @extend_schema(
        operation_id="tasks_accept_contract",
        summary="Accept a rubric as the contract of the task's current cycle",
        description=(
            "Only the task owner or a contract-owner actor (403 `not-task-owner`); once per cycle (409 "
            "`contract-already-accepted`: reopen to use another rubric); never by a worker of the cycle, a claimant or "
            "a submitter (403 `self-contract-acceptance`). " + scopes_text("contracts:write")
        ),
        request=ContractRequestSerializer,
        responses={201: ContractResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, task_id: str) -> Response:
        write = write_of(request, ContractRequestSerializer)
        task = task_or_404(task_id)
        acceptance = task_services.contract_accept(actor=write.actor, task=task, rubric_hash=write.data["rubric_hash"])
        return created_response(ContractResponseSerializer(acceptance))


class TaskReopenView(ApiView):
    required_scopes = {"POST": "tasks:write"}

    @extend_schema(
        operation_id="tasks_reopen",
        summary="Reopen a task (start a new cycle)",
        description=(
            "The new cycle needs its own contract; claims and approvals of earlier cycles do not count. Only the task "
            "owner or a portal admin (403 `not-task-owner`). " + scopes_text("tasks:write")
        ),
        request=EmptySerializer,
        responses={201: CycleResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, task_id: str) -> Response:
        write = write_of(request, EmptySerializer)
        task = task_or_404(task_id)
        cycle = task_services.task_reopen(actor=write.actor, task=task)
        return created_response(CycleResponseSerializer(cycle))


class TaskCasesView(ApiView):
    required_scopes = {"POST": "tasks:write"}

    @extend_schema(
        operation_id="tasks_freeze_case",
        summary="Freeze an evaluation case of a task",
        description=(
            "A semantic judgment is grounded only when bound (`case_digest`) to a frozen case of its task (SPEC §6). "
            "Idempotent on the text. Only the task owner or a contract-owner actor (403 `not-task-owner`). "
            + scopes_text("tasks:write")
        ),
        request=CaseRequestSerializer,
        responses={201: CaseResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request, task_id: str) -> Response:
        write = write_of(request, CaseRequestSerializer)
        task = task_or_404(task_id)
        case = task_services.case_freeze(actor=write.actor, task=task, content=write.data["content"])
        return created_response(CaseResponseSerializer(case))


class LinksView(ApiView):
    required_scopes = {"POST": "links:write"}

    @extend_schema(
        operation_id="links_record",
        summary="Report a commit anchoring a task's work (collectors)",
        description=(
            "`committing_actor` names an actor; an unknown name is recorded and counts as unnamed. Only collectors "
            "report links. " + scopes_text("links:write")
        ),
        request=LinkRequestSerializer,
        responses={201: LinkResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        write = write_of(request, LinkRequestSerializer)
        task = task_or_404(write.data["task"])
        link = task_services.link_record(
            actor=write.actor,
            token=write.token,
            task=task,
            commit_id=write.data["commit_id"],
            committing_actor=write.data["committing_actor"],
            superseded=write.data.get("superseded", False),
        )
        return created_response(LinkResponseSerializer(link))


class ManifestsView(ApiView):
    required_scopes = {"POST": "manifests:write"}

    @extend_schema(
        operation_id="manifests_report",
        summary="Report admitted evidence as a task's change manifest",
        description=(
            "Independently observed only when a collector that is neither the producer nor in its boundary reports "
            "it (SPEC §1); otherwise a criterion citing it answers `change-manifest-not-independently-observed`. "
            + scopes_text("manifests:write")
        ),
        request=ManifestRequestSerializer,
        responses={201: ManifestResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        write = write_of(request, ManifestRequestSerializer)
        task = task_or_404(write.data["task"])
        evidence = evidence_or_404(write.data["evidence_id"])
        manifest = task_services.manifest_report(actor=write.actor, token=write.token, task=task, evidence=evidence)
        return created_response(ManifestResponseSerializer(manifest))


class BaselinesView(ApiView):
    required_scopes = {"POST": "baselines:write"}

    @extend_schema(
        operation_id="baselines_capture",
        summary="Capture a baseline digest of an artifact (collectors)",
        description=(
            "Authoritative only when captured by a collector outside the producer's boundary before the cycle's "
            "first claim (SPEC §1, §9 rail 5); otherwise `unchanged` answers `missing-baseline`. "
            + scopes_text("baselines:write")
        ),
        request=BaselineRequestSerializer,
        responses={201: BaselineResponseSerializer, **error_responses(*WRITE_ERRORS)},
        auth=TOKEN_ONLY,
    )
    def post(self, request: Request) -> Response:
        write = write_of(request, BaselineRequestSerializer)
        task = task_or_404(write.data["task"])
        baseline = task_services.baseline_capture(
            actor=write.actor,
            token=write.token,
            task=task,
            artifact_key=write.data["artifact_key"],
            digest=write.data["digest"],
        )
        return created_response(BaselineResponseSerializer(baseline))

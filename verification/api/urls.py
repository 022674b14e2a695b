"""URLs of the JSON API (``/v1/``), its OpenAPI schema and docs page; included by ``reviewportal/urls.py``.

Ids in paths are ``<str:>``: an id that is not a UUID gets the API's JSON 404, never Django's HTML page, and so does
any other path under ``/v1/``.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import path, re_path

from verification.api import schema
from verification.api.errors import NO_STORE, error_body
from verification.api.views import events, evidence, rubrics, tasks, verifications
from verification.kernel.reasons import Reason

urlpatterns = [
    path("api/schema/", schema.SchemaView.as_view(), name="api-schema"),
    path("api/docs/", schema.DocsView.as_view(), name="api-docs"),
    path("v1/rubrics", rubrics.RubricsView.as_view(), name="api-rubrics"),
    path("v1/tasks", tasks.TasksView.as_view(), name="api-tasks"),
    path("v1/tasks/<str:task_id>/claims", tasks.TaskClaimsView.as_view(), name="api-task-claims"),
    path("v1/tasks/<str:task_id>/contract", tasks.TaskContractView.as_view(), name="api-task-contract"),
    path("v1/tasks/<str:task_id>/reopen", tasks.TaskReopenView.as_view(), name="api-task-reopen"),
    path("v1/tasks/<str:task_id>/cases", tasks.TaskCasesView.as_view(), name="api-task-cases"),
    path("v1/links", tasks.LinksView.as_view(), name="api-links"),
    path("v1/manifests", tasks.ManifestsView.as_view(), name="api-manifests"),
    path("v1/baselines", tasks.BaselinesView.as_view(), name="api-baselines"),
    path("v1/evidence", evidence.EvidenceView.as_view(), name="api-evidence"),
    path("v1/verifications", verifications.VerificationsView.as_view(), name="api-verifications"),
    path(
        "v1/verifications/<str:verification_id>",
        verifications.VerificationDetailView.as_view(),
        name="api-verification",
    ),
    path(
        "v1/verifications/<str:verification_id>/results",
        verifications.VerificationResultsView.as_view(),
        name="api-verification-results",
    ),
    path(
        "v1/verifications/<str:verification_id>/evidence",
        verifications.VerificationEvidenceView.as_view(),
        name="api-verification-evidence",
    ),
    path("v1/events", events.EventsView.as_view(), name="api-events"),
]


def unknown_endpoint(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any other path under /v1/: the API's 404 (routed last, after the proof endpoints)."""
    response = JsonResponse(error_body(Reason.NOT_FOUND, "no such endpoint", {"path": f"/v1/{rest}"}), status=404)
    response["Cache-Control"] = NO_STORE
    return response


fallback_patterns = [re_path(r"^v1/(?P<rest>.*)$", unknown_endpoint, name="api-unknown")]

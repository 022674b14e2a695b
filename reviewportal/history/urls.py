"""URLs of the history, findings and dashboards (namespace ``history``); included by ``reviewportal/urls.py``."""

from __future__ import annotations

from django.urls import path, re_path

from reviewportal.history import views
from reviewportal.prg import post_or_page

app_name = "history"

urlpatterns = [
    path("history/", views.history, name="history"),
    path("history/export.csv", views.export_csv, name="export-csv"),
    path("history/export.jsonl", views.export_jsonl, name="export-jsonl"),
    path("history/subject/<uuid:task_id>/", views.timeline, name="timeline"),
    path("history/verification/<uuid:verification_id>/bundle.json", views.bundle, name="bundle"),
    # The hook every receipt links to: the admin area's chain view once it is routed (views.CHAIN_VIEW).
    re_path(
        r"^history/verification/(?P<verification_id>[0-9a-f-]{36})/receipt/(?P<content_hash>[0-9a-f]{64})/chain$",
        views.chain,
        name="chain",
    ),
    path("findings/", views.findings, name="findings"),
    path("findings/<int:finding_id>/", views.finding, name="finding"),
    path(
        "findings/<int:finding_id>/acknowledge",
        post_or_page(views.finding_acknowledge_view, "history:finding", keep=("finding_id",)),
        name="finding-acknowledge",
    ),
    path(
        "findings/<int:finding_id>/close",
        post_or_page(views.finding_close_view, "history:finding", keep=("finding_id",)),
        name="finding-close",
    ),
    path("dashboards/", views.dashboards, name="dashboards"),
    path("dashboards/<slug:panel>/", views.dashboard, name="dashboard"),
]

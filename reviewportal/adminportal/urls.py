"""The admin pages' URLs (namespace ``adminportal``); included by ``reviewportal/urls.py``.

``/keys/`` is public (no sign-in): the portal's fingerprints, for anyone to confirm out of band. Everything else is
under ``/admin/`` (Django's own admin is not installed: no path here edits or deletes a receipt, a pin entry, a
finding event or a security-log entry).
"""

from __future__ import annotations

from django.urls import path

from reviewportal.adminportal import views
from reviewportal.prg import post_or_page

app_name = "adminportal"

urlpatterns = [
    path("keys/", views.public_keys, name="public-keys"),
    path("admin/", views.home, name="home"),
    # keys and the pin log
    path("admin/keys/", views.keys_page, name="keys"),
    path("admin/keys/pin", post_or_page(views.key_pin, "adminportal:keys"), name="key-pin"),
    path("admin/keys/rotate", views.key_rotate, name="key-rotate"),
    path("admin/keys/<str:key_id>/unpin", views.key_unpin, name="key-unpin"),
    path("admin/keys/<str:key_id>/revoke", views.key_revoke, name="key-revoke"),
    # receipt chains and the audit
    path("admin/verifications/<uuid:verification_id>/chain", views.chain, name="chain"),
    path("admin/verify-proof", views.verify_proof, name="verify-proof"),
    path("admin/audit/", views.audit_page, name="audit"),
    path("admin/audit/run", post_or_page(views.audit_run, "adminportal:audit"), name="audit-run"),
    path("admin/operations/", views.operations, name="operations"),
    # evidence
    path("admin/evidence/", views.evidence_list, name="evidence"),
    path("admin/evidence/<uuid:evidence_id>/", views.evidence_detail, name="evidence-detail"),
    path("admin/evidence/<uuid:evidence_id>/redact", views.evidence_redact, name="evidence-redact"),
    # users, actors and API tokens
    path("admin/users/", views.users_page, name="users"),
    path("admin/users/new", views.user_create, name="user-create"),
    path("admin/users/<int:user_id>/", views.user_detail, name="user-detail"),
    path(
        "admin/users/<int:user_id>/roles",
        post_or_page(views.user_roles, "adminportal:user-detail", keep=("user_id",)),
        name="user-roles",
    ),
    path("admin/users/<int:user_id>/deactivate", views.user_deactivate, name="user-deactivate"),
    path(
        "admin/users/<int:user_id>/reactivate",
        post_or_page(views.user_reactivate, "adminportal:user-detail", keep=("user_id",)),
        name="user-reactivate",
    ),
    path("admin/tokens/", views.tokens_page, name="tokens"),
    path("admin/tokens/new", post_or_page(views.token_create, "adminportal:tokens"), name="token-create"),
    path("admin/tokens/<int:token_id>/revoke", views.token_revoke, name="token-revoke"),
    path("admin/actors/new", post_or_page(views.actor_create, "adminportal:tokens"), name="actor-create"),
    # the security log
    path("admin/security-log/", views.security_log_page, name="security-log"),
    path("admin/security-log.csv", views.security_log_csv, name="security-log-csv"),
]

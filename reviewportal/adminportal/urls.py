"""The admin pages' URLs (namespace ``adminportal``); included by ``reviewportal/urls.py``.

``/keys/`` is public (no sign-in): the portal's fingerprints, for anyone to confirm out of band. Everything else is
under ``/admin/`` (Django's own admin is not installed: no path here edits or deletes a receipt, a pin entry, a
finding event or a security-log entry).
"""

from __future__ import annotations

from django.urls import path

from reviewportal.adminportal import views, views_chains, views_evidence, views_keys, views_log, views_users
from reviewportal.prg import post_or_page

app_name = "adminportal"

urlpatterns = [
    path("keys/", views.public_keys, name="public-keys"),
    path("admin/", views.home, name="home"),
    # keys and the pin log
    path("admin/keys/", views_keys.keys_page, name="keys"),
    path("admin/keys/pin", post_or_page(views_keys.key_pin, "adminportal:keys"), name="key-pin"),
    path("admin/keys/rotate", views_keys.key_rotate, name="key-rotate"),
    path("admin/keys/<str:key_id>/unpin", views_keys.key_unpin, name="key-unpin"),
    path("admin/keys/<str:key_id>/revoke", views_keys.key_revoke, name="key-revoke"),
    # receipt chains and the audit
    path("admin/verifications/<uuid:verification_id>/chain", views_chains.chain, name="chain"),
    path("admin/verify-proof", views_chains.verify_proof, name="verify-proof"),
    path("admin/audit/", views_chains.audit_page, name="audit"),
    path("admin/audit/run", post_or_page(views_chains.audit_run, "adminportal:audit"), name="audit-run"),
    path("admin/operations/", views_chains.operations, name="operations"),
    # evidence
    path("admin/evidence/", views_evidence.evidence_list, name="evidence"),
    path("admin/evidence/<uuid:evidence_id>/", views_evidence.evidence_detail, name="evidence-detail"),
    path("admin/evidence/<uuid:evidence_id>/redact", views_evidence.evidence_redact, name="evidence-redact"),
    # users, actors and API tokens
    path("admin/users/", views_users.users_page, name="users"),
    path("admin/users/new", views_users.user_create, name="user-create"),
    path("admin/users/<int:user_id>/", views_users.user_detail, name="user-detail"),
    path(
        "admin/users/<int:user_id>/roles",
        post_or_page(views_users.user_roles, "adminportal:user-detail", keep=("user_id",)),
        name="user-roles",
    ),
    path("admin/users/<int:user_id>/deactivate", views_users.user_deactivate, name="user-deactivate"),
    path(
        "admin/users/<int:user_id>/reactivate",
        post_or_page(views_users.user_reactivate, "adminportal:user-detail", keep=("user_id",)),
        name="user-reactivate",
    ),
    path("admin/tokens/", views_users.tokens_page, name="tokens"),
    path("admin/tokens/new", post_or_page(views_users.token_create, "adminportal:tokens"), name="token-create"),
    path("admin/tokens/<int:token_id>/revoke", views_users.token_revoke, name="token-revoke"),
    path("admin/actors/new", post_or_page(views_users.actor_create, "adminportal:tokens"), name="actor-create"),
    # the security log
    path("admin/security-log/", views_log.security_log_page, name="security-log"),
    path("admin/security-log.csv", views_log.security_log_csv, name="security-log-csv"),
]

"""URLs of the verification app; included at the root by ``reviewportal/urls.py``."""

from django.urls import path

from verification.api import public_views

app_name = "verification"

urlpatterns = [
    # REST framework views that delegate to views_wellknown / views_proofs, so the OpenAPI schema describes them
    path(".well-known/acretix-verify/keys.json", public_views.KeysView.as_view(), name="jwks"),
    path(".well-known/acretix-verify/revoked.json", public_views.RevokedView.as_view(), name="revoked"),
    # <str:>, not <uuid:>: a malformed id gets the JSON 404 of the API, not Django's HTML page.
    path("v1/verifications/<str:verification_id>/proof", public_views.ProofView.as_view(), name="proof"),
    path(
        "v1/verifications/<str:verification_id>/proof/envelope",
        public_views.ProofEnvelopeView.as_view(),
        name="proof-envelope",
    ),
]

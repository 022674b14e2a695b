"""URLs of the verification app; included at the root by ``reviewportal/urls.py``."""

from django.urls import path

from verification.api import proofs, wellknown

app_name = "verification"

urlpatterns = [
    path(".well-known/acretix-verify/keys.json", wellknown.KeysView.as_view(), name="jwks"),
    path(".well-known/acretix-verify/revoked.json", wellknown.RevokedView.as_view(), name="revoked"),
    # <str:>, not <uuid:>: a malformed id gets the JSON 404 of the API, not Django's HTML page.
    path("v1/verifications/<str:verification_id>/proof", proofs.ProofView.as_view(), name="proof"),
    path(
        "v1/verifications/<str:verification_id>/proof/envelope",
        proofs.ProofEnvelopeView.as_view(),
        name="proof-envelope",
    ),
]

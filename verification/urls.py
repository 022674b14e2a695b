"""URLs of the verification app; included at the root by ``reviewportal/urls.py``."""

from django.urls import path

from verification import views_proofs, views_wellknown

app_name = "verification"

urlpatterns = [
    path(".well-known/acretix-verify/keys.json", views_wellknown.keys_json, name="jwks"),
    path(".well-known/acretix-verify/revoked.json", views_wellknown.revoked_json, name="revoked"),
    # <str:>, not <uuid:>: a malformed id gets the JSON 404 of the API, not Django's HTML page.
    path("v1/verifications/<str:verification_id>/proof", views_proofs.proof, name="proof"),
    path("v1/verifications/<str:verification_id>/proof/envelope", views_proofs.proof_envelope, name="proof-envelope"),
]

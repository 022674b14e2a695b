"""The reviewer queue's URLs (namespace ``portal``); included by ``reviewportal/urls.py``."""

from __future__ import annotations

from django.conf import settings
from django.urls import path

from reviewportal.portal import views

app_name = "portal"

urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("queue/claim-next", views.post_or_page(views.claim_next), name="claim-next"),
    path("queue/awaiting-evidence/", views.awaiting, name="awaiting"),
    path("review/<uuid:verification_id>/", views.review, name="review"),
    path("review/<uuid:verification_id>/claim", views.post_or_page(views.claim), name="claim"),
    path("review/<uuid:verification_id>/release", views.post_or_page(views.release), name="release"),
    path("review/<uuid:verification_id>/renew", views.renew, name="renew"),
    path("review/<uuid:verification_id>/decide", views.post_or_page(views.decide), name="decide"),
    path("review/<uuid:verification_id>/skip", views.post_or_page(views.skip), name="skip"),
    path("csp-report/", views.csp_report, name="csp-report"),
]

if settings.TESTING:
    # A page with an inline script, for the browser test that proves the CSP is enforced (tests/browser).
    urlpatterns.append(path("_testing/csp-canary/", views.csp_canary, name="csp-canary"))

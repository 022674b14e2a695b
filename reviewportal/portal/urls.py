"""The reviewer queue's URLs (namespace ``portal``); included by ``reviewportal/urls.py``."""

from __future__ import annotations

from django.conf import settings
from django.urls import path

from reviewportal.portal import views
from reviewportal.prg import post_or_page

app_name = "portal"
#: An item's action URL reopened by GET goes to the item's page (reviewportal.prg).
KEEP = ("verification_id",)

urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("queue/claim-next", post_or_page(views.claim_next, "portal:queue"), name="claim-next"),
    path("queue/awaiting-evidence/", views.awaiting, name="awaiting"),
    path("review/<uuid:verification_id>/", views.review, name="review"),
    path("review/<uuid:verification_id>/claim", post_or_page(views.claim, "portal:review", keep=KEEP), name="claim"),
    path(
        "review/<uuid:verification_id>/release", post_or_page(views.release, "portal:review", keep=KEEP), name="release"
    ),
    path("review/<uuid:verification_id>/renew", views.renew, name="renew"),
    path("review/<uuid:verification_id>/decide", post_or_page(views.decide, "portal:review", keep=KEEP), name="decide"),
    path("review/<uuid:verification_id>/skip", post_or_page(views.skip, "portal:review", keep=KEEP), name="skip"),
    path("csp-report/", views.csp_report, name="csp-report"),
]

if settings.TESTING:
    # A page with an inline script, for the browser test that proves the CSP is enforced (tests/browser).
    urlpatterns.append(path("_testing/csp-canary/", views.csp_canary, name="csp-canary"))

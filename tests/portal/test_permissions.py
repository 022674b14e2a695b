"""The permission matrix (issue 5 §1): every portal URL as anonymous, no role, reviewer, manager and admin.

Anonymous → 302 to the login page; a signed-in user without the permission → 403; managers read everything and decide
nothing. A completeness check fails when a portal URL is added without a row here.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern

from reviewportal.portal import urls as portal_urls
from tests.portal.conftest import Queue
from verification.reviews.models import ReviewDecision, ReviewLease
from verification.reviews.services.decisions import new_request_key
from verification.trust.models import Receipt

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "nobody", "reviewer", "manager", "admin")

# (url name, method, expected status per role). For POSTs a reviewer and an admin get what the action gives them:
# a redirect after claiming/releasing/skipping; deciding an item they do not hold redirects to the review page, which
# shows the refusal (Post/Redirect/Get, issue 14); renewing one answers 409 (JSON, for portal.js).
MATRIX: list[tuple[str, str, dict[str, int]]] = [
    ("queue", "GET", {"anonymous": 302, "nobody": 403, "reviewer": 200, "manager": 200, "admin": 200}),
    ("awaiting", "GET", {"anonymous": 302, "nobody": 403, "reviewer": 200, "manager": 200, "admin": 200}),
    ("review", "GET", {"anonymous": 302, "nobody": 403, "reviewer": 200, "manager": 200, "admin": 200}),
    ("claim-next", "POST", {"anonymous": 302, "nobody": 403, "reviewer": 302, "manager": 403, "admin": 302}),
    ("claim", "POST", {"anonymous": 302, "nobody": 403, "reviewer": 302, "manager": 403, "admin": 302}),
    ("release", "POST", {"anonymous": 302, "nobody": 403, "reviewer": 302, "manager": 403, "admin": 302}),
    ("renew", "POST", {"anonymous": 302, "nobody": 403, "reviewer": 409, "manager": 403, "admin": 409}),
    ("decide", "POST", {"anonymous": 302, "nobody": 403, "reviewer": 302, "manager": 403, "admin": 302}),
    ("skip", "POST", {"anonymous": 302, "nobody": 403, "reviewer": 302, "manager": 403, "admin": 302}),
    ("csp-report", "POST", {"anonymous": 204, "nobody": 204, "reviewer": 204, "manager": 204, "admin": 204}),
]
#: Routed only under settings.TESTING (the browser test's CSP canary): anyone may load it.
TEST_ONLY = {"csp-canary"}


def _url(name: str, verification_id: Any) -> str:
    from django.urls import reverse

    if name in ("review", "claim", "release", "renew", "decide", "skip"):
        return reverse(f"portal:{name}", kwargs={"verification_id": verification_id})
    return reverse(f"portal:{name}")


@pytest.fixture
def clients(make_user: Any) -> dict[str, Client]:
    out = {"anonymous": Client()}
    for role in ROLES[1:]:
        client = Client()
        client.force_login(make_user(f"user-{role}", None if role == "nobody" else role))
        out[role] = client
    return out


def test_every_portal_url_is_in_the_matrix() -> None:
    names = {p.name for p in portal_urls.urlpatterns if isinstance(p, URLPattern)}
    assert names == {name for name, _, _ in MATRIX} | TEST_ONLY


@pytest.mark.parametrize(("name", "method", "expected"), MATRIX, ids=[f"{m} {n}" for n, m, _ in MATRIX])
@pytest.mark.parametrize("role", ROLES)
def test_the_matrix(
    queue: Queue, clients: dict[str, Client], name: str, method: str, expected: dict[str, int], role: str
) -> None:
    verification = queue.unknown()
    url = _url(name, verification.pk)
    client = clients[role]
    if method == "GET":
        response = client.get(url)
    elif name == "decide":
        response = client.post(url, {"verdict": "FAIL", "rationale": "no", "request_key": new_request_key()})
    elif name == "csp-report":
        response = client.post(url, b'{"csp-report": {}}', content_type="application/csp-report")
    else:
        response = client.post(url)
    assert response.status_code == expected[role], (role, name, response.status_code)
    if role == "anonymous" and expected[role] == 302:
        assert response["Location"].startswith(f"/accounts/login/?next={url}")
    if role in ("manager", "nobody") and method == "POST" and name != "csp-report":
        # Refused before anything happened.
        assert not ReviewLease.objects.exists() and not ReviewDecision.objects.exists()
        assert not Receipt.objects.filter(kind="decision").exists()


@pytest.mark.parametrize("name", ["renew", "csp-report"])
def test_machine_endpoints_are_post_only(queue: Queue, clients: dict[str, Client], name: str) -> None:
    verification = queue.unknown()
    assert clients["reviewer"].get(_url(name, verification.pk)).status_code == 405


@pytest.mark.parametrize("name", ["claim-next", "claim", "release", "decide", "skip"])
@pytest.mark.parametrize("role", ["reviewer", "manager"])
def test_reopening_an_action_url_goes_to_its_page_and_does_nothing(
    queue: Queue, clients: dict[str, Client], name: str, role: str
) -> None:
    """issue 14: a reload or the back button on a POST-only address is the page it belongs to, never a 405."""
    verification = queue.unknown()
    response = clients[role].get(_url(name, verification.pk))
    page = "/queue/" if name == "claim-next" else f"/review/{verification.pk}/"
    assert response.status_code == 302 and response["Location"] == page
    assert not ReviewLease.objects.exists() and not ReviewDecision.objects.exists()


def test_pages_are_get_only(queue: Queue, clients: dict[str, Client]) -> None:
    verification = queue.unknown()
    for name in ("queue", "awaiting", "review"):
        assert clients["reviewer"].post(_url(name, verification.pk)).status_code == 405


def test_every_post_needs_csrf(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    for name in ("claim-next", "claim", "release", "renew", "decide", "skip"):
        assert client.post(_url(name, verification.pk)).status_code == 403, name
    assert not ReviewLease.objects.exists()


def test_an_unknown_verification_is_404(clients: dict[str, Client]) -> None:
    assert clients["manager"].get("/review/00000000-0000-0000-0000-000000000000/").status_code == 404


def test_managers_see_the_queue_without_decision_controls(queue: Queue, clients: dict[str, Client]) -> None:
    verification = queue.unknown()
    page = clients["manager"].get("/queue/").content.decode()
    assert str(verification.pk) in page and "data-claim-next" not in page
    review = clients["manager"].get(f"/review/{verification.pk}/").content.decode()
    assert "data-decision-form" not in review and "data-claim-this" not in review
    reviewer_view = clients["reviewer"].get(f"/review/{verification.pk}/").content.decode()
    assert "data-claim-this" in reviewer_view

"""The permission matrix (issue 6 acceptance): every history, findings and dashboard URL as anonymous, no role,
reviewer, manager and admin.

Anonymous → 302 to the login page; signed in without the permission → 403. Reviewers read the history and the
dashboards (``view_history``) but not findings; managers and admins read everything and may acknowledge or close a
finding. A completeness check fails when a URL is added without a row here.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, reverse

from reviewportal.history import urls as history_urls
from reviewportal.history.views import CHAIN_VIEW
from tests.history.conftest import Story
from verification.reviews.models import FindingEvent

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "nobody", "reviewer", "manager", "admin")
READERS = {"anonymous": 302, "nobody": 403, "reviewer": 200, "manager": 200, "admin": 200}
FINDINGS = {"anonymous": 302, "nobody": 403, "reviewer": 403, "manager": 200, "admin": 200}
# A POST that works redirects back to the finding (302); refused ones are 403 before anything is recorded.
STEPS = {"anonymous": 302, "nobody": 403, "reviewer": 403, "manager": 302, "admin": 302}
# The chain hook redirects everyone who may read the history: to the chain view or proof (admins), or the bundle.
CHAIN = {"anonymous": 302, "nobody": 403, "reviewer": 302, "manager": 302, "admin": 302}

MATRIX: list[tuple[str, str, dict[str, int]]] = [
    ("history", "GET", READERS),
    ("export-csv", "GET", READERS),
    ("export-jsonl", "GET", READERS),
    ("timeline", "GET", READERS),
    ("bundle", "GET", READERS),
    ("chain", "GET", CHAIN),
    ("dashboards", "GET", READERS),
    ("dashboard", "GET", READERS),
    ("findings", "GET", FINDINGS),
    ("finding", "GET", FINDINGS),
    ("finding-acknowledge", "POST", STEPS),
    ("finding-close", "POST", STEPS),
]


def _url(name: str, story: Story) -> str:
    kwargs: dict[str, Any] = {}
    if name == "timeline":
        kwargs = {"task_id": story.task.pk}
    elif name == "bundle":
        kwargs = {"verification_id": story.passed.pk}
    elif name == "chain":
        head = story.passed.receipts.order_by("-seq").first()
        assert head is not None
        kwargs = {"verification_id": str(story.passed.pk), "content_hash": head.content_hash}
    elif name == "dashboard":
        kwargs = {"panel": "backlog"}
    elif name.startswith("finding") and name != "findings":
        kwargs = {"finding_id": story.integrity_finding.pk}
    return reverse(f"history:{name}", kwargs=kwargs or None)


@pytest.fixture
def clients(make_user: Any) -> dict[str, Client]:
    out = {"anonymous": Client()}
    for role in ROLES[1:]:
        client = Client()
        client.force_login(make_user(f"user-{role}", None if role == "nobody" else role))
        out[role] = client
    return out


def test_every_history_url_is_in_the_matrix() -> None:
    names = {p.name for p in history_urls.urlpatterns if isinstance(p, URLPattern)}
    assert names == {name for name, _, _ in MATRIX}


@pytest.mark.parametrize(("name", "method", "expected"), MATRIX, ids=[f"{m} {n}" for n, m, _ in MATRIX])
@pytest.mark.parametrize("role", ROLES)
def test_the_matrix(
    story: Story, clients: dict[str, Client], name: str, method: str, expected: dict[str, int], role: str
) -> None:
    url = _url(name, story)
    events = FindingEvent.objects.count()
    client = clients[role]
    if method == "GET":
        response = client.get(url)
    else:
        response = client.post(url, {"rationale": "seen it; the re-run with the right bytes passed"})
    assert response.status_code == expected[role], (role, name, response.status_code)
    if role == "anonymous" and expected[role] == 302:
        assert response["Location"].startswith(f"/accounts/login/?next={url}")
    if method == "POST":
        recorded = FindingEvent.objects.count() - events
        assert recorded == (1 if expected[role] == 302 and role != "anonymous" else 0), (role, name)
        if recorded:
            event = FindingEvent.objects.order_by("-id").first()
            assert event is not None and event.actor is not None and event.actor.name == f"user:user-{role}"


def test_the_chain_hook_sends_admins_to_the_proof_and_others_to_the_bundle(
    story: Story, clients: dict[str, Client]
) -> None:
    url = _url("chain", story)
    head = story.passed.receipts.order_by("-seq").first()
    assert head is not None
    try:
        expected = reverse(CHAIN_VIEW, kwargs={"verification_id": story.passed.pk})
    except NoReverseMatch:  # until the admin area routes its chain view: the proof document
        expected = f"/v1/verifications/{story.passed.pk}/proof"
    assert clients["admin"].get(url)["Location"] == f"{expected}#seq-{head.seq}"
    for role in ("reviewer", "manager"):
        assert clients[role].get(url)["Location"] == f"/history/verification/{story.passed.pk}/bundle.json"
    # The proof the admin is sent to is readable by them (the bundle is for everyone who reads the history).
    assert clients["admin"].get(f"/v1/verifications/{story.passed.pk}/proof").status_code == 200
    assert clients["manager"].get(f"/history/verification/{story.passed.pk}/bundle.json").status_code == 200


@pytest.mark.parametrize("name", ["finding-acknowledge", "finding-close"])
def test_steps_reopened_by_get_go_to_the_finding(story: Story, clients: dict[str, Client], name: str) -> None:
    """issue 14: the address of a POST step, reloaded or reopened, is the finding's page (never a 405)."""
    response = clients["manager"].get(_url(name, story))
    assert response.status_code == 302 and response["Location"] == f"/findings/{story.integrity_finding.pk}/"


@pytest.mark.parametrize("name", [n for n, m, _ in MATRIX if m == "GET"])
def test_pages_are_get_only(story: Story, clients: dict[str, Client], name: str) -> None:
    assert clients["admin"].post(_url(name, story)).status_code == 405


def test_every_post_needs_csrf(story: Story, manager: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    for name in ("finding-acknowledge", "finding-close"):
        assert client.post(_url(name, story), {"rationale": "ok"}).status_code == 403, name
    assert not FindingEvent.objects.exclude(action="raised").exists()


def test_unknown_records_are_404(clients: dict[str, Client]) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    for url in (
        f"/history/subject/{missing}/",
        f"/history/verification/{missing}/bundle.json",
        f"/history/verification/{missing}/receipt/{'a' * 64}/chain",
        "/findings/999999/",
        "/dashboards/no-such-panel/",
    ):
        assert clients["admin"].get(url).status_code == 404, url


def test_the_nav_links_follow_the_permissions(clients: dict[str, Client]) -> None:
    reviewer = clients["reviewer"].get("/").content.decode()
    manager = clients["manager"].get("/").content.decode()
    nobody = clients["nobody"].get("/").content.decode()
    assert 'href="/history/"' in reviewer and 'href="/dashboards/"' in reviewer and 'href="/findings/"' not in reviewer
    assert 'href="/history/"' in manager and 'href="/findings/"' in manager
    assert 'href="/history/"' not in nobody and 'href="/findings/"' not in nobody

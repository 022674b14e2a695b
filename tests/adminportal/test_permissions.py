"""The permission matrix of the admin pages (issue 7 acceptance): every new URL as anonymous, a user with no role, a
reviewer, a manager and an admin.

Anonymous → 302 to the login page (the public key page excepted); signed in without the permission → 403; an admin
gets the page (200), a form shown again with its errors (200), or a redirect (302: after the action, or back to the
form's page with its errors, Post/Redirect/Get). A completeness
check fails when an admin URL is added without a row here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, reverse

from reviewportal.adminportal import urls as admin_urls
from tests.portal.conftest import Queue
from verification.actors.models import ApiToken
from verification.actors.services.actors import actor_for_user, token_issue
from verification.evidence.models import Evidence

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "nobody", "reviewer", "manager", "admin")
DENIED = {"anonymous": 302, "nobody": 403, "reviewer": 403, "manager": 403}


def _admin_gets(status: int) -> dict[str, int]:
    return {**DENIED, "admin": status}


# (url name, method, expected status per role)
MATRIX: list[tuple[str, str, dict[str, int]]] = [
    ("public-keys", "GET", dict.fromkeys(ROLES, 200)),
    ("home", "GET", _admin_gets(200)),
    ("keys", "GET", _admin_gets(200)),
    ("key-pin", "POST", _admin_gets(302)),  # an empty form: back to the keys page with its errors (PRG)
    ("key-rotate", "GET", _admin_gets(200)),
    ("key-unpin", "GET", _admin_gets(200)),
    ("key-revoke", "GET", _admin_gets(200)),
    ("chain", "GET", _admin_gets(200)),
    ("verify-proof", "GET", _admin_gets(200)),
    ("audit", "GET", _admin_gets(200)),
    ("audit-run", "POST", _admin_gets(302)),
    ("operations", "GET", _admin_gets(200)),
    ("evidence", "GET", _admin_gets(200)),
    ("evidence-detail", "GET", _admin_gets(200)),
    ("evidence-redact", "GET", _admin_gets(200)),
    ("users", "GET", _admin_gets(200)),
    ("user-create", "GET", _admin_gets(200)),
    ("user-detail", "GET", _admin_gets(200)),
    ("user-roles", "POST", _admin_gets(302)),
    ("user-deactivate", "GET", _admin_gets(200)),
    ("user-reactivate", "POST", _admin_gets(302)),
    ("tokens", "GET", _admin_gets(200)),
    ("token-create", "POST", _admin_gets(302)),  # an empty form: back to the tokens page with its errors (PRG)
    ("token-revoke", "POST", _admin_gets(200)),  # without confirm=yes: the confirmation page
    ("actor-create", "POST", _admin_gets(200)),  # an empty form
    ("security-log", "GET", _admin_gets(200)),
    ("security-log-csv", "GET", _admin_gets(200)),
]


@dataclass
class World:
    verification: Any
    evidence: Evidence
    target: Any
    token: ApiToken
    key_id: str


@pytest.fixture
def world(queue: Queue, make_user: Any, signing_key: Any, checkpoint_log: Any) -> World:
    verification = queue.unknown()
    evidence = Evidence.objects.get(pk=Queue.evidence_ids(verification)[0])
    target = make_user("tess", "reviewer")
    token, _ = token_issue(actor=actor_for_user(target), boundary="tess-laptop", scopes=["claims:write"])
    return World(verification, evidence, target, token, signing_key.key_id)


def _url(name: str, world: World) -> str:
    kwargs: dict[str, Any] = {}
    if name in ("key-unpin", "key-revoke"):
        kwargs = {"key_id": world.key_id}
    elif name == "chain":
        kwargs = {"verification_id": world.verification.pk}
    elif name in ("evidence-detail", "evidence-redact"):
        kwargs = {"evidence_id": world.evidence.pk}
    elif name in ("user-detail", "user-roles", "user-deactivate", "user-reactivate"):
        kwargs = {"user_id": world.target.pk}
    elif name == "token-revoke":
        kwargs = {"token_id": world.token.pk}
    url = reverse(f"adminportal:{name}", kwargs=kwargs)
    return url + "?purpose=proof-signing" if name == "key-unpin" else url


@pytest.fixture
def clients(make_user: Any) -> dict[str, Client]:
    out = {"anonymous": Client()}
    for role in ROLES[1:]:
        client = Client()
        client.force_login(make_user(f"user-{role}", None if role == "nobody" else role))
        out[role] = client
    return out


def _records() -> dict[str, int]:
    from verification.reviews.models import FindingEvent
    from verification.trust.models import PinEntry, Receipt, SecurityLogEntry

    return {m.__name__: m.objects.count() for m in (Receipt, PinEntry, FindingEvent, SecurityLogEntry)}


def test_every_admin_url_is_in_the_matrix() -> None:
    names = {p.name for p in admin_urls.urlpatterns if isinstance(p, URLPattern)}
    assert names == {name for name, _, _ in MATRIX}


@pytest.mark.parametrize(("name", "method", "expected"), MATRIX, ids=[f"{m} {n}" for n, m, _ in MATRIX])
@pytest.mark.parametrize("role", ROLES)
def test_the_matrix(
    world: World, clients: dict[str, Client], name: str, method: str, expected: dict[str, int], role: str
) -> None:
    url = _url(name, world)
    client = clients[role]
    before = _records()
    response = client.get(url) if method == "GET" else client.post(url, {"roles": ["reviewer"]})
    after = _records()
    # No admin path edits or deletes a receipt, a pin entry, a finding event or a log entry (issue 7 §4).
    assert all(after[model] >= before[model] for model in before), (before, after)
    assert response.status_code == expected[role], (name, role, response.status_code)
    if response.status_code == 302 and role == "anonymous":
        assert response["Location"].startswith(settings.LOGIN_URL)
    if response.status_code == 200 and role == "admin" and name not in ("security-log-csv", "public-keys"):
        # every admin page shows the portal's own fingerprint, in groups of four
        assert world.key_id.encode() in response.content
        assert b"data-portal-fingerprint" in response.content


PAGE_OF_ACTION = {
    "key-pin": "keys", "audit-run": "audit", "user-roles": "user-detail", "user-reactivate": "user-detail",
    "token-create": "tokens", "actor-create": "tokens",
}


def test_admin_actions_refuse_the_wrong_method(world: World, clients: dict[str, Client]) -> None:
    admin = clients["admin"]
    # issue 14: a POST-only address reopened by GET (reload, back, address bar) is its page, never a 405
    for name, page in PAGE_OF_ACTION.items():
        response = admin.get(_url(name, world))
        assert response.status_code == 302 and response["Location"] == _url(page, world), name
    confirm = admin.get(_url("token-revoke", world))  # a confirmation page, like key revocation
    assert confirm.status_code == 200 and b"data-token-revoke-form" in confirm.content
    world.token.refresh_from_db()
    assert world.token.revoked_at is None
    for name in ("keys", "chain", "evidence", "security-log", "security-log-csv", "public-keys"):
        assert admin.delete(_url(name, world)).status_code == 405, name
        assert admin.put(_url(name, world)).status_code == 405, name


def test_a_deactivated_admin_is_refused_at_once(world: World, clients: dict[str, Client]) -> None:
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(username="user-admin").update(is_active=False)
    response = clients["admin"].get(reverse("adminportal:keys"))
    assert response.status_code == 302 and response["Location"].startswith(settings.LOGIN_URL)


def test_the_nav_shows_admin_only_to_admins(world: World, clients: dict[str, Client]) -> None:
    for role in ("reviewer", "manager", "nobody"):
        assert b"data-nav-admin" not in clients[role].get("/").content
    assert b"data-nav-admin" in clients["admin"].get("/").content


def test_django_admin_is_not_installed() -> None:
    """No path edits or deletes a receipt, pin entry, finding event or log entry: Django's admin is not there."""
    assert "django.contrib.admin" not in settings.INSTALLED_APPS

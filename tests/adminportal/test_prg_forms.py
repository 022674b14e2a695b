"""Issue 14: refusals on the admin forms are Post/Redirect/Get (reviewportal.prg, the review decision's one store):
the GET page shows the form as typed with the refusal, a reload shows it again and writes nothing, and the POST-only
address reopened by GET goes to the page, never a 405."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from verification.actors.models import ApiToken
from verification.actors.services import users
from verification.kernel.keys import PrivateKey
from verification.trust.models import PinEntry, SecurityLogEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(admin_user: Any, signing_key: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_a_refused_pin_keeps_the_typed_form_across_reload_and_writes_nothing(admin: Client) -> None:
    key = PrivateKey.generate()
    before = (PinEntry.objects.count(), SecurityLogEntry.objects.filter(kind="key-pin").count())
    refused = admin.post(
        reverse("adminportal:key-pin"),
        {"key_text": "not a key", "purpose": "proof-signing", "fingerprint": key.public_key.fingerprint,
         "channel": "a call with Bo", "note": "issuer X"},
    )
    assert refused.status_code == 302 and refused["Location"] == "/admin/keys/#pin"
    for _ in range(2):  # the redirect's page, then a reload
        page = admin.get("/admin/keys/").content.decode()
        assert 'data-refusal="malformed-key"' in page
        assert "a call with Bo" in page and "issuer X" in page  # the form as typed
    assert admin.get(reverse("adminportal:key-pin"))["Location"] == "/admin/keys/"  # reopened: the page, no 405
    assert (PinEntry.objects.count(), SecurityLogEntry.objects.filter(kind="key-pin").count()) == before


def test_a_refused_role_change_shows_on_the_users_page(admin: Client, admin_user: Any) -> None:
    url = reverse("adminportal:user-roles", args=[admin_user.pk])
    refused = admin.post(url, {"roles": ["reviewer"]})
    detail = reverse("adminportal:user-detail", args=[admin_user.pk])
    assert refused.status_code == 302 and refused["Location"] == f"{detail}#roles"
    page = admin.get(detail).content.decode()
    assert 'data-refusal="permission-denied"' in page
    assert admin.get(url)["Location"] == detail
    assert users.roles_of(admin_user) == ["admin"]


def test_a_refused_token_issue_keeps_the_form_and_issues_nothing(admin: Client) -> None:
    admin.post(reverse("adminportal:actor-create"), {"name": "scanner", "kind": "external_verifier"})
    refused = admin.post(
        reverse("adminportal:token-create"), {"actor": "nobody-here", "boundary": "box-7", "scopes": ["events:read"]}
    )
    assert refused.status_code == 302 and refused["Location"] == "/admin/tokens/#issue"
    for _ in range(2):
        page = admin.get("/admin/tokens/").content.decode()
        assert 'data-refusal="not-found"' in page and "box-7" in page
    assert admin.get(reverse("adminportal:token-create"))["Location"] == "/admin/tokens/"
    assert not ApiToken.objects.exists()


# --- web words (issue 14): every problem at once, in plain words, beside its field ------------------------------------


def test_a_weak_password_and_a_bad_username_are_named_at_once_beside_their_fields(admin: Client) -> None:
    from django.contrib.auth import get_user_model

    before = get_user_model().objects.count()
    response = admin.post(reverse("adminportal:user-create"), {"username": "bad name!", "password": "12345"})
    page = response.content.decode()
    assert response.status_code == 200
    assert 'data-field-error="username"' in page and 'data-field-error="password"' in page
    assert "This password is too short" in page and "This password is entirely numeric" in page
    assert "well-formed JSON" not in page and 'data-refusal="invalid-request"' not in page  # no API words
    assert get_user_model().objects.count() == before


def test_every_bad_queue_filter_is_named_at_once_beside_its_field(admin: Client) -> None:
    page = admin.get(reverse("portal:queue"), {"reason": "no-such-code", "authority": "oracle", "age": "3y"})
    html = page.content.decode()
    assert page.status_code == 200 and 'data-refusal="invalid-request"' in html
    for name in ("reason", "authority", "age"):
        assert f'data-field-error="{name}"' in html and f'data-problem="{name}"' in html
    assert 'value="no-such-code" selected' in html  # what was typed stays in its field
    assert "well-formed JSON" not in html

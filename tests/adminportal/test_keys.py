"""The keys pages (issue 7 §1): pinning with an out-of-band fingerprint, refusals with code and words, unpinning and
revoking as new entries, the pin log, the portal's own fingerprint (also on a public page), rotate and revoke behind
a confirmation that names the consequences; each on the security log."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason, explain
from verification.trust.models import PinEntry, SecurityLogEntry, SigningKey
from verification.trust.selectors import pin_state

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(admin_user: Any, signing_key: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def _jwk(key: PrivateKey, **extra: Any) -> str:
    return json.dumps({"kty": "OKP", "crv": "Ed25519", "x": key.public_key.x, **extra})


def _okp(x: str) -> str:
    return json.dumps({"kty": "OKP", "crv": "Ed25519", "x": x})


def _pin(client: Client, text: str, fingerprint: str, *, purpose: str = "proof-signing", channel: str = "phone") -> Any:
    return client.post(
        reverse("adminportal:key-pin"),
        {"key_text": text, "purpose": purpose, "fingerprint": fingerprint, "channel": channel, "note": "issuer X"},
    )


def test_a_key_pinned_with_the_matching_fingerprint_in_groups_of_four(admin: Client, admin_user: Any) -> None:
    key = PrivateKey.generate()
    grouped = key.public_key.fingerprint_grouped
    response = _pin(admin, _jwk(key), grouped.upper(), purpose="evidence-source", channel="call with their CISO")
    assert response.status_code == 302
    entry = PinEntry.objects.get(key_id=key.public_key.key_id)
    assert (entry.action, entry.purpose, entry.channel, entry.actor_user) == (
        "pin", "evidence-source", "call with their CISO", admin_user
    )
    page = admin.get(reverse("adminportal:keys")).content.decode()
    assert f'data-pin-entry="{entry.pk}"' in page and grouped in page
    logged = SecurityLogEntry.objects.get(kind="key-pin", target=key.public_key.key_id)
    assert logged.user == admin_user and logged.detail["purpose"] == "evidence-source"
    assert logged.detail["channel"] == "call with their CISO"


def test_a_pem_and_the_rfc7638_thumbprint_are_accepted(admin: Client) -> None:
    key = PrivateKey.generate()
    assert _pin(admin, key.public_key.to_pem(), key.public_key.thumbprint()).status_code == 302
    assert pin_state().is_pinned(key.public_key.key_id, "proof-signing")


@pytest.mark.parametrize(
    ("text", "fingerprint", "channel", "reason"),
    [
        ("THE KEY", "0" * 64, "phone", Reason.FINGERPRINT_MISMATCH),
        ("not a key", "THE FINGERPRINT", "phone", Reason.MALFORMED_KEY),
        (_okp("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), "0" * 64, "phone", Reason.SMALL_ORDER_KEY),
        (_okp("7________________________________________38"), "0" * 64, "phone", Reason.NON_CANONICAL_KEY),
        ("WRONG KID", "THE FINGERPRINT", "phone", Reason.KID_MISMATCH),
        ("THE KEY", "THE FINGERPRINT", "", Reason.PIN_CHANNEL_REQUIRED),
    ],
)
def test_refusals_are_shown_with_their_code_and_words(
    admin: Client, text: str, fingerprint: str, channel: str, reason: Reason
) -> None:
    key = PrivateKey.generate()
    text = {"THE KEY": _jwk(key), "WRONG KID": _jwk(key, kid="ed25519-0000000000000000")}.get(text, text)
    fingerprint = key.public_key.fingerprint if fingerprint == "THE FINGERPRINT" else fingerprint
    before = PinEntry.objects.count()
    response = _pin(admin, text, fingerprint, channel=channel)
    assert response.status_code == 302 and response["Location"] == "/admin/keys/#pin"  # Post/Redirect/Get
    page = admin.get(response["Location"]).content.decode()
    assert f'data-refusal="{reason.value}"' in page
    assert explain(reason).replace("'", "&#x27;") in page
    assert PinEntry.objects.count() == before
    assert not SecurityLogEntry.objects.filter(kind="key-pin", target=key.public_key.key_id).exists()


def test_unpin_and_revoke_are_new_entries(admin: Client, admin_user: Any) -> None:
    key = PrivateKey.generate()
    kid = key.public_key.key_id
    _pin(admin, _jwk(key), key.public_key.fingerprint)
    page = admin.get(reverse("adminportal:key-unpin", args=[kid]) + "?purpose=proof-signing").content.decode()
    assert "unknown-key" in page  # the consequence is named
    response = admin.post(
        reverse("adminportal:key-unpin", args=[kid]), {"purpose": "proof-signing", "channel": "ticket 42"}
    )
    assert response.status_code == 302
    assert not pin_state().is_pinned(kid, "proof-signing")
    response = admin.post(
        reverse("adminportal:key-revoke", args=[kid]),
        {"reason": "the issuer lost it", "channel": "their security notice", "confirm": "on"},
    )
    assert response.status_code == 302
    assert [e.action for e in PinEntry.objects.filter(key_id=kid).order_by("id")] == ["pin", "unpin", "revoke"]
    assert pin_state().is_revoked(kid)
    kinds = list(SecurityLogEntry.objects.filter(target=kid).order_by("id").values_list("kind", flat=True))
    assert kinds == ["key-pin", "key-unpin", "key-revoke"]
    # A revoked key cannot be pinned again: refused with its code.
    again = _pin(admin, _jwk(key), key.public_key.fingerprint)
    assert 'data-refusal="revoked-key"' in admin.get(again["Location"]).content.decode()


def test_revoking_needs_the_confirmation_a_reason_and_a_channel(admin: Client, signing_key: Any) -> None:
    url = reverse("adminportal:key-revoke", args=[signing_key.key_id])
    page = admin.get(url).content.decode()
    assert "data-consequences" in page and "revoked.json" in page and "cannot sign receipts" in page
    assert admin.post(url, {"reason": "x", "channel": "y"}).status_code == 200  # no confirmation: the form again
    refused = admin.post(url, {"reason": "", "channel": "y", "confirm": "on"})
    assert 'data-refusal="revocation-reason-required"' in refused.content.decode()
    assert SigningKey.objects.get(pk=signing_key.pk).status == "active"


def test_revoking_the_portal_key_takes_it_out_of_the_jwks(admin: Client, signing_key: Any) -> None:
    url = reverse("adminportal:key-revoke", args=[signing_key.key_id])
    response = admin.post(url, {"reason": "laptop stolen", "channel": "incident call", "confirm": "on"})
    assert response.status_code == 302
    assert SigningKey.objects.get(pk=signing_key.pk).status == "revoked"
    revoked = admin.get(reverse("verification:revoked")).json()["revoked"]
    assert [r["kid"] for r in revoked] == [signing_key.key_id] and revoked[0]["reason"] == "laptop stolen"
    assert admin.get(reverse("verification:jwks")).json()["keys"] == []


def test_rotation_is_behind_a_confirmation_and_keeps_the_old_key_published(
    admin: Client, signing_key: Any, admin_user: Any
) -> None:
    url = reverse("adminportal:key-rotate")
    page = admin.get(url).content.decode()
    assert "data-consequences" in page and "keeps verifying" in page
    assert admin.post(url, {}).status_code == 200  # unconfirmed: nothing happens
    assert SigningKey.objects.get(pk=signing_key.pk).status == "active"
    assert admin.post(url, {"confirm": "on"}).status_code == 302
    old = SigningKey.objects.get(pk=signing_key.pk)
    new = SigningKey.objects.get(status="active")
    assert old.status == "retired" and new.key_id != old.key_id
    kids = [k["kid"] for k in admin.get(reverse("verification:jwks")).json()["keys"]]
    assert set(kids) == {old.key_id, new.key_id}
    assert SecurityLogEntry.objects.filter(kind="key-rotate", target=new.key_id).exists()
    # the banner now shows the new key's fingerprint
    assert new.public.fingerprint_grouped in admin.get(reverse("adminportal:home")).content.decode()


def test_the_public_key_page_needs_no_sign_in(client: Client, signing_key: Any) -> None:
    response = client.get(reverse("adminportal:public-keys"))
    assert response.status_code == 200
    page = response.content.decode()
    assert signing_key.public.fingerprint_grouped in page
    assert signing_key.public.thumbprint() in page
    assert "PRIVATE" not in page


def test_the_keys_page_lists_retired_and_revoked_keys(admin: Client, signing_key: Any, admin_user: Any) -> None:
    from verification.trust.services.keys import key_revoke, signing_key_rotate

    signing_key_rotate()
    key_revoke(key_id=signing_key.key_id, reason="compromised", channel="call", actor_user=admin_user)
    page = admin.get(reverse("adminportal:keys")).content.decode()
    assert f'data-key="{signing_key.key_id}" data-key-status="revoked"' in page
    assert "compromised" in page

"""An admin's day in a real browser (issue 7 acceptance): pin a key with a matching fingerprint and be refused with a
mismatching one; open the chain view of a tampered chain and see the failing step; deactivate a user whose lease and
token stop working at once; redact an artifact and see the citing verdicts change. No console error anywhere (the
strict CSP would report an inline script or style as one)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.adminportal.conftest import tamper_envelope
from tests.browser.conftest import Console
from tests.portal.conftest import Queue
from tests.verification.conftest import chain, make_verification  # noqa: F401 - fixtures used below, by name
from verification.actors.services.actors import actor_for_user, token_issue
from verification.evidence.models import Evidence
from verification.kernel.keys import PrivateKey
from verification.reviews.models import ReviewLease
from verification.trust.models import PinEntry

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_pins_a_key_only_with_the_matching_fingerprint(
    admin_user: Any, signing_key: Any, live_server: Any, page: Any, sign_in: Any, console: Console, artifacts: Any
) -> None:
    console.watch(page)
    sign_in(page, admin_user)
    page.click("[data-nav-admin]")
    page.wait_for_url(re.compile(r".*/admin/$"))
    assert page.locator("[data-portal-fingerprint]").inner_text() == signing_key.public.fingerprint_grouped
    page.goto(f"{live_server.url}/admin/keys/")
    key = PrivateKey.generate().public_key
    jwk = json.dumps({"kty": "OKP", "crv": "Ed25519", "x": key.x})
    page.fill("#id_key_text", jwk)
    page.select_option("#id_purpose", "proof-signing")
    page.fill("#id_fingerprint", PrivateKey.generate().public_key.fingerprint_grouped)  # another key's
    page.fill("#id_channel", "video call with the issuer")
    page.click("[data-pin]")
    refusal = page.locator("#refusal")
    refusal.wait_for()
    assert refusal.get_attribute("data-refusal") == "fingerprint-mismatch"
    assert "The typed fingerprint does not match the key." in refusal.inner_text()
    assert not PinEntry.objects.filter(key_id=key.key_id).exists()
    page.screenshot(path=str(artifacts / "admin-pin-refused.png"), full_page=True)

    page.fill("#id_fingerprint", key.fingerprint_grouped)
    page.click("[data-pin]")
    page.wait_for_url(re.compile(r".*/admin/keys/#pin-log$"))
    entry = PinEntry.objects.get(key_id=key.key_id)
    row = page.locator(f'[data-pin-entry="{entry.pk}"]')
    assert "video call with the issuer" in row.inner_text() and key.fingerprint_grouped in row.inner_text()
    assert page.locator(f'[data-pinned="{key.key_id}"]').count() == 1
    page.screenshot(path=str(artifacts / "admin-keys.png"), full_page=True)


def test_the_chain_view_of_a_tampered_chain_shows_the_failing_step(
    admin_user: Any,
    chain: Any,  # noqa: F811 - the fixture, by name
    live_server: Any,
    page: Any,
    sign_in: Any,
    console: Console,
    artifacts: Any,
) -> None:
    verification, receipts = chain
    tamper_envelope(receipts[1], '"verdict":"UNKNOWN"', '"verdict":"PASS"')
    console.watch(page)
    sign_in(page, admin_user)
    page.goto(f"{live_server.url}/admin/verifications/{verification.pk}/chain")
    report = page.locator("[data-report-ok]")
    assert report.get_attribute("data-report-ok") == "false"
    assert report.get_attribute("data-failed-step") == "2" and report.get_attribute("data-failed-seq") == "1"
    assert page.locator("[data-failed-code]").inner_text() == "content-hash-mismatch"
    cell = page.locator('[data-entry="1"] [data-cell="2"]')
    assert cell.get_attribute("data-cell-status") == "failed" and "content-hash-mismatch" in cell.inner_text()
    assert page.locator('[data-entry="0"] [data-cell="2"]').get_attribute("data-cell-status") == "passed"
    assert page.locator('[data-step="3"]').get_attribute("data-step-status") == "not-run"
    assert "process-distinct, not party-distinct" in page.locator("[data-limits]").inner_text()
    page.screenshot(path=str(artifacts / "admin-chain-tampered.png"), full_page=True)


def test_deactivating_a_user_stops_their_lease_and_token_at_once(
    admin_user: Any, reviewer: Any, queue: Queue, live_server: Any, new_context: Any, sign_in: Any,
    console: Console, artifacts: Any
) -> None:
    item = queue.unknown("held by rita")
    _, raw = token_issue(actor=actor_for_user(reviewer), boundary="rita-laptop", scopes=["verifications:read"])
    rita = console.watch(new_context().new_page())
    ada = console.watch(new_context().new_page())
    sign_in(rita, reviewer)
    rita.goto(f"{live_server.url}/queue/")
    rita.click("[data-claim-next]")
    rita.wait_for_url(re.compile(rf".*/review/{item.pk}/$"))
    assert "Yours until" in rita.locator("[data-lease-status]").inner_text()
    bearer = {"Authorization": f"Bearer {raw}"}
    assert rita.request.get(f"{live_server.url}/v1/verifications", headers=bearer).status == 200

    sign_in(ada, admin_user)
    ada.goto(f"{live_server.url}/admin/users/{reviewer.pk}/")
    assert ada.locator(f'[data-lease="{item.pk}"]').count() == 1
    ada.click("[data-deactivate-link]")
    ada.fill("#id_reason", "left the team")
    ada.check("#id_confirm")
    ada.click("[data-confirm-deactivate]")
    ada.wait_for_url(re.compile(rf".*/admin/users/{reviewer.pk}/$"))
    assert ada.locator("[data-deactivated]").count() == 1
    assert "1 lease(s) released, 1 token(s) revoked" in ada.locator(".messages").inner_text()
    ada.screenshot(path=str(artifacts / "admin-user-deactivated.png"), full_page=True)

    lease = ReviewLease.objects.get(verification=item)
    assert lease.released_at is not None and lease.end_reason == "user-deactivated"
    assert rita.request.get(f"{live_server.url}/v1/verifications", headers=bearer).status == 401
    rita.reload()
    rita.wait_for_url(re.compile(r".*/accounts/login/.*"))
    # the item is free again: the admin (a reviewer too) can claim it
    ada.goto(f"{live_server.url}/review/{item.pk}/")
    assert ada.locator("[data-claim-this]").count() == 1


def test_redacting_an_artifact_changes_the_citing_verdicts(
    admin_user: Any, queue: Queue, live_server: Any, page: Any, sign_in: Any, console: Console, artifacts: Any
) -> None:
    item = queue.cited_conflict("Release notes claim")
    evidence = Evidence.objects.get(pk=Queue.evidence_ids(item)[0])
    console.watch(page)
    sign_in(page, admin_user)
    page.goto(f"{live_server.url}/admin/evidence/")
    page.click(f'[data-evidence-row="{evidence.pk}"] a')
    page.wait_for_url(re.compile(rf".*/admin/evidence/{evidence.pk}/$"))
    assert page.locator("[data-artifact] mark").inner_text() == "212 passed, 0 failed"
    citing = page.locator(f'[data-citing-verdict="{item.pk}"]')
    assert citing.get_attribute("data-recheck") == "intact"
    page.screenshot(path=str(artifacts / "admin-evidence.png"), full_page=True)

    page.click("[data-redact-link]")
    page.fill("#id_reason", "the log holds a customer's name")
    page.check("#id_confirm")
    page.click("[data-confirm-redact]")
    page.wait_for_url(re.compile(rf".*/admin/evidence/{evidence.pk}/$"))
    citing = page.locator(f'[data-citing-verdict="{item.pk}"]')
    assert citing.get_attribute("data-recheck") == "redacted"
    assert citing.locator("[data-recheck-code]").inner_text() == "evidence-redacted"
    assert page.locator("[data-accessibility]").inner_text() == "redacted"
    assert page.locator("[data-artifact]").count() == 0
    page.screenshot(path=str(artifacts / "admin-evidence-redacted.png"), full_page=True)
    # the verdict's own page shows it too
    page.goto(f"{live_server.url}/review/{item.pk}/")
    assert page.locator(f'[data-evidence="{evidence.pk}"] [data-integrity]').get_attribute("data-integrity") == (
        "redacted"
    )

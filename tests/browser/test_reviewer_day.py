"""The reviewer's day with the demo, in a real browser (issue 14 acceptance): the demo reviewer clears the whole demo
queue with the keyboard alone, never sees the barred item, and ends on the empty state; the second reviewer gets it;
a refusal page survives reload and back; the token page's reload issues no second token; every page of every role
fits a 390 px screen; screenshots at 1280 and 390 px go to ``test-artifacts/``."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tests.browser.conftest import Console, expect
from tests.portal.conftest import PASSWORD, ensure_roles
from verification.actors.models import ApiToken
from verification.reviews.models import Finding, ReviewDecision, ReviewLease
from verification.runs.models import Verification
from verification.trust.models import SigningKey

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


@pytest.fixture
def demo(signing_key: Any, var_dir: Path) -> dict[str, Any]:
    """``manage.py seed_demo`` as ``make run`` runs it; the demo logins get the tests' password."""
    ensure_roles()
    call_command("seed_demo", stdout=StringIO())
    users = {}
    for name in ("reviewer", "reviewer2", "manager", "admin"):
        user = get_user_model().objects.get(username=name)
        user.set_password(PASSWORD)
        user.save()
        users[name] = user
    trap = Verification.objects.get(task__external_ref="demo:self-review-trap")
    return {"users": users, "trap": trap}


def test_the_demo_reviewer_clears_the_queue_by_keyboard_never_sees_the_trap_and_ends_on_the_empty_state(
    demo: dict[str, Any], live_server: Any, new_context: Any, sign_in: Any, console: Console
) -> None:
    page = console.watch(new_context().new_page())
    sign_in(page, demo["users"]["reviewer"])
    page.goto(f"{live_server.url}/queue/")
    expect(page.locator("html")).to_have_attribute("data-portal-js", "ready")
    seen: list[str] = []
    with page.expect_navigation():
        page.keyboard.press("c")
    while re.search(rf"/review/({UUID})/$", page.url):
        seen.append(re.search(rf"/review/({UUID})/$", page.url).group(1))  # type: ignore[union-attr]
        page.wait_for_selector("[data-decision-form]")
        page.keyboard.press("m")  # needs more evidence: allowed on every kind of item
        page.keyboard.press("r")
        page.keyboard.type("demo: attach the run log")
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
        assert len(seen) <= 9, seen
    assert str(demo["trap"].pk) not in seen and len(seen) == len(set(seen)) == 9
    assert page.url.endswith("/queue/")
    assert page.locator("[data-empty-state]").count() == 1
    assert page.locator("[data-awaiting-list] li").count() == 9  # what is awaiting evidence is listed
    assert "9</strong> decided this session" in page.locator("[data-progress]").inner_html()
    assert not ReviewLease.objects.filter(verification=demo["trap"]).exists()  # never held by the barred reviewer

    other = console.watch(new_context().new_page())  # the second reviewer clears the trap
    sign_in(other, demo["users"]["reviewer2"])
    other.goto(f"{live_server.url}/queue/")
    expect(other.locator("html")).to_have_attribute("data-portal-js", "ready")
    with other.expect_navigation():
        other.keyboard.press("c")
    assert other.url.endswith(f"/review/{demo['trap'].pk}/")
    other.keyboard.press("f")
    other.keyboard.press("r")
    other.keyboard.type("the reviewer worked on it; the config change is not the agreed one")
    with other.expect_navigation():
        other.keyboard.press("Control+Enter")
    assert ReviewDecision.objects.filter(verification=demo["trap"], user=demo["users"]["reviewer2"]).count() == 1


def test_a_refusal_survives_reload_and_back(
    demo: dict[str, Any], live_server: Any, page: Any, sign_in: Any, console: Console
) -> None:
    mismatch = Verification.objects.get(task__external_ref="demo:mismatch")
    console.watch(page)
    sign_in(page, demo["users"]["reviewer"])
    page.goto(f"{live_server.url}/review/{mismatch.pk}/")
    page.click("[data-claim-this]")
    page.wait_for_selector("[data-decision-form]")
    page.check('input[name="cited_evidence"]')
    page.check('input[name="verdict"][value="PASS"]')
    page.fill("#id_rationale", "the change looks deliberate")
    page.click("[data-decide]")
    page.wait_for_url(re.compile(rf".*/review/{mismatch.pk}/#refusal$"))
    assert "mismatch-needs-new-evidence" in page.locator("#refusal").inner_text()
    for step in (page.reload, page.go_back, page.go_forward):
        response = step()
        assert response is None or response.status < 400
        assert "mismatch-needs-new-evidence" in page.locator("#refusal").inner_text(), step
        assert page.locator("#id_rationale").input_value() == "the change looks deliberate"
    reopened = page.goto(f"{live_server.url}/review/{mismatch.pk}/decide")  # the old POST address: no 405
    assert reopened is not None and reopened.status == 200 and page.url.endswith(f"/review/{mismatch.pk}/")


def test_reloading_the_issued_token_page_issues_no_second_token(
    demo: dict[str, Any], live_server: Any, page: Any, sign_in: Any, console: Console
) -> None:
    console.watch(page)
    sign_in(page, demo["users"]["admin"])
    page.goto(f"{live_server.url}/admin/tokens/")
    before = ApiToken.objects.count()
    page.select_option("#id_actor", "demo-collector")
    page.fill("#id_boundary", "ci-runner-9")
    page.locator('input[name="scopes"]').first.check()
    page.click("[data-token-form] button[type=submit]")
    page.wait_for_url(re.compile(r".*/admin/tokens/#token-created$"))
    raw = page.locator("[data-token-plaintext]").inner_text()
    assert raw and ApiToken.objects.count() == before + 1
    page.reload()
    assert page.locator("[data-token-plaintext]").count() == 0 and raw not in page.content()
    assert ApiToken.objects.count() == before + 1
    token = ApiToken.objects.order_by("-id").first()
    assert token is not None
    page.click(f'[data-revoke-token="{token.pk}"]')  # a confirmation step, like key revocation
    page.wait_for_selector("[data-token-revoke-form]")
    token.refresh_from_db()
    assert token.revoked_at is None
    page.click("[data-confirm-token-revoke]")
    page.wait_for_url(re.compile(r".*/admin/tokens/.*"))
    token.refresh_from_db()
    assert token.revoked_at is not None


def _pages(demo: dict[str, Any]) -> dict[str, list[str]]:
    item = Verification.objects.get(task__external_ref="demo:semantic-conflict")
    finding = Finding.objects.order_by("pk").first()
    evidence = item.bindings.first()
    reader = ["/", "/queue/", "/queue/awaiting-evidence/", f"/review/{item.pk}/", f"/review/{demo['trap'].pk}/",
              "/history/", f"/history/subject/{item.task_id}/", "/dashboards/", "/no-such-page/",
              # refusals in web words: every bad filter named beside its field (issue 14)
              "/history/?verdict=nope&since=1969-01-01&reason=no-such-code", "/queue/?reason=nope&age=3y"]
    admin = ["/admin/", "/admin/keys/", "/keys/", "/admin/verify-proof", "/admin/audit/", "/admin/evidence/",
             "/admin/users/", f"/admin/users/{demo['users']['reviewer'].pk}/", "/admin/users/new", "/admin/tokens/",
             "/admin/security-log/", f"/admin/verifications/{item.pk}/chain", "/admin/keys/rotate"]
    admin += ["/findings/", "/admin/operations/", f"/admin/users/{demo['users']['reviewer'].pk}/deactivate"]
    key = SigningKey.objects.order_by("pk").first()
    if key is not None:
        admin.append(f"/admin/keys/{key.key_id}/revoke")
    if finding is not None:
        admin.append(f"/findings/{finding.pk}/")
    if evidence is not None:
        admin += [f"/admin/evidence/{evidence.evidence_id}/", f"/admin/evidence/{evidence.evidence_id}/redact"]
    manager = [*reader[:1], "/queue/", f"/review/{item.pk}/", "/history/", "/dashboards/", "/findings/", "/admin/"]
    if finding is not None:
        manager.append(f"/findings/{finding.pk}/")
    return {"reviewer": [*reader, "/admin/"], "reviewer2": ["/queue/", f"/review/{demo['trap'].pk}/"],
            "manager": manager, "admin": [*reader, *admin]}


def test_every_page_of_every_role_fits_a_phone_and_the_main_pages_are_photographed(
    demo: dict[str, Any], live_server: Any, new_context: Any, sign_in: Any, artifacts: Path
) -> None:
    """The 403 and 404 pages are among them (the browser reports their status on the console: not watched here)."""
    too_wide: list[tuple[str, str, int]] = []
    signed_out = new_context(viewport=PHONE).new_page()  # the sign-in page, before any role
    for path in ("/accounts/login/", "/keys/"):
        signed_out.goto(f"{live_server.url}{path}")
        if (width := signed_out.evaluate("document.documentElement.scrollWidth")) > PHONE["width"]:
            too_wide.append(("signed out", path, width))
    signed_out.screenshot(path=str(artifacts / "signed-out-keys-390.png"), full_page=True)
    signed_out.context.close()
    for role, paths in _pages(demo).items():
        for viewport in (PHONE, DESKTOP):
            page = new_context(viewport=viewport).new_page()
            sign_in(page, demo["users"][role])
            for path in paths:
                page.goto(f"{live_server.url}{path}")
                if viewport is PHONE:
                    width = page.evaluate("document.documentElement.scrollWidth")
                    if width > PHONE["width"]:
                        too_wide.append((role, path, width))
            shots = {"queue": "/queue/", "dashboards": "/dashboards/",
                     "review": f"/review/{Verification.objects.get(task__external_ref='demo:semantic-conflict').pk}/"}
            if role in ("reviewer", "manager"):
                for name, path in shots.items():
                    page.goto(f"{live_server.url}{path}")
                    page.screenshot(path=str(artifacts / f"{role}-{name}-{viewport['width']}.png"), full_page=True)
            page.context.close()
    assert too_wide == []
    for width in (390, 1280):
        assert (artifacts / f"reviewer-review-{width}.png").stat().st_size > 0

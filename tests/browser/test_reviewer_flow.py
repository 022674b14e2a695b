"""The reviewer's day in a real browser (issue 5 §4): claim, read, decide, refusals, two reviewers, the keyboard,
no console errors, and the CSP proven enforced by a canary it must block."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.browser.conftest import Console, expect
from tests.portal.conftest import Queue
from verification.reviews.models import ReviewLease
from verification.runs.models import Verification
from verification.trust.models import Receipt
from verification.trust.selectors import head_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _review_id(page: Any) -> str:
    found = re.search(rf"/review/({UUID})/", page.url)
    assert found is not None, page.url
    return found.group(1)


def test_a_reviewer_claims_reads_highlighted_evidence_passes_and_sees_the_superseding_receipt(
    queue: Queue, reviewer: Any, live_server: Any, page: Any, sign_in: Any, console: Console, artifacts: Any
) -> None:
    item = queue.cited_conflict("Release notes claim")
    following = queue.unknown("Timeout review")
    old_head = head_of(item)
    assert old_head is not None
    console.watch(page)
    sign_in(page, reviewer)
    page.goto(f"{live_server.url}/queue/")
    assert page.locator("[data-queue-total]").inner_text() == "2"
    page.screenshot(path=str(artifacts / "queue.png"), full_page=True)

    page.click("[data-claim-next]")  # the semantic cited_conflict comes before UNKNOWN
    page.wait_for_url(re.compile(rf".*/review/{item.pk}/$"))
    assert "Yours until" in page.locator("[data-lease-status]").inner_text()
    mark = page.locator("article.evidence pre.artifact mark")
    assert mark.count() == 1 and mark.inner_text() == "212 passed, 0 failed"
    assert page.locator('[data-quote-hash="resolves"]').count() == 1
    assert "model output — can never pass anything" in page.locator("#judgments").inner_text()
    page.screenshot(path=str(artifacts / "review.png"), full_page=True)

    page.check('input[name="cited_evidence"]')
    page.check('input[name="verdict"][value="PASS"]')
    page.fill("#id_rationale", "The full log shows every test passing; the model misread it.")
    page.click("[data-decide]")
    page.wait_for_url(re.compile(rf".*/review/{following.pk}/$"))  # issue 14: the next item opens
    assert "1 decided this session" in page.locator("[data-progress]").inner_text()
    page.click("[data-progress-last]")  # the one just decided
    page.wait_for_url(re.compile(rf".*/review/{item.pk}/$"))

    head = head_of(item)
    assert head is not None and head.kind == "decision" and head.supersedes_receipt_id == old_head.content_hash
    assert page.locator("[data-decision-verdict]").inner_text() == "PASS"
    assert page.locator("[data-decision-receipt]").inner_text() == head.content_hash
    assert page.locator("[data-supersedes]").inner_text() == old_head.content_hash
    chain = page.locator("[data-chain-entry]")
    assert chain.count() == head.seq + 1
    assert "decision PASS · human by user:rita" in chain.last.inner_text()
    assert page.locator("[data-chain-ok]").get_attribute("data-chain-ok") == "true"
    assert page.locator("[data-claim-next]").count() == 1  # the next item is offered
    page.screenshot(path=str(artifacts / "decided.png"), full_page=True)


def test_a_self_review_is_refused_with_its_reason(
    queue: Queue, reviewer: Any, live_server: Any, page: Any, sign_in: Any, console: Console
) -> None:
    item = queue.self_review_trap(reviewer)
    console.watch(page)
    sign_in(page, reviewer)
    page.goto(f"{live_server.url}/review/{item.pk}/")
    # issue 14: said up front, before any typing; nothing to claim, no form to fill
    alert = page.locator("#bar")
    text = alert.inner_text()
    assert "You cannot decide this item" in text and "worker-self-verification" in text
    assert "claimed the task" in text
    assert page.locator("[data-claim-this]").count() == 0 and page.locator("[data-decision-form]").count() == 0
    assert Receipt.objects.filter(verification=item, kind="decision").count() == 0
    assert not ReviewLease.objects.filter(verification=item).exists()  # never held, so never kept from others


def test_two_browser_contexts_never_hold_the_same_item(
    queue: Queue, reviewer: Any, reviewer2: Any, live_server: Any, new_context: Any, sign_in: Any, console: Console
) -> None:
    for n in range(3):
        queue.unknown(f"item {n}")
    rita = console.watch(new_context().new_page())
    rob = console.watch(new_context().new_page())
    sign_in(rita, reviewer)
    sign_in(rob, reviewer2)
    for page in (rita, rob):
        page.goto(f"{live_server.url}/queue/")
    rita.click("[data-claim-next]")
    rob.click("[data-claim-next]")
    rita.wait_for_url(re.compile(rf".*/review/{UUID}/$"))
    rob.wait_for_url(re.compile(rf".*/review/{UUID}/$"))
    first, second = _review_id(rita), _review_id(rob)
    assert first != second
    holders = dict(ReviewLease.objects.values_list("verification_id", "holder__username"))
    assert {str(k): v for k, v in holders.items()} == {first: "rita", second: "rob"}
    # Each sees the other's item as held in the list (refreshed by the poll, or by loading the page).
    rob.goto(f"{live_server.url}/queue/")
    row = rob.locator(f'[data-queue-row="{first}"]')
    assert "rita" in row.inner_text()
    # Opening the other's item offers no decision form, only who holds it.
    rob.goto(f"{live_server.url}/review/{first}/")
    assert rob.locator("[data-decision-form]").count() == 0
    assert "Held by rita" in rob.locator(".lease-box").inner_text()


def test_the_keyboard_flow_clears_three_items(
    queue: Queue, reviewer: Any, live_server: Any, page: Any, sign_in: Any, console: Console
) -> None:
    items = [queue.unknown(f"keyboard {n}") for n in range(3)]
    console.watch(page)
    sign_in(page, reviewer)
    page.goto(f"{live_server.url}/queue/")
    # ? shows the cheat-sheet, Esc hides it; j/k move the selection; / focuses the filter.
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible()
    page.keyboard.press("Escape")
    assert not page.locator("#shortcuts").is_visible()
    page.keyboard.press("j")
    page.keyboard.press("j")
    selected = page.locator('[data-queue-row][aria-selected="true"]')
    assert selected.count() == 1 and selected.get_attribute("data-queue-row") == str(items[1].pk)
    page.keyboard.press("k")
    assert page.locator('[data-queue-row][aria-selected="true"]').get_attribute("data-queue-row") == str(items[0].pk)
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.name") == "subject"
    page.keyboard.press("Escape")

    page.keyboard.press("c")
    for n in range(3):  # after each decision the next item opens, claimed (issue 14)
        page.wait_for_url(re.compile(rf".*/review/{UUID}/$"))
        page.wait_for_selector("[data-decision-form]")
        page.keyboard.press("p")  # pass: the focus stays where it was (issue 14) ...
        page.keyboard.press("1")  # ... so "1" ticks the first evidence item instead of typing into the rationale
        assert page.locator('input[name="cited_evidence"]').first.is_checked()
        assert page.locator("#id_rationale").input_value() == ""
        page.keyboard.press("r")  # r: write the rationale
        page.keyboard.type(f"keyboard decision {n}: config checked by hand")
        with page.expect_navigation():
            page.keyboard.press("Control+Enter")
    assert all(Verification.objects.get(pk=v.pk).human_decided for v in items)
    page.wait_for_url(re.compile(r".*/queue/$"))  # nothing left: the empty state
    assert page.locator("[data-queue-total]").inner_text() == "0"
    assert "Nothing left for you to claim" in page.locator(".messages").inner_text()
    assert "3</strong> decided this session" in page.locator("[data-progress]").inner_html()


def test_the_queue_poll_pauses_while_the_tab_is_hidden(
    queue: Queue, reviewer: Any, live_server: Any, page: Any, sign_in: Any, console: Console
) -> None:
    queue.unknown()
    console.watch(page)
    sign_in(page, reviewer)
    page.goto(f"{live_server.url}/queue/")
    expect(page.locator("html")).to_have_attribute("data-portal-js", "ready")  # our static script ran, after htmx
    polls: list[str] = []
    page.on("request", lambda request: polls.append(request.url) if request.headers.get("hx-request") else None)
    with page.expect_response(re.compile(r".*/queue/.*")):
        page.evaluate("htmx.trigger('#queue', 'refresh')")
    assert len(polls) == 1
    queue.mismatch()  # a new item appears on the next poll
    page.evaluate("Object.defineProperty(document, 'hidden', {value: true, configurable: true})")
    page.evaluate("htmx.trigger('#queue', 'refresh')")
    page.wait_for_timeout(500)
    assert len(polls) == 1  # cancelled: the tab is hidden
    assert page.locator("[data-queue-total]").inner_text() == "1"
    page.evaluate("Object.defineProperty(document, 'hidden', {value: false, configurable: true})")
    with page.expect_response(re.compile(r".*/queue/.*")):
        page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")  # shown again: refresh at once
    expect(page.locator("[data-queue-total]")).to_have_text("2")
    assert len(polls) == 2
    # Leave the polling page with nothing in flight: the database is emptied after the test, and a poll the live
    # server is still answering holds a table lock on SQLite's shared in-memory database (CI, 2026-12-07).
    page.wait_for_load_state("networkidle")
    page.goto("about:blank")


def test_an_inline_script_is_blocked_by_the_csp(live_server: Any, page: Any) -> None:
    """The canary page (routed only under settings.TESTING) holds an inline script; the enforced policy blocks it."""
    page.add_init_script(
        "window.__violations = [];"
        "document.addEventListener('securitypolicyviolation', e => window.__violations.push("
        "{directive: e.effectiveDirective, blocked: e.blockedURI, disposition: e.disposition}));"
    )
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text) if message.type == "error" else None)
    page.goto(f"{live_server.url}/_testing/csp-canary/")
    expect(page.locator("html")).to_have_attribute("data-portal-js", "ready")  # our static script ran
    assert page.title() == "CSP canary"
    assert page.locator("#canary").inner_text() == "CSP canary"  # the inline script did not run
    violations = page.evaluate("window.__violations")
    assert {"directive": "script-src-elem", "blocked": "inline", "disposition": "enforce"} in violations
    assert any("Content Security Policy" in text for text in messages)


def test_the_open_review_page_renews_its_lease(
    queue: Queue, reviewer: Any, live_server: Any, page: Any, sign_in: Any, console: Console
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    item = queue.unknown()
    console.watch(page)
    page.clock.install()  # the page's timers run on a clock the test moves; the server keeps real time
    sign_in(page, reviewer)
    page.goto(f"{live_server.url}/review/{item.pk}/")
    page.click("[data-claim-this]")
    page.wait_for_selector("[data-lease-renew-url]")
    every = int(page.locator("[data-lease-renew-url]").get_attribute("data-lease-renew-seconds") or "0")
    assert every == 300  # a third of the 15-minute lease
    ReviewLease.objects.filter(verification=item).update(expires_at=timezone.now() + timedelta(seconds=30))
    page.mouse.move(40, 40)  # the reviewer is at work: renewals follow activity only (issue 11 item 7)
    page.mouse.move(60, 80)
    with page.expect_response(re.compile(rf".*/review/{item.pk}/renew$")) as renewal:
        page.clock.run_for(every * 1000 + 1000)
    assert renewal.value.status == 200
    expect(page.locator("[data-lease-status]")).to_have_text(re.compile(r"^\s*Yours until"))
    lease = ReviewLease.objects.get(verification=item)
    assert lease.expires_at > timezone.now() + timedelta(minutes=14)

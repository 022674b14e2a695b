"""The verdict history (issue 6 §1): every verification, each filter, keyset pages, the URL as the shared view,
the htmx fragment, and a constant number of queries per page whatever the table holds."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.history.conftest import Bulk, Story, client_for, decide
from tests.portal.conftest import Queue
from verification.errors import ServiceError
from verification.kernel.reasons import Reason
from verification.records import selectors_history as hs
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_request_evidence
from verification.runs.models import Verification

pytestmark = pytest.mark.django_db

ROW = re.compile(r'data-history-row="([0-9a-f-]{36})"')


def ids(filters: dict[str, str], *, now: Any = None) -> set[Any]:
    return set(hs.history_queryset(filters=filters, now=now or timezone.now()).values_list("pk", flat=True))


def page_ids(client: Any, url: str) -> list[str]:
    response = client.get(url)
    assert response.status_code == 200
    return ROW.findall(response.content.decode())


def test_every_verification_is_in_the_history_newest_first(story: Story, queue: Queue) -> None:
    other = queue.mismatch()
    expected = list(Verification.objects.order_by("-created_at", "-id").values_list("pk", flat=True))
    assert len(expected) == 3
    got = hs.history_page(filters={}, cursor=None, limit=50, now=timezone.now())
    assert [r.verification.pk for r in got.rows] == expected
    row = {r.verification.pk: r for r in got.rows}
    failed = row[story.failed.pk]
    assert (failed.state, failed.verdict, failed.authority, failed.decided_by) == (
        "superseded", "FAIL", "human", "rita"
    )
    assert failed.head_kind == "decision"
    passed = row[story.passed.pk]
    assert (passed.state, passed.verdict, passed.determination, passed.authority, passed.decided_by) == (
        "succeeded", "PASS", "met", "deterministic", "automated verifier"  # issue 14: not "portal"
    )
    mismatch = row[other.pk]
    assert (mismatch.state, mismatch.verdict, mismatch.flagged, mismatch.reason) == (
        "in_review", "MISMATCH", True, "baseline-changed"
    )


def test_the_state_of_each_kind_of_verification(story: Story, queue: Queue, reviewer: Any, bulk: Bulk) -> None:
    now = timezone.now()
    in_review = queue.unknown("still in the queue")
    awaiting = queue.unknown("sent back")
    review_claim(user=reviewer, verification=awaiting)
    review_request_evidence(
        user=reviewer, verification=awaiting, rationale="need the config", request_key=new_request_key()
    )
    decided = queue.unknown("decided")
    decide(reviewer, decided, "FAIL", rationale="wrong retries")
    expired = queue.expired_pending("overdue")
    running = queue.expired_pending("not yet due", ago=timedelta(minutes=1), deadline=3600)
    queued = bulk.add(1, verdict=None, automated_verdict=None, determination=None, reason=None, attempts=0)[0]
    failed = bulk.add(1, verdict=None, automated_verdict=None, determination=None, reason=None, failed_at=now)[0]
    expected = {
        "queued": {queued.pk},
        "failed": {failed.pk},
        "running": {running.pk},
        "in_review": {in_review.pk, expired.pk},
        "awaiting_evidence": {awaiting.pk},
        "decided": {decided.pk},
        "superseded": {story.failed.pk},
        "succeeded": {story.passed.pk},
    }
    assert set(expected) == set(hs.STATES)
    for state, wanted in expected.items():
        assert ids({"state": state}, now=now) == wanted, state
    # The filter's predicates and the label the page shows are one definition, row by row.
    shown = dict(Verification.objects.annotate(s=hs.state_expression(now)).values_list("pk", "s"))
    for state, wanted in expected.items():
        assert {pk for pk, label in shown.items() if label == state} == wanted, state
    # in_review is exactly the reviewer queue (issue 5).
    from verification.reviews.selectors import queue_items

    assert set(queue_items(now=now).values_list("pk", flat=True)) == expected["in_review"]


def test_each_filter(story: Story, queue: Queue, reviewer: Any, reviewer2: Any) -> None:
    now = timezone.now()
    mismatch = queue.mismatch("Config drift")
    semantic = queue.cited_conflict("Tests claim")
    expired = queue.expired_pending("Scan overdue")
    not_run = queue.not_run("No result")
    sent_back = queue.unknown("Sent back")
    review_claim(user=reviewer2, verification=sent_back)
    review_request_evidence(user=reviewer2, verification=sent_back, rationale="more", request_key=new_request_key())
    everyone = set(Verification.objects.values_list("pk", flat=True))
    assert ids({}) == everyone
    assert ids({"determination": "met"}) == {story.passed.pk}
    assert ids({"determination": "not_met"}) == {story.failed.pk, mismatch.pk, semantic.pk}
    # SPEC §3: filtered as read, like the item: the PENDING past its deadline reads as its expiry verdict.
    assert ids({"determination": "cannot_determine"}) == {not_run.pk, sent_back.pk, expired.pk}
    assert ids({"determination": "none"}) == set()
    assert ids({"verdict": "MISMATCH"}) == {mismatch.pk}
    assert ids({"verdict": "PENDING"}) == set()
    assert ids({"authority": "human"}) == {story.failed.pk}
    assert ids({"authority": "semantic"}) == {semantic.pk}  # the head is the semantic worker's result receipt
    assert ids({"authority": "deterministic"}) == everyone - {story.failed.pk, semantic.pk}
    assert ids({"authority": "imported"}) == set()
    assert ids({"flagged": "true"}) == {mismatch.pk, semantic.pk, expired.pk, not_run.pk, sent_back.pk}
    assert ids({"flagged": "false"}) == {story.failed.pk, story.passed.pk}
    # Reasons as read: a PENDING past its deadline reads pending-expired (SPEC §2).
    assert ids({"reason": "pending-expired"}) == {expired.pk}
    assert ids({"reason": "baseline-changed"}) == {mismatch.pk}
    assert ids({"reason": "human-decision"}) == {story.failed.pk}
    assert ids({"reviewer": "rita"}) == {story.failed.pk}
    assert ids({"reviewer": "rob"}) == {sent_back.pk}
    assert ids({"reviewer": "nobody-at-all"}) == set()
    assert ids({"subject": "drift"}) == {mismatch.pk}
    assert ids({"subject": str(story.task.pk)}) == {story.failed.pk, story.passed.pk}
    assert ids({"subject": str(semantic.pk)}) == {semantic.pk}
    # Filters combine.
    assert ids({"flagged": "true", "determination": "not_met", "authority": "deterministic"}) == {mismatch.pk}
    # Date range (inclusive days, on created_at). Each item's own day: the expired PENDING was made two hours before
    # now, i.e. yesterday when the test runs in the first two hours of the day.
    day_of = {pk: timezone.localtime(at).date() for pk, at in Verification.objects.values_list("pk", "created_at")}
    first, last = min(day_of.values()), max(day_of.values())
    assert last == timezone.localtime(now).date()
    assert ids({"since": first.isoformat(), "until": last.isoformat()}) == everyone
    assert ids({"since": last.isoformat(), "until": last.isoformat()}) == {pk for pk, d in day_of.items() if d == last}
    assert ids({"until": (first - timedelta(days=1)).isoformat()}) == set()
    assert ids({"since": (last + timedelta(days=1)).isoformat()}) == set()


def test_a_date_range_selects_by_day(bulk: Bulk) -> None:
    now = timezone.now()
    rows = bulk.add(10, start=now, step=timedelta(days=1))
    today = timezone.localtime(now).date()
    since, until = today - timedelta(days=5), today - timedelta(days=3)
    assert ids({"since": since.isoformat(), "until": until.isoformat()}) == {r.pk for r in rows[3:6]}


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("verdict=MAYBE", "invalid-request"),
        ("determination=yes", "invalid-request"),
        ("authority=oracle", "invalid-request"),
        ("flagged=maybe", "invalid-request"),
        ("reason=not-a-code", "invalid-request"),
        ("state=limbo", "invalid-request"),
        ("since=yesterday", "invalid-request"),
        ("cursor=%%%", "invalid-request"),
    ],
)
def test_a_bad_filter_is_refused_with_its_reason_and_shows_no_rows(story: Story, manager: Any, query: str,
                                                                   code: str) -> None:
    client = client_for(manager)
    page = client.get(f"/history/?{query}").content.decode()
    assert f'data-refusal="{code}"' in page and not ROW.search(page)
    assert "well-formed JSON" not in page  # web words on the web (issue 14)
    export = client.get(f"/history/export.csv?{query}")
    if "cursor" not in query:  # exports take no cursor (they stream every matching row)
        assert export.status_code == 400 and export.content.decode().startswith(f"{code}:")


def test_unknown_filters_are_refused_by_the_selector() -> None:
    with pytest.raises(ServiceError) as info:
        hs.history_queryset(filters={"colour": "red"}, now=timezone.now())
    assert info.value.reason is Reason.INVALID_REQUEST


def test_keyset_pages_cover_the_history_once_in_order(bulk: Bulk, manager: Any, settings: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from reviewportal.history import views

    monkeypatch.setattr(views, "PAGE_SIZE", 7)
    now = timezone.now()
    bulk.add(20, start=now, step=timedelta(seconds=1))
    bulk.add(5, start=now - timedelta(seconds=5), step=timedelta(0))  # ties on created_at: the id breaks them
    expected = [str(pk) for pk in Verification.objects.order_by("-created_at", "-id").values_list("pk", flat=True)]
    client = client_for(manager)
    seen: list[str] = []
    url = "/history/"
    while True:
        html = client.get(url).content.decode()
        rows = ROW.findall(html)
        assert len(rows) <= 7
        seen += rows
        found = re.search(r'href="(/history/\?[^"]*cursor=[^"]+)"[^>]*rel="next"', html)
        if not found:
            break
        url = found.group(1).replace("&amp;", "&")
    assert seen == expected


def test_the_filters_live_in_the_url(story: Story, queue: Queue, manager: Any) -> None:
    mismatch = queue.mismatch()
    client = client_for(manager)
    url = "/history/?flagged=true&verdict=MISMATCH&subject=config"
    html = client.get(url).content.decode()
    assert ROW.findall(html) == [str(mismatch.pk)]
    # The form shows what the URL says, so the page is the view the link was shared for.
    assert re.search(r'<option value="MISMATCH" selected>', html)
    assert re.search(r'<option value="true" selected>', html)
    assert 'value="config"' in html
    # The export links carry the same filters.
    assert 'href="/history/export.csv?flagged=true&amp;subject=config&amp;verdict=MISMATCH"' in html


def test_htmx_gets_the_list_fragment_and_every_hx_get_has_a_fallback(story: Story, manager: Any) -> None:
    client = client_for(manager)
    page = client.get("/history/").content.decode()
    fragment = client.get("/history/", headers={"HX-Request": "true"}).content.decode()
    restore = client.get("/history/", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in page and "<html" not in fragment and "<html" in restore.content.decode()
    assert 'id="history"' in fragment and ROW.findall(fragment) == ROW.findall(page)
    for html in (page, fragment):
        for tag in re.findall(r"<(?:a|form)\b[^>]*\bhx-get=[^>]*>", html):
            assert re.search(r'\b(href|action)="', tag), tag
    assert 'action="/history/"' in page and 'hx-push-url="true"' in page


def test_the_page_is_csp_clean(story: Story, manager: Any) -> None:
    for url in ("/history/", f"/history/subject/{story.task.pk}/"):
        html = client_for(manager).get(url).content.decode()
        assert " style=" not in html and "<style" not in html
        assert re.findall(r"<script\b[^>]*>", html) == [
            tag for tag in re.findall(r"<script\b[^>]*>", html) if ' src="/static/' in tag
        ]
        assert " on" not in re.sub(r"\s(one|only|on record|onto)\b", "", "".join(re.findall(r"<[a-z][^>]*>", html)))


def test_the_history_page_costs_the_same_queries_with_10_and_1000_rows(story: Story, bulk: Bulk, manager: Any,
                                                                        reviewer: Any, queue: Queue) -> None:
    decide(reviewer, queue.unknown("decided"), "PASS", rationale="checked by hand", cited=queue.evidence_ids(
        queue.made[-1]))
    client = client_for(manager)
    urls = ("/history/", "/history/?flagged=true", "/history/?authority=deterministic", "/history/?state=succeeded",
            "/history/?reviewer=rita", f"/history/?subject={story.task.pk}")
    for url in urls:
        client.get(url)  # warm up caches (content types, permissions)

    def counts() -> tuple[int, ...]:
        out = []
        for url in urls:
            with CaptureQueriesContext(connection) as captured:
                assert client.get(url).status_code == 200
            out.append(len(captured.captured_queries))
        with CaptureQueriesContext(connection) as captured:
            client.get("/history/", headers={"HX-Request": "true"})
        out.append(len(captured.captured_queries))
        return tuple(out)

    bulk.add(7, verdict="UNKNOWN", automated_verdict="UNKNOWN", determination="cannot_determine", flagged=True,
             reason="missing-baseline")
    small = counts()
    bulk.add(1000, verdict="UNKNOWN", automated_verdict="UNKNOWN", determination="cannot_determine", flagged=True,
             reason="missing-baseline")
    bulk.add(500)
    assert Verification.objects.count() > 1500
    large = counts()
    assert small == large, (small, large)
    assert max(small) <= 13, small  # session, user, permissions, the page, its heads, its decisions, reviewers, reasons


def test_the_shared_address_is_the_clean_one(story: Story, manager: Any) -> None:
    client = client_for(manager)
    # Without JavaScript the GET form sends every field: the page redirects to the address without the empty ones.
    response = client.get("/history/?subject=&verdict=FAIL&flagged=&state=")
    assert (response.status_code, response["Location"]) == (302, "/history/?verdict=FAIL")
    assert client.get("/history/?subject=&verdict=")["Location"] == "/history/"
    # With htmx the list comes back with the clean address to push into the location bar.
    fragment = client.get("/history/?subject=&verdict=FAIL&flagged=", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and fragment["HX-Push-Url"] == "/history/?verdict=FAIL"
    assert ROW.findall(fragment.content.decode()) == [str(story.failed.pk)]


def test_every_bad_filter_is_named_at_once_in_plain_words_beside_its_field(story: Story, manager: Any) -> None:
    """issue 14: not the API's "invalid-request — The request is well-formed JSON but…", and not only the first."""
    page = client_for(manager).get("/history/?verdict=MAYBE&flagged=maybe&since=yesterday&subject=x").content.decode()
    assert 'data-refusal="invalid-request"' in page and not ROW.search(page)
    assert "Check the filters</strong> — 3 problems" in page
    for name in ("verdict", "flagged", "since"):
        assert f'data-problem="{name}"' in page and f'data-field-error="{name}"' in page
    assert 'data-field-error="subject"' not in page
    assert "well-formed JSON" not in page
    damaged = client_for(manager).get("/history/?cursor=%25%25%25").content.decode()
    assert "This page link is out of date or damaged" in damaged

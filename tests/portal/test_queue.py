"""The queue (issue 5 §2; SPEC §3): exactly the flagged verifications no human decision superseded, resolved when
read; its order, filters, counts, keyset pages, the htmx fragment, and a constant number of queries per page."""

from __future__ import annotations

import dataclasses
import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reviewportal.portal.presenters import queue_page
from tests.portal.conftest import Queue
from tests.verification.service_world import LOG, imported_entry, inline
from verification.records import selectors_history as hs
from verification.reviews.selectors import RANK_NAMES, queue_counts, queue_items, review_queue
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_decide, review_request_evidence
from verification.runs.models import Task, Verification
from verification.runs.services.tasks import task_create

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _ids(queryset: Any) -> list[Any]:
    return list(queryset.values_list("pk", flat=True))


def test_the_queue_is_exactly_the_flagged_undecided_items_in_order(queue: Queue, reviewer: Any) -> None:
    unknown = queue.unknown()
    not_run = queue.not_run()
    det_fail = queue.deterministic_fail()
    conflict = queue.cited_conflict()
    mismatch = queue.mismatch()
    expired = queue.expired_pending()
    queue.clean_pass()
    decided = queue.unknown("decided")
    review_claim(user=reviewer, verification=decided)
    review_decide(user=reviewer, verification=decided, verdict="FAIL", rationale="no", cited_evidence_ids=[],
                  request_key=new_request_key())
    sent_back = queue.unknown("sent back")
    review_claim(user=reviewer, verification=sent_back)
    review_request_evidence(user=reviewer, verification=sent_back, rationale="more", request_key=new_request_key())

    now = timezone.now()
    items = list(queue_items(now=now))
    # MISMATCH, semantic cited_conflict, other flagged, UNKNOWN (oldest first: the expired PENDING is 2 h old), NOT_RUN
    assert [v.pk for v in items] == [mismatch.pk, conflict.pk, det_fail.pk, expired.pk, unknown.pk, not_run.pk]
    assert [RANK_NAMES[v.queue_rank] for v in items] == [  # type: ignore[attr-defined]
        "MISMATCH", "semantic cited_conflict", "other flagged", "UNKNOWN", "UNKNOWN", "NOT_RUN"
    ]
    assert {v.pk for v in items} <= set(_ids(review_queue(now=now)))


def test_an_expired_pending_enters_the_queue_when_its_deadline_passes(queue: Queue) -> None:
    queue._task("pending")
    queue.world.contract(imported_entry(deadline_seconds=600, on_expiry="UNKNOWN"))
    submitted = timezone.now()
    verification, _ = queue.world.submit_and_run({"evidence": [inline("log", LOG)]}, now=submitted)
    assert verification.verdict == "PENDING" and not verification.flagged
    assert verification.pk not in _ids(queue_items(now=submitted + timedelta(seconds=599)))
    later = submitted + timedelta(seconds=601)
    [row] = list(queue_items(now=later))
    assert row.pk == verification.pk and row.queue_reason == "pending-expired"  # type: ignore[attr-defined]
    page = queue_page(now=later, filters={}, cursor=None, limit=10)
    # issue 14: the same verdict and authority as the history shows (one read-time derivation, the head's authority)
    assert (page.rows[0].verdict, page.rows[0].reason, page.rows[0].authority) == (
        "UNKNOWN", "pending-expired", "deterministic"
    )
    [in_history] = hs.history_page(filters={}, cursor=None, limit=10, now=later).rows
    assert (in_history.verdict, in_history.reason, in_history.authority) == (
        page.rows[0].verdict, page.rows[0].reason, page.rows[0].authority
    )
    verification.refresh_from_db()
    assert verification.verdict == "PENDING"  # resolved when read, never written back (SPEC §2)


def test_a_superseded_verification_leaves_the_queue_for_its_rerun(queue: Queue) -> None:
    first = queue.unknown()
    second, _ = queue.world.submit_and_run({"evidence": [inline("config", b"retries = 9\n")]})
    assert second.supersedes_id == first.pk
    assert _ids(queue_items(now=timezone.now())) == [second.pk]


def test_filters_counts_and_reasons(queue: Queue) -> None:
    queue.unknown("alpha")
    queue.unknown("beta")
    queue.cited_conflict("gamma")
    not_run = queue.not_run("delta")
    expired = queue.expired_pending("epsilon", ago=timedelta(days=2))
    now = timezone.now()

    def page(**filters: str) -> list[str]:
        return [row.verification.task.title for row in queue_page(now=now, filters=filters, cursor=None, limit=50).rows]

    assert page(reason="missing-baseline") == ["alpha #1", "beta #2"]
    assert page(reason="pending-expired") == ["epsilon #5"]
    assert page(authority="semantic") == ["gamma #3"]
    assert sorted(page(authority="imported")) == ["delta #4", "epsilon #5"]
    assert page(age="1d") == ["epsilon #5"]
    assert page(subject="gam") == ["gamma #3"]
    assert page(subject=str(not_run.task_id)) == ["delta #4"]
    assert page(subject=str(uuid.uuid4())) == []
    assert queue_counts(now=now) == [
        ("missing-baseline", 2), ("cited-conflict", 1), ("no-result", 1), ("pending-expired", 1)
    ]
    assert expired.verdict == "PENDING"


@pytest.mark.parametrize(
    "query", ["reason=not-a-code", "authority=oracle", "age=3y", "cursor=garbage", "colour=red"]
)
def test_a_bad_filter_is_refused_with_its_reason(queue: Queue, reviewer: Any, query: str) -> None:
    queue.unknown()
    response = _client(reviewer).get(f"/queue/?{query}")
    assert response.status_code == 200  # the unfiltered queue, with the refusal above it
    if query.startswith("colour"):
        assert "invalid-request" not in response.content.decode()  # unknown parameters are not filters: ignored
        return
    assert "invalid-request" in response.content.decode() and 'role="alert"' in response.content.decode()


def test_keyset_pages_cover_the_queue_once_in_order(queue: Queue, reviewer: Any, settings: Any) -> None:
    settings.REVIEWPORTAL_QUEUE_PAGE_SIZE = 2
    made = [queue.unknown(f"u{i}") for i in range(3)] + [queue.mismatch("m"), queue.not_run("n")]
    expected = _ids(queue_items(now=timezone.now()))
    assert set(expected) == {v.pk for v in made}
    client = _client(reviewer)
    seen: list[str] = []
    url = "/queue/"
    for _ in range(5):
        html = client.get(url).content.decode()
        seen += re.findall(r'data-queue-row="([0-9a-f-]+)"', html)
        found = re.search(r'href="(/queue/\?[^"]*cursor=[^"]+)"[^>]*rel="next"', html)
        if found is None:
            break
        url = found.group(1).replace("&amp;", "&")
    assert seen == [str(pk) for pk in expected]


def test_htmx_gets_the_list_fragment_and_every_hx_get_has_a_fallback(queue: Queue, reviewer: Any) -> None:
    queue.unknown()
    client = _client(reviewer)
    page = client.get("/queue/").content.decode()
    fragment = client.get("/queue/", headers={"HX-Request": "true"}).content.decode()
    restore = client.get("/queue/", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in page and "<html" not in fragment and "<html" in restore.content.decode()
    assert fragment.lstrip().startswith("{#") is False and 'id="queue"' in fragment
    # The list polls every 10 s (paused on a hidden tab by portal.js, which also triggers "refresh").
    assert 'hx-trigger="every 10s, refresh"' in fragment and "data-poll" in fragment
    for html in (page, fragment):
        for tag in re.findall(r"<(?:a|form|div)\b[^>]*\bhx-get=[^>]*>", html):
            assert tag.startswith("<div") or re.search(r'\b(href|action)="', tag), tag
    # The #queue poll target is a div: the page itself (its link or its form) is the fallback without JavaScript.
    assert 'action="/queue/"' in page


def test_the_queue_page_costs_the_same_queries_with_10_and_1000_items(queue: Queue, reviewer: Any) -> None:
    queue.mismatch()  # through the services, with a real head receipt: first in queue order, so on every page 1
    task = task_create(actor=queue.world.owner.actor, title="bulk")
    client = _client(reviewer)
    client.get("/queue/")  # warm up caches (content types, rubric parsing)

    def add(n: int) -> None:
        now = timezone.now()
        reasons = ["missing-baseline", "no-result", "baseline-changed", "cited-conflict", "digest-differs"]
        verdicts = ["UNKNOWN", "NOT_RUN", "MISMATCH", "FAIL", "FAIL"]
        Verification.objects.bulk_create(
            Verification(
                rubric_hash="1" * 64,
                submission_hash=uuid.uuid4().hex * 2,
                task=task,
                cycle=1,
                verdict=verdicts[i % 5],
                reason=reasons[i % 5],
                flagged=True,
                flag_reason=f"needs_review: {reasons[i % 5]}",
                submitted_at=now - timedelta(minutes=i),
                created_at=now - timedelta(minutes=i),
            )
            for i in range(n)
        )

    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200
        return len(captured.captured_queries)

    add(9)
    assert Task.objects.count() >= 2 and queue_items(now=timezone.now()).count() == 10
    small = (count("/queue/"), count("/queue/?reason=missing-baseline"), count("/queue/?authority=semantic"))
    add(990)
    assert queue_items(now=timezone.now()).count() == 1000
    large = (count("/queue/"), count("/queue/?reason=missing-baseline"), count("/queue/?authority=semantic"))
    assert small == large, (small, large)
    fragment_small = count("/queue/")
    assert fragment_small == small[0]


def test_counts_are_reused_briefly_and_a_decision_forgets_them(queue: Queue, reviewer: Any, settings: Any) -> None:
    from django.core.cache import cache

    settings.REVIEWPORTAL_QUEUE_COUNTS_SECONDS = 60
    cache.clear()
    first = queue.unknown()
    now = timezone.now()
    assert queue_counts(now=now) == [("missing-baseline", 1)]
    queue.mismatch()
    assert queue_counts(now=now) == [("missing-baseline", 1)]  # a summary a few seconds old
    assert len(list(queue_items(now=timezone.now()))) == 2  # the list itself is always read now
    assert queue_counts(now=now, cached=False) == [("baseline-changed", 1), ("missing-baseline", 1)]
    review_claim(user=reviewer, verification=first)
    review_decide(user=reviewer, verification=first, verdict="FAIL", rationale="no", cited_evidence_ids=[],
                  request_key=new_request_key())
    assert queue_counts(now=timezone.now()) == [("baseline-changed", 1)]
    cache.clear()


@pytest.mark.postgres
def test_the_queue_order_is_served_by_its_index(queue: Queue) -> None:
    """The page query can walk the partial expression index in order (migration 0007) and stop after a page: the
    index expression is the one the queue orders by. (Scans and sorts are priced out, since a test table is tiny.)"""
    queue.unknown()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
    plan = queue_items(now=timezone.now())[:51].explain()
    assert "verification_review_queue_idx" in plan, plan
    assert "Sort" not in plan.split("->")[1], plan  # no sort above the walk: rows come out in queue order


#: The rows' markup as ``templates/portal/_queue_list.html`` rendered it through the template engine before the rows
#: were built by ``presenters.queue_rows_html`` (issue 15): the reference the presenter's rows must equal.
_TEMPLATE_ROWS = """{% for row in page.rows %}
      <tr data-queue-row="{{ row.pk }}" aria-selected="false" class="rank-{{ row.rank }}">
        <td>
          <a data-open href="{{ row.url }}">{{ row.title }}</a>
          <div class="muted small">cycle {{ row.cycle_text }} · <code>{{ row.short_id }}</code></div>
        </td>
        <td><code>{{ row.reason }}</code><div class="small">{{ row.reason_text }}</div></td>
        <td data-label="Verdict"><span class="verdict verdict-{{ row.verdict_class }}">{{ row.verdict }}</span>{% if row.rank_note %}<div class="muted small">{{ row.rank_note }}</div>{% endif %}</td>
        <td data-label="Authority">{{ row.authority_text }}{% if row.semantic %}<div class="badge model">model output</div>{% endif %}</td>
        <td data-label="Age" title="submitted {{ row.submitted_iso }}">{{ row.age_text }}</td>
        <td data-label="Held by">{% if row.holder_name %}{% if row.holder_pk == user.pk %}<strong>you</strong>{% else %}{{ row.holder_name }}{% endif %}<div class="muted small">until {{ row.lease_until }}</div>{% else %}<span class="muted">unclaimed</span>{% endif %}</td>
      </tr>
      {% endfor %}"""  # noqa: E501


def _markup(html: str) -> str:
    return re.sub(r">\s+<", "><", html).strip()


def test_the_rows_are_the_markup_the_template_made_with_every_value_escaped(
    queue: Queue, reviewer: Any, reviewer2: Any
) -> None:
    from django.template import Context, Template

    from reviewportal.portal.presenters import queue_rows_html

    hostile = queue.unknown('<script>alert("x")</script> & "quotes"')
    queue.cited_conflict()  # semantic: the model-output badge
    queue.expired_pending()  # ranks as UNKNOWN with its verdict's note
    queue.not_run()
    review_claim(user=reviewer, verification=hostile)  # held by the viewer: "you"
    review_claim(user=reviewer2, verification=queue.mismatch())  # held by another: their name and until when
    page = queue_page(now=timezone.now(), filters={}, cursor=None, limit=50)
    assert len(page.rows) == 5 and {r.holder_pk for r in page.rows} == {reviewer.pk, reviewer2.pk, None}
    assert any(r.semantic for r in page.rows) and any(r.rank_note for r in page.rows)
    for viewer in (reviewer, reviewer2):
        ours = str(queue_rows_html(page.rows, viewer_pk=viewer.pk))
        theirs = Template(_TEMPLATE_ROWS).render(Context({"page": page, "user": viewer}))
        assert _markup(ours) == _markup(theirs)
    ours = str(queue_rows_html(page.rows, viewer_pk=reviewer.pk))
    assert "<script>" not in ours
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;quotes&quot;" in ours
    assert ours.count("<strong>you</strong>") == 1 and ours.count("unclaimed") == 3 and reviewer2.username in ours
    # The page itself shows them in its table.
    html = _client(reviewer).get("/queue/").content.decode()
    assert _markup(ours) in _markup(html)


def test_an_items_semantic_badge_is_its_outcome_as_read_without_reading_the_others(queue: Queue) -> None:
    from verification.reviews.selectors import queue_slice

    queue.cited_conflict()  # a semantic criterion
    queue.unknown()
    queue.mismatch()
    queue.not_run()
    items = queue_slice(now=timezone.now(), filters={}, cursor=None, limit=50).items
    assert {item.semantic for item in items} == {True, False}
    for item in items:
        read = item.outcome is not None and any(c.semantic for c in item.outcome.criteria)
        assert item.semantic is read
    # A payload that names no semantic criterion is not read for the badge.
    plain = next(item for item in items if not item.semantic)
    fresh = dataclasses.replace(plain)  # a copy that has not read its outcome
    assert "outcome" not in fresh.__dict__ and fresh.semantic is False and "outcome" not in fresh.__dict__


def test_a_page_reads_its_items_verdicts_as_read_with_its_rows(queue: Queue) -> None:
    """An expired PENDING reads as its expiry verdict on the page (``read_state``), from the page's own statement: a
    page past deadlines costs no more queries than the first (issue 15: a page 30,000 rows deep read its phases in
    a query of its own)."""
    from verification.reviews.selectors import queue_slice
    from verification.runs.read_state import read_columns

    expired = queue.expired_pending()
    queue.unknown()
    now = timezone.now()
    with CaptureQueriesContext(connection) as captured:
        items = queue_slice(now=now, filters={}, cursor=None, limit=50).items
    reads = read_columns([item.verification for item in items], now=now)
    assert [item.verdict for item in items] == [reads[item.verification.pk].verdict for item in items]
    assert next(item for item in items if item.verification.pk == expired.pk).verdict == "UNKNOWN"
    assert not any("verification_readphase" in q["sql"].split(" FROM ", 1)[0] for q in captured.captured_queries)
    assert len(captured.captured_queries) == 2  # the page with its heads and verdicts, and the counts

"""The reviewer queue's pages (issue 5): thin views, one access decorator each, one service call, a render.

Every page works without JavaScript: htmx only swaps the queue list in place (``request.htmx``: the list fragment,
otherwise the whole page) and every ``hx-get`` has an ``href`` or a form action.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, Final
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from reviewportal.portal import loop, presenters
from reviewportal.portal.access import can_decide, reader_required, reviewer_required
from reviewportal.viewhelpers import page_links, refusal_words, verification_or_404
from reviewportal.webwords import field_problems
from verification.errors import ServiceError
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason, explain
from verification.reviews import selectors as review_selectors
from verification.reviews.models import ReviewAction
from verification.reviews.services import claims, decisions
from verification.runs.models import Verification

logger = logging.getLogger(__name__)
csp_logger = logging.getLogger("reviewportal.csp")

#: The largest CSP violation report read (browsers send a few hundred bytes).
MAX_CSP_REPORT_BYTES: Final = 16 * 1024
REASON_CODES: Final = frozenset(r.value for r in Reason)
AGE_FILTERS: Final = (
    ("", "any age"),
    ("1h", "older than 1 hour"),
    ("1d", "older than 1 day"),
    ("7d", "older than 7 days"),
)


def _status_of(exc: KernelError) -> int:
    if isinstance(exc, ServiceError):
        return exc.http_status
    if exc.reason is Reason.PERMISSION_DENIED:
        return 403
    return 422


# --- the queue -------------------------------------------------------------------------------------------------------


@require_GET
@reader_required
def queue(request: HttpRequest) -> HttpResponse:
    """The queue page, or (for htmx: the filter form and the 10-second poll) only its ``#queue`` list."""
    now = timezone.now()
    filters = {name: request.GET.get(name, "").strip() for name in sorted(review_selectors.QUEUE_FILTERS)}
    cursor = request.GET.get("cursor", "").strip() or None
    error = None
    problems: dict[str, str] = {}
    typed = dict(filters)
    limit = settings.REVIEWPORTAL_QUEUE_PAGE_SIZE
    try:
        page = presenters.queue_page(now=now, filters=filters, cursor=cursor, limit=limit)
    except KernelError as exc:
        error = refusal_words(exc)
        # issue 14: every bad filter at once, in plain words, beside its field (the selector's own checks, per filter)
        problems = field_problems(
            lambda one: review_selectors.filter_queue(review_selectors.queue_items(now=now), one, now=now), filters
        )
        filters, cursor = dict.fromkeys(filters, ""), None
        page = presenters.queue_page(now=now, filters={}, cursor=None, limit=limit)
    query = {k: v for k, v in filters.items() if v}
    here = reverse("portal:queue")
    context = {
        "self_url": f"{here}?{urlencode({**query, **({'cursor': cursor} if cursor else {})})}",
        **page_links(here, query, cursor=cursor, next_cursor=page.next_cursor),
        "count_links": [
            (
                code,
                n,
                explain(Reason(code)) if code in REASON_CODES else "",
                f"{here}?{urlencode({**query, 'reason': code})}",
            )
            for code, n in page.counts
        ],
        "page": page,
        "rows_html": presenters.queue_rows_html(page.rows, viewer_pk=request.user.pk),
        "filters": typed if problems else filters,  # the form keeps what was typed beside its problem
        "problems": problems,
        "query": query,
        "cursor": cursor,
        "error": error,
        "now": now,
        "can_decide": can_decide(request.user),
        # The reasons in the queue now (and the one filtered on): a filter that can match something.
        "reason_options": sorted({code for code, _ in page.counts} | ({typed["reason"]} - {""})),
        "authorities": review_selectors.AUTHORITIES,
        "ages": AGE_FILTERS,
        "progress": _progress(request, page.total),
        "nothing_for_you": loop.nothing_left(request),
    }
    # The empty state (issue 14): nothing in the queue, or nothing left this reviewer may claim; it lists what is
    # awaiting evidence.
    context["awaiting"] = (
        review_selectors.awaiting_evidence_items(limit=20)
        if context["nothing_for_you"] or (not page.rows and not query)
        else []
    )
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.history_restore_request:
        return render(request, "portal/_queue_list.html", context)
    return render(request, "portal/queue.html", context)


def _progress(request: HttpRequest, left: int | None = None) -> dict[str, Any]:
    """The review loop's progress line: decided in this session, left in the queue, the last one decided."""
    if left is None:
        left = sum(n for _, n in review_selectors.queue_counts(now=timezone.now()))
    last = loop.last_decided(request)
    return {
        "decided": loop.decided(request),
        "left": left,
        "last": {"pk": last, "title": loop.last_title(request)} if last else None,
        "skipped": len(loop.skipped(request)),
    }


def _open_next(request: HttpRequest) -> HttpResponse:
    """Claim the next item this reviewer may decide (not one they skipped this session) and open it; or the queue's
    empty state, which lists what is awaiting evidence."""
    try:
        claimed = claims.review_claim_next_id(user=request.user, skip=loop.skipped(request))
    except KernelError as exc:
        refusal = refusal_words(exc)
        messages.error(request, f"{refusal['text']} {refusal['detail']}".strip())
        return redirect("portal:queue")
    if claimed is None:
        loop.mark_nothing_left(request)
        messages.info(
            request,
            "Nothing left for you to claim: every queue item is decided, held by another reviewer, "
            "skipped by you, or one you may not decide.",
        )
        return redirect("portal:queue")
    return redirect("portal:review", verification_id=claimed)


@require_POST
@reviewer_required
def claim_next(request: HttpRequest) -> HttpResponse:
    """ "Next item": claim the first unclaimed item this reviewer may decide, with a lease, and open it."""
    return _open_next(request)


@require_GET
@reader_required
def awaiting(request: HttpRequest) -> HttpResponse:
    """Items a reviewer sent back for more evidence, and what the new evidence brought (issue 5 §3)."""
    return render(request, "portal/awaiting.html", {"items": review_selectors.awaiting_evidence_items()})


# --- one item --------------------------------------------------------------------------------------------------------


def _review_context(request: HttpRequest, view: presenters.ReviewView, now: datetime) -> dict[str, Any]:
    verification = view.verification
    lease = view.lease
    holds = lease is not None and lease.holder_id == request.user.pk
    bar = None
    if can_decide(request.user) and view.in_queue:
        barred = decisions.decision_bar(user=request.user, verification=verification, found=view.workers)
        bar = refusal_words(barred) if barred is not None else None
    context = {
        "view": view,
        "verification": verification,
        "now": now,
        "can_decide": can_decide(request.user),
        "holds": holds,
        "lease": lease,
        "lease_seconds": claims.lease_duration().total_seconds(),
        "renew_every": max(15, int(claims.lease_duration().total_seconds() // 3)),
        "request_key": decisions.new_request_key(),
        "form": {"verdict": "", "rationale": "", "cited": []},
        "refusal": None,
        "actions": [(a.value, a.label) for a in ReviewAction],
        "bar": bar,
        "max_rationale": decisions.MAX_RATIONALE_CHARS,
        "max_skip_reason": claims.MAX_SKIP_REASON_CHARS,
        "progress": _progress(request) if can_decide(request.user) else None,
        "skipped": str(verification.pk) in loop.skipped(request),
    }
    kept = loop.kept_form(request, verification.pk)
    if kept is not None:
        context.update(form=kept["form"], refusal=kept["refusal"], request_key=kept["request_key"])
    return context


@require_GET
@reader_required
def review(request: HttpRequest, verification_id: str) -> HttpResponse:
    now = timezone.now()
    # A user who may decide gets the rails' read with the item's (one round trip): the page says why they may not.
    reviewer = request.user if can_decide(request.user) else None
    view = presenters.review_view_of(verification_id, now=now, reviewer=reviewer)
    if view is None:
        raise Http404("no such verification")
    return render(request, "portal/review.html", _review_context(request, view, now))


@require_POST
@reviewer_required
def claim(request: HttpRequest, verification_id: str) -> HttpResponse:
    verification = verification_or_404(verification_id)
    barred = claims.review_bar(user=request.user, verification=verification)
    if barred is not None:  # issue 14: never hold an item the reviewer may not decide
        refusal = refusal_words(barred)
        messages.error(request, f"Not claimed. {refusal['text']} {refusal['detail']}".strip())
        return redirect("portal:review", verification_id=verification.pk)
    try:
        claims.review_claim(user=request.user, verification=verification)
    except KernelError as exc:
        refusal = refusal_words(exc)
        messages.error(request, f"{refusal['code']}: {refusal['text']} {refusal['detail']}".strip())
    return redirect("portal:review", verification_id=verification.pk)


@require_POST
@reviewer_required
def release(request: HttpRequest, verification_id: str) -> HttpResponse:
    verification = verification_or_404(verification_id)
    loop.drop_form(request, verification.pk)
    if claims.review_release(user=request.user, verification=verification):
        messages.info(request, "Released: the item is back in the queue for others.")
    return redirect("portal:queue")


@require_POST
@reviewer_required
def skip(request: HttpRequest, verification_id: str) -> HttpResponse:
    """ "Skip" (issue 14): release the item if held, record the skip and its optional reason on the security log, keep
    it out of this reviewer's next claims for the session, and open the next item."""
    verification = verification_or_404(verification_id)
    try:
        claims.review_skip(user=request.user, verification=verification, reason=request.POST.get("reason", ""))
    except KernelError as exc:
        messages.error(request, f"Not skipped: {refusal_words(exc)['detail']}")
        return redirect("portal:review", verification_id=verification.pk)
    loop.drop_form(request, verification.pk)
    loop.skip(request, verification.pk)
    title = verification.task.title if verification.task else str(verification.pk)
    messages.info(request, f"Skipped “{title}”: you will not be offered it again in this session.")
    return _open_next(request)


@require_POST
@reviewer_required
@never_cache
def renew(request: HttpRequest, verification_id: str) -> JsonResponse:
    """Called by static/js/portal.js while the review page is open: extend the lease (JSON).

    Only after the reviewer did something: the page sends ``active=1`` when a key, a click, a scroll or a pointer move
    happened since its last renewal, and sends nothing from a hidden tab. A renewal without it is refused
    (``review-lease-idle``, 409) and the lease left to run out, so an abandoned item returns to the queue."""
    verification = verification_or_404(verification_id)
    try:
        if request.POST.get("active") != "1":
            raise ServiceError(Reason.REVIEW_LEASE_IDLE, "no activity on the page since the last renewal", status=409)
        lease = claims.review_renew(user=request.user, verification=verification)
    except KernelError as exc:
        refusal = refusal_words(exc)
        return JsonResponse(
            {"code": refusal["code"], "message": f"{refusal['text']} {refusal['detail']}".strip()},
            status=_status_of(exc),
        )
    expires = timezone.localtime(lease.expires_at)
    return JsonResponse(
        {"expires_at": lease.expires_at.isoformat(), "expires_at_display": expires.strftime("%H:%M:%S %Z")}
    )


@require_POST
@reviewer_required
def decide(request: HttpRequest, verification_id: str) -> HttpResponse:
    """PASS, FAIL or "needs more evidence", with a rationale (and, for a PASS, the evidence relied on). The decision
    reads and locks the verification itself (``not-found``: 404), so the view reads nothing first (issue 15)."""
    verification = Verification(pk=verification_id)
    form = {
        "verdict": request.POST.get("verdict", ""),
        "rationale": request.POST.get("rationale", ""),
        "cited": request.POST.getlist("cited_evidence"),
    }
    request_key = request.POST.get("request_key", "")
    try:
        decision = decisions.review_decide(
            user=request.user,
            verification=verification,
            verdict=form["verdict"],
            rationale=form["rationale"],
            cited_evidence_ids=form["cited"],
            request_key=request_key,
        )
    except KernelError as exc:
        if exc.reason is Reason.PERMISSION_DENIED:
            raise PermissionDenied(exc.detail) from None
        if exc.reason is Reason.NOT_FOUND or not Verification.objects.filter(pk=verification.pk).exists():
            raise Http404("no such verification") from None  # a form refused before the lock: is there an item?
        # Post/Redirect/Get (issue 14): the refused form is kept in the session and the review page (a GET URL)
        # shows it with the refusal, so reload and back never resubmit or meet a 405. The same request key may try
        # again (it was not used), unless the key itself was the problem.
        key = request_key if exc.reason is not Reason.INVALID_REQUEST else decisions.new_request_key()
        loop.keep_form(request, verification.pk, {"form": form, "refusal": refusal_words(exc), "request_key": key})
        return redirect(reverse("portal:review", kwargs={"verification_id": verification.pk}) + "#refusal")
    loop.drop_form(request, verification.pk)
    decided = decision.verification  # the row the decision locked, read with its task
    title = decided.task.title if decided.task else str(verification.pk)
    if decision.action == ReviewAction.MORE_EVIDENCE:
        messages.success(request, f"Sent “{title}” back for more evidence: it leaves the queue until a re-run.")
    else:
        messages.success(request, f"Decided {decision.action} on “{title}”: a signed receipt supersedes the head.")
    loop.count_decision(request, verification.pk, decided.task.title if decided.task else "")
    return _open_next(request)


# --- the Content-Security-Policy's report endpoint, and a test-only canary ------------------------------------------


@csrf_exempt
@require_POST
def csp_report(request: HttpRequest) -> HttpResponseBase:
    """Browsers report CSP violations here (``report-uri``); each is logged as a warning. Never an error page.

    Anyone can post here, so (issue 11): at most ``REVIEWPORTAL_CSP_REPORTS_PER_MINUTE`` reports per client address
    a minute are logged (429 beyond, nothing logged), and every logged value has its control characters escaped, so
    a report cannot forge log lines or terminal escapes."""
    if not _csp_report_allowed(request):
        return HttpResponse(status=429, headers={"Retry-After": str(CSP_REPORT_WINDOW_SECONDS)})
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_CSP_REPORT_BYTES:
        return HttpResponse(status=413)
    raw = request.read(MAX_CSP_REPORT_BYTES + 1)[:MAX_CSP_REPORT_BYTES]
    try:
        report = json.loads(raw.decode("utf-8")).get("csp-report", {})
    except (ValueError, UnicodeDecodeError, AttributeError):
        report = {}
    if not isinstance(report, dict):
        report = {}
    csp_logger.warning(
        "csp violation: %s blocked %s on %s",
        _loggable(report.get("violated-directive") or report.get("effective-directive")),
        _loggable(report.get("blocked-uri")),
        _loggable(report.get("document-uri")),
    )
    return HttpResponse(status=204)


CSP_REPORT_WINDOW_SECONDS: Final = 60


def _csp_report_allowed(request: HttpRequest) -> bool:
    """A fixed one-minute window per client address (``REMOTE_ADDR`` only, like the login throttle), in the cache."""
    from django.core.cache import cache

    limit = int(getattr(settings, "REVIEWPORTAL_CSP_REPORTS_PER_MINUTE", 30))
    key = f"csp-report:{request.META.get('REMOTE_ADDR') or '?'}"
    cache.add(key, 0, timeout=CSP_REPORT_WINDOW_SECONDS)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr: a new window
        cache.set(key, 1, timeout=CSP_REPORT_WINDOW_SECONDS)
        count = 1
    return count <= limit


def _loggable(value: Any, limit: int = 200) -> str:
    """At most ``limit`` characters of ``value``, every non-printable one (newlines, ESC, NUL, U+2028, ...) escaped."""
    text = str(value or "?")[:limit]
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def _escaped(c: str) -> str:
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


@require_GET
def csp_canary(request: HttpRequest) -> HttpResponse:
    """Test-only (routed under ``settings.TESTING`` alone): a page with an inline script the CSP must block."""
    if not settings.TESTING:
        raise Http404
    return render(request, "portal/testing/csp_canary.html")

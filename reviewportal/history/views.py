"""History, timelines, findings, dashboards and exports (issue 6): thin views, one access decorator each, one selector
or service call, a render (STYLE §10).

Filters live in the URL (GET forms), so a filtered view is a link to share. htmx only swaps a page's list in place
(``request.htmx``: the fragment, otherwise the whole page) and every ``hx-get`` also has an ``href`` or a form
action, so every page works without JavaScript (STYLE §12).
"""

from __future__ import annotations

import json
from typing import Any, Final
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html_join
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from reviewportal import prg
from reviewportal.history import charts
from reviewportal.history.access import (
    can_close_findings,
    can_inspect_chains,
    can_view_findings,
    closer_required,
    findings_required,
    history_required,
)
from reviewportal.history.forms import FindingStepForm, HistoryFilterForm
from reviewportal.history.presenters import (
    HistoryPage,
    detail_words,
    finding_view,
    history_rows,
    subject_words,
    timeline_view,
)
from reviewportal.viewhelpers import refusal_words, verification_or_404
from reviewportal.webwords import field_problems
from verification.actors.services.actors import actor_for_user
from verification.errors import ServiceError
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.records import exports
from verification.records.selectors_dashboards import (
    PERIODS,
    Period,
    abstain_share,
    backlog_by_age,
    decisions_per_day,
    findings_flow,
    period_of,
    reviewer_counts,
    time_to_decision,
)
from verification.records.selectors_export import utc_stamp
from verification.records.selectors_findings import (
    FINDING_FILTERS,
    FINDING_KINDS,
    FINDING_STATES,
    FindingsPage,
    finding_get,
    findings_page,
)
from verification.records.selectors_history import (
    HISTORY_FILTERS,
    clean_filters,
    history_queryset,
    reviewer_choices,
)
from verification.reviews.services.findings import finding_acknowledge, finding_close
from verification.runs.read_state import reasons_in_use
from verification.runs.selectors import task_get
from verification.trust.models import Receipt

PAGE_SIZE: Final = 50
#: The admin area's chain view (issue 7), if it is routed: ``reverse(CHAIN_VIEW, kwargs={"verification_id": …})``.
#: ``history:chain`` is the one place that knows it; until it exists, receipts link to the proof document.
CHAIN_VIEW: Final = "adminportal:chain"


def _fragment(request: HttpRequest) -> bool:
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def _url(name: str, query: dict[str, str], **kwargs: Any) -> str:
    base = reverse(name, kwargs=kwargs or None)
    return f"{base}?{urlencode(query)}" if query else base


def _clean_redirect(request: HttpRequest, allowed: frozenset[str]) -> HttpResponse | None:
    """A plain GET form sends every field, empty ones too: send the browser to the same view without them, so the
    address to share is short (htmx gets the clean address through ``HX-Push-Url`` instead)."""
    if _fragment(request):
        return None
    kept = {k: v.strip() for k, v in request.GET.items() if k in allowed and v.strip()}
    if len(kept) == len(request.GET) and all(v == request.GET[k] for k, v in kept.items()):
        return None
    return redirect(f"{request.path}?{urlencode(kept)}" if kept else request.path)


# --- the history -----------------------------------------------------------------------------------------------------


@require_GET
@history_required
def history(request: HttpRequest) -> HttpResponse:
    """Every verification, filtered by the URL's query, newest first, in keyset pages (or, for htmx, the list)."""
    clean = _clean_redirect(request, HISTORY_FILTERS | {"cursor"})
    if clean is not None:
        return clean
    now = timezone.now()
    filters = clean_filters(request.GET)
    cursor = request.GET.get("cursor", "").strip() or None
    error = None
    problems: dict[str, str] = {}
    try:
        page = history_rows(filters=filters, cursor=cursor, limit=PAGE_SIZE, now=now)
    except KernelError as exc:
        error = refusal_words(exc)  # shown instead of rows: a bad filter must not look like a result
        page = HistoryPage(rows=[], next_cursor=None)
        # issue 14: every bad filter at once, in plain words, beside its field (the selector's own checks)
        problems = field_problems(lambda one: history_queryset(filters=one, now=now), filters)
    reviewers = reviewer_choices()
    context = {
        "form": HistoryFilterForm(
            request.GET or None, reviewers=reviewers, reasons=None if _fragment(request) else reasons_in_use()
        ),
        "page": page,
        "query": filters,
        "cursor": cursor,
        "error": error,
        "problems": problems,
        "now": now,
        "self_url": _url("history:history", {**filters, **({"cursor": cursor} if cursor else {})}),
        "next_url": _url("history:history", {**filters, "cursor": page.next_cursor}) if page.next_cursor else None,
        "first_url": _url("history:history", filters) if cursor else None,
        "csv_url": _url("history:export-csv", filters),
        "jsonl_url": _url("history:export-jsonl", filters),
    }
    if _fragment(request):
        return push_url(render(request, "history/_history_list.html", context), context["self_url"])
    return render(request, "history/history.html", context)


def _stream(request: HttpRequest, kind: str) -> HttpResponse:
    now = timezone.now()
    filters = clean_filters(request.GET)
    maker, content_type, extension = {
        "csv": (exports.history_csv, "text/csv; charset=utf-8", "csv"),
        "jsonl": (exports.history_jsonl, "application/jsonl; charset=utf-8", "jsonl"),
    }[kind]
    try:
        chunks = maker(user=request.user, filters=filters, now=now)
    except KernelError as exc:
        status = exc.http_status if isinstance(exc, ServiceError) else (
            403 if exc.reason is Reason.PERMISSION_DENIED else 400
        )
        refusal = refusal_words(exc)
        return HttpResponse(f"{refusal['code']}: {refusal['text']} {refusal['detail']}\n".encode(), status=status,
                            content_type="text/plain; charset=utf-8")
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="history-{utc_stamp(now)}.{extension}"'
    response["Cache-Control"] = "private, no-store"
    return response


@require_GET
@history_required
def export_csv(request: HttpRequest) -> HttpResponse:
    """The filtered history as CSV, streamed (constant memory whatever the row count)."""
    return _stream(request, "csv")


@require_GET
@history_required
def export_jsonl(request: HttpRequest) -> HttpResponse:
    """The filtered history as JSON Lines, streamed."""
    return _stream(request, "jsonl")


@require_GET
@history_required
def bundle(request: HttpRequest, verification_id: Any) -> HttpResponse:
    """A verification's proof bundle ``{"proof", "jwks"}`` (verify it with your pinned fingerprint and your head)."""
    verification = verification_or_404(verification_id)
    document = exports.proof_bundle(user=request.user, verification=verification)
    if document is None:
        raise Http404("this verification has no receipt yet")
    response = HttpResponse(
        json.dumps(document, indent=2, ensure_ascii=False) + "\n", content_type="application/json; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="proof-bundle-{verification.pk}.json"'
    response["Cache-Control"] = "private, no-store"
    return response


@require_GET
@history_required
def chain(request: HttpRequest, verification_id: Any, content_hash: str) -> HttpResponse:
    """The named hook every receipt links to (``history:chain``): the admin area's chain view when it is routed and
    the user may inspect chains; else, for them, the proof document; for everyone else the proof bundle."""
    verification = verification_or_404(verification_id)
    receipt = Receipt.objects.filter(verification=verification, content_hash=content_hash).first()
    if receipt is None:
        raise Http404("no such receipt in this verification")
    if can_inspect_chains(request.user):
        try:
            target = reverse(CHAIN_VIEW, kwargs={"verification_id": verification.pk})
        except NoReverseMatch:
            target = reverse("verification:proof", kwargs={"verification_id": str(verification.pk)})
        return redirect(f"{target}#seq-{receipt.seq}")
    return redirect("history:bundle", verification_id=verification.pk)


@require_GET
@history_required
def timeline(request: HttpRequest, task_id: Any) -> HttpResponse:
    """A subject's every cycle, verification and receipt, with supersession drawn (a fail, a repair, a pass)."""
    task = task_get(task_id)
    if task is None:
        raise Http404("no such subject")
    now = timezone.now()
    return render(
        request,
        "history/timeline.html",
        {"timeline": timeline_view(task, now=now), "now": now, "can_view_findings": can_view_findings(
            request.user)},
    )


# --- findings (SPEC §10) ---------------------------------------------------------------------------------------------


@require_GET
@findings_required
def findings(request: HttpRequest) -> HttpResponse:
    clean = _clean_redirect(request, FINDING_FILTERS | {"cursor"})
    if clean is not None:
        return clean
    filters = {k: request.GET.get(k, "").strip() for k in sorted(FINDING_FILTERS) if request.GET.get(k, "").strip()}
    cursor = request.GET.get("cursor", "").strip() or None
    error = None
    try:
        page = findings_page(filters=filters, cursor=cursor, limit=PAGE_SIZE)
    except KernelError as exc:
        error = refusal_words(exc)
        page = FindingsPage(rows=[], next_cursor=None, counts=[])
    states = {f.pk: s for f in page.rows if (s := getattr(f, "state", None))}
    context = {
        "page": page,
        "states": states,
        "filters": filters,
        "kinds": FINDING_KINDS,
        "finding_states": FINDING_STATES,
        "error": error,
        "self_url": _url("history:findings", {**filters, **({"cursor": cursor} if cursor else {})}),
        "next_url": _url("history:findings", {**filters, "cursor": page.next_cursor}) if page.next_cursor else None,
        "first_url": _url("history:findings", filters) if cursor else None,
        "count_links": [
            (kind, state, n, _url("history:findings", {"kind": kind, "state": state})) for kind, state, n in page.counts
        ],
    }
    if _fragment(request):
        return push_url(render(request, "history/_findings_list.html", context), context["self_url"])
    return render(request, "history/findings.html", context)


def _finding_or_404(finding_id: Any) -> Any:
    finding = finding_get(finding_id)
    if finding is None:
        raise Http404("no such finding")
    return finding


def _finding_context(request: HttpRequest, finding: Any, **extra: Any) -> dict[str, Any]:
    view = finding_view(finding)
    context = {
        "view": view,
        "subject": subject_words(finding.subject),
        "detail": detail_words(finding.detail),
        "other_refs": [subject_words(ref) for ref in view.other_refs],
        "can_close": can_close_findings(request.user),
        "form": FindingStepForm(),
        "refusal": None,
    }
    context.update(extra)
    return context


@require_GET
@findings_required
def finding(request: HttpRequest, finding_id: int) -> HttpResponse:
    found = _finding_or_404(finding_id)
    state = prg.kept(request, _kept_step(found.pk))
    if state is None:
        return render(request, "history/finding.html", _finding_context(request, found))
    form = FindingStepForm(prg.kept_data(state))
    form.is_valid()
    context = _finding_context(request, found, form=form, refusal=state.get("refusal"))
    return render(request, "history/finding.html", context)


def _kept_step(finding_id: Any) -> str:
    return f"finding:{finding_id}"


def _step(request: HttpRequest, finding_id: int, *, close: bool) -> HttpResponse:
    found = _finding_or_404(finding_id)
    form = FindingStepForm(request.POST)
    rationale = form.data.get("rationale", "") if isinstance(form.data.get("rationale", ""), str) else ""
    service = finding_close if close else finding_acknowledge
    try:
        if not form.is_valid():
            raise ServiceError(Reason.INVALID_REQUEST, "; ".join(e for errs in form.errors.values() for e in errs))
        service(actor=actor_for_user(request.user), user=request.user, finding=found, rationale=rationale)
    except KernelError as exc:
        if exc.reason is Reason.PERMISSION_DENIED:
            context = _finding_context(request, found, form=form, refusal=refusal_words(exc))
            return render(request, "history/finding.html", context, status=403)
        # Post/Redirect/Get (issue 14): the finding's page shows the rationale as typed and the refusal, so a reload
        # or the back button never resubmits or meets a 405.
        back = reverse("history:finding", kwargs={"finding_id": found.pk}) + "#refusal"
        return prg.refuse(request, _kept_step(found.pk), back, fields=request.POST, refusal=refusal_words(exc))
    prg.drop(request, _kept_step(found.pk))
    messages.success(request, "Closed: the rationale is on the finding's record." if close
                     else "Acknowledged: the rationale is on the finding's record.")
    return redirect("history:finding", finding_id=found.pk)


@require_POST
@closer_required
def finding_acknowledge_view(request: HttpRequest, finding_id: int) -> HttpResponse:
    return _step(request, finding_id, close=False)


@require_POST
@closer_required
def finding_close_view(request: HttpRequest, finding_id: int) -> HttpResponse:
    return _step(request, finding_id, close=True)


# --- dashboards (issue 6 §3) -----------------------------------------------------------------------------------------

PANELS: Final = ("backlog", "decisions", "time-to-decision", "reviewers", "abstains", "findings")
PANEL_TITLES: Final[dict[str, str]] = {
    "backlog": "Queue backlog by age",
    "decisions": "Decisions per day",
    "time-to-decision": "Time to decision",
    "reviewers": "Decisions per reviewer",
    "abstains": "Share of abstains (cannot_determine)",
    "findings": "Findings opened and closed",
}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _day(d: Any) -> str:
    return d.strftime("%m-%d")


def _panel(name: str, period: Period, now: Any) -> dict[str, Any]:
    """One dashboard panel: its chart, a table of the same numbers (also as escaped row markup: a template loop over
    a 90-day table's cells cost more than the query behind it), and a one-line summary."""
    panel = _panel_content(name, period, now)
    panel["rows_markup"] = format_html_join(
        "", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),) for row in panel["rows"])
    )
    return panel


def _panel_content(name: str, period: Period, now: Any) -> dict[str, Any]:
    title = PANEL_TITLES[name]
    if name == "backlog":
        buckets = backlog_by_age(now=now)
        chart = charts.horizontal_bars(title=title, rows=[(label, [("age-" + key, n)]) for key, label, n in buckets])
        total = sum(n for *_, n in buckets)
        return {"name": name, "title": title, "chart": chart, "summary": f"{total} in the queue now",
                "head": ["age", "items"], "rows": [[label, n] for _, label, n in buckets], "period_bound": False}
    if name == "decisions":
        days = decisions_per_day(period=period)
        chart = charts.stacked_columns(
            title=title,
            categories=[_day(d.day) for d in days],
            series=[
                charts.Series("pass", "PASS", [d.passed for d in days]),
                charts.Series("fail", "FAIL", [d.failed for d in days]),
                charts.Series("more", "needs more evidence", [d.more_evidence for d in days]),
            ],
        )
        rows = [[d.day.isoformat(), d.passed, d.failed, d.more_evidence] for d in days if d.total]
        return {"name": name, "title": title, "chart": chart, "summary": f"{sum(d.total for d in days)} in the period",
                "head": ["day", "PASS", "FAIL", "more evidence"], "rows": rows, "period_bound": True}
    if name == "time-to-decision":
        result = time_to_decision(period=period)
        chart = charts.horizontal_bars(
            title=title,
            rows=[("median", [("median", (result.median_seconds or 0) / 3600)]),
                  ("p90", [("p90", (result.p90_seconds or 0) / 3600)])],
            unit=" h",
        )
        return {"name": name, "title": title, "chart": chart,
                "summary": f"over {result.count} decision{'s' if result.count != 1 else ''} (submission to PASS/FAIL)",
                "head": ["", "time"], "rows": [["median", _duration(result.median_seconds)],
                                               ["p90", _duration(result.p90_seconds)]], "period_bound": True}
    if name == "reviewers":
        counts = reviewer_counts(period=period)
        chart = charts.horizontal_bars(
            title=title,
            rows=[(r.username, [("pass", r.passed), ("fail", r.failed), ("more", r.more_evidence)]) for r in counts],
            legend=[("pass", "PASS"), ("fail", "FAIL"), ("more", "needs more evidence")],
        )
        return {"name": name, "title": title, "chart": chart, "summary": f"{len(counts)} reviewer(s) active",
                "head": ["reviewer", "PASS", "FAIL", "more evidence"],
                "rows": [[r.username, r.passed, r.failed, r.more_evidence] for r in counts], "period_bound": True}
    if name == "abstains":
        share = abstain_share(period=period)
        chart = charts.stacked_columns(
            title=title,
            categories=[_day(d.day) for d in share.days],
            series=[
                charts.Series("abstain", "abstained", [d.abstained for d in share.days]),
                charts.Series("decided", "met, not_met or partial", [d.completed - d.abstained for d in share.days]),
            ],
        )
        percent = "–" if share.share is None else f"{share.share * 100:.1f}%"
        return {"name": name, "title": title, "chart": chart,
                "summary": f"{percent} of {share.completed} completed automated outcomes abstained",
                "head": ["day", "completed", "abstained", "share"],
                "rows": [[d.day.isoformat(), d.completed, d.abstained,
                          "–" if d.share is None else f"{d.share * 100:.1f}%"] for d in share.days if d.completed],
                "period_bound": True}
    flow = findings_flow(period=period)
    chart = charts.stacked_columns(
        title=title,
        categories=[_day(d.day) for d in flow.days],
        series=[charts.Series("opened", "opened", [d.opened for d in flow.days]),
                charts.Series("closed", "closed", [d.closed for d in flow.days])],
    )
    return {"name": name, "title": title, "chart": chart,
            "summary": f"{flow.opened} opened, {flow.closed} closed in the period; {flow.open_now} open now",
            "head": ["day", "opened", "closed"],
            "rows": [[d.day.isoformat(), d.opened, d.closed] for d in flow.days if d.opened or d.closed],
            "period_bound": True}


def _period(request: HttpRequest, now: Any) -> tuple[Period, dict[str, str] | None]:
    try:
        return period_of(request.GET.get("period", "").strip() or None, now=now), None
    except KernelError as exc:
        return period_of(None, now=now), refusal_words(exc)


@require_GET
@history_required
def dashboards(request: HttpRequest) -> HttpResponse:
    """Every panel for the chosen period (7, 30 or 90 days), each an SVG chart and its numbers."""
    now = timezone.now()
    period, error = _period(request, now)
    context = {
        "panels": [_panel(name, period, now) for name in PANELS],
        "period": period,
        "periods": list(PERIODS),
        "error": error,
        "now": now,
        "single": False,
    }
    if _fragment(request):
        return render(request, "history/_dashboards.html", context)
    return render(request, "history/dashboards.html", context)


@require_GET
@history_required
def dashboard(request: HttpRequest, panel: str) -> HttpResponse:
    """One panel on its own page (for a link or a bookmark)."""
    if panel not in PANELS:
        raise Http404("no such dashboard")
    now = timezone.now()
    period, error = _period(request, now)
    context = {
        "panels": [_panel(panel, period, now)],
        "period": period,
        "periods": list(PERIODS),
        "error": error,
        "now": now,
        "single": True,
        "panel_name": panel,
    }
    if _fragment(request):
        return render(request, "history/_dashboards.html", context)
    return render(request, "history/dashboards.html", context)

"""Reads of verifications, tasks and rubrics: the single read, the API list, the task's cycle."""

from __future__ import annotations

import base64
import binascii
import threading
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from django.db.models import Exists, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from verification.actors.models import Actor
from verification.errors import ServiceError
from verification.kernel.canonical import loads_strict
from verification.kernel.chain import format_created_at
from verification.kernel.contracts import Claim as KernelClaim
from verification.kernel.contracts import ContractAcceptance as KernelAcceptance
from verification.kernel.contracts import current_contract
from verification.kernel.criteria import CriterionKind, RegisteredRubric, register_rubric
from verification.kernel.determination import CriterionResult, Determination, Outcome, Status, roll_up
from verification.kernel.evaluation import integrity_from_payload, read_outcome
from verification.kernel.reasons import Reason, explain
from verification.kernel.verdicts import Verdict
from verification.runs.models import Claim, ContractAcceptance, Event, Rubric, Task, TaskCycle, Verification
from verification.runs.read_state import read_q
from verification.trust.models import Receipt
from verification.trust.selectors import head_of, receipt_payload, untrusted_head


def verification_get(verification_id: str | uuid.UUID) -> Verification | None:
    """The verification with this id, or None (also for a string that is not a UUID)."""
    try:
        pk = verification_id if isinstance(verification_id, uuid.UUID) else uuid.UUID(str(verification_id))
    except ValueError:
        return None
    return Verification.objects.filter(pk=pk).first()


def task_get(task_id: str | uuid.UUID) -> Task | None:
    """The task with this id, or None (also for a string that is not a UUID)."""
    try:
        pk = task_id if isinstance(task_id, uuid.UUID) else uuid.UUID(str(task_id))
    except ValueError:
        return None
    return Task.objects.filter(pk=pk).first()


def current_cycle(task: Task) -> int:
    """The task's current cycle: the highest cycle number (a task always has its first)."""
    number = TaskCycle.objects.filter(task=task).aggregate(top=Max("number"))["top"]
    return int(number) if number is not None else 1


def kernel_claims(task: Task) -> tuple[KernelClaim, ...]:
    """Every claim of the task (all cycles: the kernel keeps those of the cycle it asks about) as kernel records."""
    rows = Claim.objects.filter(task=task).select_related("actor").order_by("claimed_at", "id")
    return tuple(KernelClaim(row.actor.name, row.cycle, row.claimed_at) for row in rows)


def contract_of(task: Task, cycle: int) -> ContractAcceptance | None:
    """The contract of the cycle: its latest acceptance by the kernel's rule (``contracts.current_contract``)."""
    rows = list(
        ContractAcceptance.objects.filter(task=task, cycle=cycle).select_related("rubric", "accepted_by")
        .order_by("accepted_at", "id")
    )
    records = [
        KernelAcceptance(row.rubric_id, row.accepted_by.name, row.cycle, row.accepted_at) for row in rows
    ]
    chosen = current_contract(cycle=cycle, acceptances=records)
    if chosen is None:
        return None
    return rows[max(i for i, r in enumerate(records) if r is chosen)]


_RUBRIC_CACHE_MAX = 512


_rubric_lock = threading.Lock()


_rubric_cache: dict[str, RegisteredRubric] = {}


def rubric_get(rubric_hash: str) -> Rubric | None:
    return Rubric.objects.filter(rubric_hash=rubric_hash).first() if isinstance(rubric_hash, str) else None


def rubric_criteria(rubric: Rubric) -> RegisteredRubric:
    """The parsed criteria of a stored rubric, re-validated by the kernel once per process (a rubric never changes)."""
    with _rubric_lock:
        cached = _rubric_cache.get(rubric.rubric_hash)
    if cached is not None:
        return cached
    registered = register_rubric(loads_strict(rubric.document))
    with _rubric_lock:
        if len(_rubric_cache) >= _RUBRIC_CACHE_MAX:
            _rubric_cache.clear()
        _rubric_cache[rubric.rubric_hash] = registered
    return registered


#: The second seed names each result's ``primitive``; ours are named by criterion kind.
PRIMITIVES: Final[dict[str, str]] = {
    CriterionKind.DIGEST.value: "content_digest@1",
    CriterionKind.UNCHANGED.value: "baseline_unchanged@1",
    CriterionKind.SEMANTIC.value: "llm_judge@1",
    CriterionKind.IMPORTED.value: "imported_result@1",
}


NO_CONTRACT_PRIMITIVE: Final = "contract@1"


MAX_PAGE: Final = 200


def head_outcome(verification: Verification, *, now: datetime) -> tuple[Receipt | None, Outcome | None]:
    """The head receipt and its outcome as read at ``now`` (PENDING past its deadline expires; nothing is written).

    The outcome is None without a head, or for a head whose payload is not a run/result outcome.
    """
    head = head_of(verification)
    if head is None:
        return None, None
    payload = receipt_payload(head)
    if "criteria" not in payload:
        return head, None
    return head, read_outcome(payload, now=now)


def verification_status(verification: Verification, *, head: Receipt | None, outcome: Outcome | None) -> str:
    """The lifecycle, derived when read (SPEC §3): queued → running → succeeded | failed.

    No receipt: ``failed`` after the last attempt failed, ``queued`` before any attempt, else ``running`` (an
    attempt in progress or waiting to be retried). With a receipt: ``running`` while an unexpired PENDING decides the
    fold, else ``succeeded``.
    """
    if head is None:
        if verification.failed_at is not None:
            return Status.FAILED.value
        return Status.QUEUED.value if verification.attempts == 0 else Status.RUNNING.value
    if outcome is not None and outcome.status_running:
        return Status.RUNNING.value
    return Status.SUCCEEDED.value


def _criterion_flagged(result: CriterionResult, entries: Sequence[Mapping[str, Any]]) -> bool:
    """Would this criterion alone be flagged? The kernel's roll-up of it, with the proof of the items it cites."""
    cited = {e for k in result.checks for e in k.evidence_ids}
    proof = integrity_from_payload([e for e in entries if str(e.get("evidence_id")) in cited])
    return roll_up([result], integrity=proof, now=None).flagged


def _rationale(result: CriterionResult) -> str:
    decider = next((k for k in result.checks if k.reason is result.reason), None)
    text = explain(result.reason)
    if decider is not None and decider.detail:
        text = f"{text} ({decider.detail})"
    return text


def _stored_pending(payload: Mapping[str, Any], criterion_id: str) -> tuple[str | None, str | None]:
    for c in payload.get("criteria", ()):
        if c.get("criterion") == criterion_id:
            for k in c.get("checks", ()):
                if k.get("deadline") is not None:
                    return str(k["deadline"]), k.get("on_expiry")
    return None, None


def _spans(result: CriterionResult, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    evidence = {str(e.get("id")): e for e in payload.get("evidence", ())}
    cited = sorted({e for k in result.checks for e in k.evidence_ids})
    spans: list[dict[str, Any]] = []
    for evidence_id in cited:
        item = evidence.get(evidence_id, {})
        base = {
            "evidence_id": evidence_id,
            "trust_tier": item.get("trust_tier"),
            "sha256": item.get("sha256"),
            "symbol": item.get("symbol"),
        }
        citations = [c for c in payload.get("citations", ()) if str(c.get("evidence_id")) == evidence_id]
        if not citations:
            spans.append(base)
        for c in citations:
            spans.append({**base, "start": c.get("start"), "end": c.get("end"), "quote_hash": c.get("quote_hash")})
    return spans


def _results(verification: Verification, outcome: Outcome, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    kinds: dict[str, str] = {}
    if verification.rubric is not None:
        kinds = {c.id: c.kind.value for c in rubric_criteria(verification.rubric).criteria}
    entries = list(payload.get("integrity_proof", ()))
    out = []
    for c in outcome.criteria:
        deadline, on_expiry = _stored_pending(payload, c.criterion_id)
        determination = c.determination
        out.append(
            {
                "criterion": c.criterion_id,
                "primitive": PRIMITIVES.get(kinds.get(c.criterion_id, ""), NO_CONTRACT_PRIMITIVE),
                "determination": determination.value if determination is not None else None,
                "rationale": _rationale(c),
                "evidence_spans": _spans(c, payload),
                "flagged": _criterion_flagged(c, entries),
                "verdict": c.verdict.value,
                "reason": c.reason.value,
                "authority": c.authority.value,
                "hard": c.hard,
                "deadline": deadline,
                "on_expiry": on_expiry,
            }
        )
    return out


#: How a verification whose head receipt is signed by a key the trust root does not know reads (SPEC §8): no verdict
#: is taken from it; it is flagged for review with ``key-not-in-pin-journal``, never ``met``.
UNTRUSTED_HEAD_VIEW: Final[Mapping[str, Any]] = {
    "determination": None,
    "score": None,
    "confidence": None,
    "flagged": True,
    "flag_reason": Reason.KEY_NOT_IN_PIN_JOURNAL.value,
    "verdict": {"results": []},
    "kernel_verdict": None,
    "reason": Reason.KEY_NOT_IN_PIN_JOURNAL.value,
}


def _latest_automated(verification: Verification) -> Receipt | None:
    """The latest receipt of the chain that holds criteria (a run or a result), or None."""
    for receipt in Receipt.objects.filter(verification=verification).order_by("-seq"):
        if "criteria" in receipt_payload(receipt):
            return receipt
    return None


def _explain_code(code: object) -> str | None:
    try:
        return explain(Reason(str(code))) if code else None
    except ValueError:
        return None


def verification_view(verification: Verification, *, now: datetime) -> dict[str, Any]:
    """A verification as the API returns it (the second seed's shape) resolved at ``now``.

    Seed fields: ``id``, ``status``, ``determination``, ``score``, ``confidence``, ``flagged``, ``flag_reason``,
    ``submission_hash``, ``proof_ref``, ``verdict.results[]`` (``primitive``, ``determination``, ``rationale``,
    ``evidence_spans[].trust_tier``, ``flagged``). Ours: ``kernel_verdict``, ``reason``, ``reason_text``, per result
    ``criterion``, ``verdict``, ``reason``, ``authority``, ``hard``, ``deadline``, ``on_expiry``; and ``task``,
    ``cycle``, ``rubric_hash``, ``submitted_at``, ``submitted_by``, ``attempts``, ``last_error`` (when failed),
    ``head_receipt_id``, ``head_receipt_kind``, ``supersedes``, ``awaiting_evidence``, ``human_decided``.
    ``determination``, ``score`` and ``confidence`` are null until ``succeeded``. The values come from the signed
    head receipt (the columns on ``Verification`` are only caches).
    """
    head, outcome = head_outcome(verification, now=now)
    status = verification_status(verification, head=head, outcome=outcome)
    view: dict[str, Any] = {
        "id": str(verification.pk),
        "status": status,
        "determination": None,
        "score": None,
        "confidence": None,
        "flagged": False,
        "flag_reason": None,
        "submission_hash": verification.submission_hash,
        "proof_ref": f"/v1/verifications/{verification.pk}/proof",
        "verdict": {"results": []},
        "kernel_verdict": None,
        "reason": None,
        "reason_text": None,
        "task": str(verification.task_id) if verification.task_id else None,
        "cycle": verification.cycle,
        "rubric_hash": verification.rubric_hash,
        "submitted_at": format_created_at(verification.submitted_at),
        "submitted_by": verification.submitted_by.name if verification.submitted_by else None,
        "attempts": verification.attempts,
        "last_error": verification.last_error or None if status == Status.FAILED else None,
        "head_receipt_id": head.content_hash if head is not None else None,
        "head_receipt_kind": head.kind if head is not None else None,
        "supersedes": str(verification.supersedes_id) if verification.supersedes_id else None,
        "awaiting_evidence": verification.awaiting_evidence,
        "human_decided": verification.human_decided,
        "claims": [],
    }
    if head is None:
        return view
    if untrusted_head(head):
        return {**view, **UNTRUSTED_HEAD_VIEW, "reason_text": explain(Reason.KEY_NOT_IN_PIN_JOURNAL)}
    payload = receipt_payload(head)
    if outcome is None:  # a head of another shape (a person's decision): its signed top-level fields
        for name in ("determination", "score", "confidence", "flagged", "flag_reason"):
            view[name] = payload.get(name, view[name])
        view["kernel_verdict"] = payload.get("verdict")
        reason = payload.get("reason")
        view["reason"] = reason
        view["reason_text"] = _explain_code(reason)
        # The per-criterion results are those of the latest run or result the decision superseded, as read now.
        automated = _latest_automated(verification)
        if automated is not None:
            automated_payload = receipt_payload(automated)
            view["verdict"] = {
                "results": _results(verification, read_outcome(automated_payload, now=now), automated_payload)
            }
            view["claims"] = list(automated_payload.get("claims", ()))
        return view
    succeeded = status == Status.SUCCEEDED
    view.update(
        {
            "determination": outcome.determination.value if succeeded and outcome.determination else None,
            "score": outcome.score if succeeded else None,
            "confidence": outcome.confidence if succeeded else None,
            "flagged": outcome.flagged,
            "flag_reason": outcome.flag_reason,
            "verdict": {"results": _results(verification, outcome, payload)},
            "claims": list(payload.get("claims", ())),
            "kernel_verdict": outcome.verdict.value,
            "reason": outcome.reason.value if outcome.reason is not None else None,
            "reason_text": explain(outcome.reason) if outcome.reason is not None else None,
        }
    )
    return view


LIST_FILTERS: Final = frozenset(
    {"task", "cycle", "status", "determination", "verdict", "flagged", "submitted_by", "rubric_hash"}
)


def _bad_filter(detail: str) -> ServiceError:
    return ServiceError(Reason.INVALID_REQUEST, detail)


def _status_filter(queryset: QuerySet[Verification], status: str, now: datetime) -> QuerySet[Verification]:
    has_receipt = Exists(Receipt.objects.filter(verification=OuterRef("pk")))
    pending = read_q(now, verdict=Verdict.PENDING.value)
    queryset = queryset.annotate(_has_receipt=has_receipt)
    if status == Status.QUEUED:
        return queryset.filter(_has_receipt=False, failed_at__isnull=True, attempts=0)
    if status == Status.FAILED:
        return queryset.filter(_has_receipt=False, failed_at__isnull=False)
    if status == Status.SUCCEEDED:
        return queryset.filter(_has_receipt=True).exclude(pending)
    if status == Status.RUNNING:
        return queryset.filter(
            Q(_has_receipt=False, failed_at__isnull=True, attempts__gt=0) | Q(_has_receipt=True) & pending
        )
    raise _bad_filter(f"status is one of {', '.join(s.value for s in Status)}")


def _encode_cursor(verification: Verification) -> str:
    text = f"{verification.created_at.isoformat()}|{verification.pk}"
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
        when, _, pk = text.partition("|")
        parsed = datetime.fromisoformat(when)
        if parsed.tzinfo is None:
            raise ValueError("naive")
        return parsed, uuid.UUID(pk)
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise _bad_filter("cursor is not one this server issued") from None


def verification_list(
    *,
    actor: Actor | None,
    filters: Mapping[str, str],
    cursor: str | None,
    limit: int,
    now: datetime | None = None,
) -> tuple[list[Verification], str | None]:
    """Verifications newest first, filtered, with keyset pagination on (created_at, id); the next cursor or None.

    Filters (all optional, exact match): ``task``, ``cycle``, ``status`` (derived: queued, running, succeeded,
    failed), ``determination``, ``verdict``, ``flagged`` (true/false), ``submitted_by`` (actor name),
    ``rubric_hash``. Determination, verdict and flagged filter the head as read at ``now`` (``read_state``,
    the same derivation as ``verification_view``). ``invalid-request`` for an unknown
    filter, a bad value or a foreign cursor. Every authenticated reader sees every verification: the portal's
    record is shared (``actor`` is accepted for a later per-tenant rule).
    """
    del actor
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise _bad_filter(f"limit is 1-{MAX_PAGE}")
    unknown = sorted(set(filters) - LIST_FILTERS)
    if unknown:
        raise ServiceError(Reason.UNKNOWN_FIELD, f"unknown filters {unknown}", details={"fields": unknown})
    queryset = Verification.objects.select_related("submitted_by")
    for name, value in filters.items():
        if name == "task":
            task = task_get(value)
            if task is None:
                raise _bad_filter("task is a task id")
            queryset = queryset.filter(task=task)
        elif name == "cycle":
            if not str(value).isdigit():
                raise _bad_filter("cycle is a number")
            queryset = queryset.filter(cycle=int(value))
        elif name == "status":
            queryset = _status_filter(queryset, str(value), now or timezone.now())
        elif name == "flagged":
            if value not in ("true", "false"):
                raise _bad_filter("flagged is true or false")
            queryset = queryset.filter(read_q(now or timezone.now(), flagged=value == "true"))
        elif name in ("verdict", "determination"):
            allowed = [v.value for v in (Verdict if name == "verdict" else Determination)]
            if value not in allowed:
                raise _bad_filter(f"{name} is one of {', '.join(allowed)}")
            # SPEC §3: the state as read at this moment (PENDING past its deadline reads as its expiry verdict).
            queryset = queryset.filter(read_q(now or timezone.now(), **{name: value}))
        elif name == "submitted_by":
            queryset = queryset.filter(submitted_by__name=value)
        else:
            queryset = queryset.filter(**{name: value})
    if cursor:
        when, pk = _decode_cursor(cursor)
        queryset = queryset.filter(Q(created_at__lt=when) | Q(created_at=when, id__lt=pk))
    page = list(queryset.order_by("-created_at", "-id")[: limit + 1])
    next_cursor = _encode_cursor(page[limit - 1]) if len(page) > limit else None
    return page[:limit], next_cursor


def events_after(*, cursor: int | None, limit: int) -> list[Event]:
    """Events with an id above ``cursor`` (None: from the start), oldest first; ids commit in order."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise _bad_filter(f"limit is 1-{MAX_PAGE}")
    if cursor is not None and (isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0):
        raise _bad_filter("after is a non-negative event id")
    return list(Event.objects.filter(id__gt=cursor or 0).order_by("id")[:limit])

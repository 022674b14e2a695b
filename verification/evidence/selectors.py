"""Reads of evidence: one item, the admin list and what cites it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.models import Count, Q

from verification import cursors
from verification.errors import ServiceError
from verification.evidence import storage
from verification.evidence.models import Evidence, VerificationEvidence
from verification.kernel.evidence import Accessibility, Citation, artifact_text, resolve_citation
from verification.kernel.integrity import StoredItem, recheck
from verification.kernel.reasons import Reason
from verification.reviews.selectors import Segment, segments
from verification.runs.models import (
    ArrivedResult,
    Verification,
)
from verification.trust.models import (
    Receipt,
)
from verification.trust.selectors import (
    EVIDENCE_STATES,
    _code,
    _explain,
    receipt_payload,
)


def evidence_get(evidence_id: str | uuid.UUID) -> Evidence | None:
    try:
        pk = evidence_id if isinstance(evidence_id, uuid.UUID) else uuid.UUID(str(evidence_id))
    except ValueError:
        return None
    return Evidence.objects.filter(pk=pk).first()


#: How many verifications binding one evidence item the evidence page reads for citations.
MAX_CITING: Final = 200


def _uuid_or_none(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _id_prefix_q(text: str) -> Q:
    """Ids starting with ``text`` (issue 14: the 8-character id shown everywhere finds its item): a range on the
    primary key, the same on SQLite's hex text and PostgreSQL's uuid; nothing for text that is no id's start."""
    hexed = text.replace("-", "")
    if not 1 <= len(hexed) < 32 or any(c not in "0123456789abcdef" for c in hexed):
        return Q(pk__in=[])
    low, high = uuid.UUID(hexed.ljust(32, "0")), uuid.UUID(hexed.ljust(32, "f"))
    return Q(pk__gte=low, pk__lte=high)


def evidence_list(*, filters: Mapping[str, str], cursor: str | None, limit: int) -> tuple[list[Evidence], str | None]:
    """Admitted evidence, newest first, with keyset pagination; filters: ``q`` (an id or a digest, whole or its
    start), ``state`` (``accessible``/``redacted``). ``invalid-request`` for a bad filter or cursor."""
    queryset = Evidence.objects.select_related("admitted_by").annotate(bound=Count("bindings"))
    q = (filters.get("q") or "").strip().lower()
    if q:
        as_id = _uuid_or_none(q)
        digest = q if q.startswith("sha256:") else f"sha256:{q}"
        queryset = queryset.filter(Q(pk=as_id) if as_id else Q(digest__startswith=digest) | _id_prefix_q(q))
    state = (filters.get("state") or "").strip()
    if state not in EVIDENCE_STATES:
        raise ServiceError(Reason.INVALID_REQUEST, "state is accessible or redacted")
    if state:
        queryset = queryset.filter(redacted_at__isnull=state == "accessible")
    if cursor:
        when, pk = cursors.decode(cursor, datetime, uuid.UUID)
        queryset = queryset.filter(Q(admitted_at__lt=when) | Q(admitted_at=when, id__lt=pk))
    page = list(queryset.order_by("-admitted_at", "-id")[: limit + 1])
    next_cursor = cursors.encode(page[limit - 1].admitted_at, page[limit - 1].pk) if len(page) > limit else None
    return page[:limit], next_cursor


@dataclass(frozen=True)
class CitationRow:
    start: Any
    end: Any
    quote: str
    quote_hash: str
    resolves: bool
    reason: str | None
    reason_text: str
    source: str  # where the citation is recorded: a receipt, or a semantic judgment
    verification_id: str


@dataclass(frozen=True)
class CitingVerdict:
    """A verification that binds the item: its verdict as signed, whether its receipts cite the item, what the
    signed integrity proof said at signing, and what a recheck says now."""

    verification: Verification
    symbol: str
    verdict: str
    determination: str
    human_decided: bool
    cites: bool
    signed_integrity: str  # intact / changed / missing / redacted / (none), from the head's integrity_proof
    recheck_now: str
    recheck_reason: str | None
    recheck_text: str


@dataclass(frozen=True)
class EvidenceDetail:
    evidence: Evidence
    accessibility: str
    integrity: str
    integrity_reason: str | None
    integrity_text: str
    text: str | None
    segments: list[Segment]
    citations: list[CitationRow]
    citing: list[CitingVerdict]


def _citations_in(raw: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(raw, Sequence) and not isinstance(raw, (str, bytes)):
        for item in raw:
            if isinstance(item, Mapping):
                yield item


def _cites(payload: Mapping[str, Any], evidence_id: str) -> bool:
    if evidence_id in {str(e) for e in payload.get("cited_evidence_ids", ()) or ()}:
        return True
    for criterion in _citations_in(payload.get("criteria")):
        for check in _citations_in(criterion.get("checks")):
            if evidence_id in {str(e) for e in check.get("evidence_ids", ()) or ()}:
                return True
    for check in _citations_in(payload.get("checks")):
        if evidence_id in {str(e) for e in check.get("evidence_ids", ()) or ()}:
            return True
    return any(str(c.get("evidence_id")) == evidence_id for c in _citations_in(payload.get("citations")))


def _signed_integrity(payload: Mapping[str, Any], evidence_id: str) -> str:
    for entry in _citations_in(payload.get("integrity_proof")):
        if str(entry.get("evidence_id")) == evidence_id:
            recorded, recomputed = entry.get("recorded"), entry.get("recomputed")
            if recomputed is None:
                return "missing or redacted"
            return "intact" if recomputed == recorded else "changed"
    return "(not in the proof)"


def evidence_detail(evidence: Evidence) -> EvidenceDetail:
    """One item: its text with every citation into it highlighted, each citation's quote hash and whether it resolves
    now, and the verdicts that cite it with what a recheck answers now (``evidence-redacted`` once redacted)."""
    evidence_id = str(evidence.pk)
    redacted = evidence.redacted_at is not None
    content = None if redacted else storage.read(evidence.digest)
    entry = recheck([StoredItem(evidence_id, evidence.digest, content, redacted=redacted)]).entries[0]
    if redacted:
        accessibility = Accessibility.REDACTED
    else:
        accessibility = Accessibility.ACCESSIBLE if content is not None else Accessibility.INACCESSIBLE
    text = artifact_text(content) if entry.recomputed == evidence.digest else None
    artifacts = {evidence_id: text} if text is not None else {}

    bindings = list(
        VerificationEvidence.objects.filter(evidence=evidence)
        .select_related("verification", "verification__task")
        .order_by("-verification__created_at")[:MAX_CITING]
    )
    verification_ids = [b.verification_id for b in bindings]
    citations: list[CitationRow] = []
    seen: set[tuple[Any, ...]] = set()
    cites_by: dict[Any, bool] = {}
    heads: dict[Any, Mapping[str, Any]] = {}
    receipts = Receipt.objects.filter(verification_id__in=verification_ids).order_by("verification_id", "seq")
    for receipt in receipts.iterator(chunk_size=200):
        payload = receipt_payload(receipt)
        heads[receipt.verification_id] = payload  # the last one read is the head (seq order)
        if _cites(payload, evidence_id):
            cites_by[receipt.verification_id] = True
        for raw in _citations_in(payload.get("citations")):
            _add_citation(citations, seen, raw, artifacts, evidence_id, f"receipt seq {receipt.seq}",
                          str(receipt.verification_id), unreadable=entry.reason)
    judgments = ArrivedResult.objects.filter(verification_id__in=verification_ids).select_related("actor")
    for row in judgments.order_by("received_at", "id"):
        body = row.body if isinstance(row.body, Mapping) else {}
        for raw in _citations_in(body.get("citations")):
            if str(raw.get("evidence_id")) == evidence_id:
                cites_by[row.verification_id] = True
            _add_citation(citations, seen, raw, artifacts, evidence_id, f"judgment by {row.actor.name}",
                          str(row.verification_id), unreadable=entry.reason)
    spans = [(c.start, c.end) for c in citations if c.resolves]
    citing = [
        CitingVerdict(
            verification=b.verification,
            symbol=b.symbol,
            verdict=b.verification.verdict or "",
            determination=b.verification.determination or "",
            human_decided=b.verification.human_decided,
            cites=cites_by.get(b.verification_id, False),
            signed_integrity=_signed_integrity(heads.get(b.verification_id, {}), evidence_id),
            recheck_now=entry.status.value,
            recheck_reason=_code(entry.reason),
            recheck_text=_explain(entry.reason),
        )
        for b in bindings
    ]
    return EvidenceDetail(
        evidence=evidence,
        accessibility=accessibility.value,
        integrity=entry.status.value,
        integrity_reason=_code(entry.reason),
        integrity_text=_explain(entry.reason),
        text=text,
        segments=segments(text, spans) if text is not None else [],
        citations=citations,
        citing=citing,
    )


def _add_citation(
    out: list[CitationRow],
    seen: set[tuple[Any, ...]],
    raw: Mapping[str, Any],
    artifacts: Mapping[str, str],
    evidence_id: str,
    source: str,
    verification_id: str,
    *,
    unreadable: Reason | None = None,
) -> None:
    """Add one citation into the item, resolved now; when the item's bytes cannot be read (redacted, gone, changed)
    the citation cannot be checked and says why with the integrity code, not as a citation failure."""
    if str(raw.get("evidence_id")) != evidence_id:
        return
    citation = Citation(
        evidence_id=evidence_id,
        start=raw.get("start"),  # type: ignore[arg-type]
        end=raw.get("end"),  # type: ignore[arg-type]
        quote=str(raw.get("quote", "")),
        quote_hash=str(raw.get("quote_hash", "")),
    )
    key = (citation.start, citation.end, citation.quote, citation.quote_hash, verification_id)
    if key in seen:
        return
    seen.add(key)
    failure = unreadable if unreadable is not None else resolve_citation(citation, artifacts)
    out.append(
        CitationRow(
            start=citation.start,
            end=citation.end,
            quote=citation.quote,
            quote_hash=citation.quote_hash,
            resolves=failure is None,
            reason=_code(failure),
            reason_text=_explain(failure),
            source=source,
            verification_id=verification_id,
        )
    )

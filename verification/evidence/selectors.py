"""Reads of evidence: one item, the admin list and what cites it."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.models import Count, Q

from verification import cursors
from verification.compiled import Compiled, Probe, Related
from verification.errors import ServiceError
from verification.evidence import storage
from verification.evidence.models import Evidence, VerificationEvidence
from verification.kernel.evidence import Accessibility, Citation, artifact_text, resolve_citation
from verification.kernel.integrity import IntegrityEntry, StoredItem, recheck
from verification.kernel.reasons import Reason
from verification.runs.models import (
    ArrivedResult,
    Verification,
)
from verification.trust.models import (
    Receipt,
)
from verification.trust.selectors import receipt_payload


def evidence_get(evidence_id: str | uuid.UUID) -> Evidence | None:
    try:
        pk = evidence_id if isinstance(evidence_id, uuid.UUID) else uuid.UUID(str(evidence_id))
    except ValueError:
        return None
    return Evidence.objects.filter(pk=pk).first()


#: The evidence list's ``state`` filter: any, accessible (not redacted), redacted.
EVIDENCE_STATES: Final = ("", "accessible", "redacted")

#: How many verifications binding one evidence item the evidence page reads for citations.
MAX_CITING: Final = 200


#: An evidence item from one row of a compiled ``values_list``.
_EVIDENCE_ROW: Final = Related(Evidence)
#: ``evidence_by_ids`` compiles its read once per count of distinct ids, up to this many (more: the ORM).
_COMPILED_IDS: Final = 16


@functools.cache
def _by_ids(count: int) -> Compiled:
    """``evidence_by_ids``' read of ``count`` distinct ids, compiled on first use and kept."""
    names = [f"id{i}" for i in range(count)]
    probes = {  # distinct probes: the ORM drops repeated values from an IN list
        name: Probe(uuid.UUID(int=0xE0000 + 2 * i), uuid.UUID(int=0xE0001 + 2 * i), Evidence._meta.pk)
        for i, name in enumerate(names)
    }
    return Compiled(
        f"evidence-by-{count}-ids",
        Evidence,
        lambda **ids: Evidence.objects.filter(pk__in=[ids[name] for name in names]).values_list(
            *_EVIDENCE_ROW.columns()
        ),
        probes,
        prepared=True,
    )


def evidence_by_ids(ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Evidence]:
    """The evidence items with these ids, by id (an unknown id is absent): one statement, compiled once per count of
    distinct ids (a submission binds items by id; compiling the read through the ORM cost more than running it)."""
    distinct = sorted(set(ids))
    if not distinct:
        return {}
    if len(distinct) > _COMPILED_IDS:
        return {e.pk: e for e in Evidence.objects.filter(pk__in=distinct)}
    rows = _by_ids(len(distinct)).rows(**{f"id{i}": pk for i, pk in enumerate(distinct)})
    return {e.pk: e for e in _EVIDENCE_ROW.all(rows)}


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
class EvidenceRead:
    """One item read now: its integrity recomputed over the stored bytes, its accessibility, and its text when the
    bytes are intact UTF-8 (the only text a citation can resolve against)."""

    evidence: Evidence
    integrity: IntegrityEntry
    accessibility: Accessibility
    text: str | None


def read_evidence(evidence: Evidence) -> EvidenceRead:
    """Read an item's bytes now (never a redacted item's) and recheck them against the digest recorded at admission."""
    redacted = evidence.redacted_at is not None
    content = None if redacted else storage.read(evidence.digest)
    entry = recheck([StoredItem(str(evidence.pk), evidence.digest, content, redacted=redacted)]).entries[0]
    if redacted:
        accessibility = Accessibility.REDACTED
    else:
        accessibility = Accessibility.ACCESSIBLE if content is not None else Accessibility.INACCESSIBLE
    text = artifact_text(content) if entry.recomputed == evidence.digest else None
    return EvidenceRead(evidence=evidence, integrity=entry, accessibility=accessibility, text=text)


@dataclass(frozen=True)
class ResolvedCitation:
    """A recorded citation and what resolving it now answers (``failure`` None: it resolves)."""

    citation: Citation
    failure: Reason | None

    @property
    def resolves(self) -> bool:
        return self.failure is None


def resolve_recorded_citation(raw: Mapping[str, Any], reads: Mapping[str, EvidenceRead]) -> ResolvedCitation:
    """A citation as recorded (a receipt's or a semantic judgment's ``citations`` item), resolved now against the
    items read now (``read_evidence``, by evidence id). When the cited item's bytes cannot be read (redacted, gone,
    changed) the citation cannot be checked and answers the integrity code (``evidence-redacted``, ...), not a
    citation failure; an id that is not among ``reads`` answers ``citation-artifact-not-admitted``."""
    citation = Citation(
        evidence_id=str(raw.get("evidence_id", "")),
        start=raw.get("start"),  # type: ignore[arg-type]
        end=raw.get("end"),  # type: ignore[arg-type]
        quote=str(raw.get("quote", "")),
        quote_hash=str(raw.get("quote_hash", "")),
    )
    read = reads.get(citation.evidence_id)
    unreadable = read.integrity.reason if read is not None else None
    if unreadable is not None:
        return ResolvedCitation(citation, unreadable)
    artifacts = {evidence_id: r.text for evidence_id, r in reads.items() if r.text is not None}
    return ResolvedCitation(citation, resolve_citation(citation, artifacts))


@dataclass(frozen=True)
class RecordedCitation:
    """A citation into one item, where it is recorded: a receipt of a verification (``receipt_seq``) or a semantic
    judgment (``judged_by``: the actor's name)."""

    resolved: ResolvedCitation
    verification_id: str
    receipt_seq: int | None = None
    judged_by: str | None = None


@dataclass(frozen=True)
class CitingVerification:
    """A verification that binds the item: whether its receipts or judgments cite it, and the item's entry in its
    head's signed integrity proof (``{"evidence_id", "recorded", "recomputed"}``; None when the proof has none)."""

    verification: Verification
    symbol: str
    cites: bool
    signed_integrity: Mapping[str, Any] | None


@dataclass(frozen=True)
class EvidenceUse:
    """One item read now, every citation into it (each once per verification), and the verifications binding it
    (the ``MAX_CITING`` newest)."""

    read: EvidenceRead
    citations: list[RecordedCitation]
    citing: list[CitingVerification]


def _mappings_in(raw: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(raw, Sequence) and not isinstance(raw, (str, bytes)):
        for item in raw:
            if isinstance(item, Mapping):
                yield item


def _cites(payload: Mapping[str, Any], evidence_id: str) -> bool:
    if evidence_id in {str(e) for e in payload.get("cited_evidence_ids", ()) or ()}:
        return True
    for criterion in _mappings_in(payload.get("criteria")):
        for check in _mappings_in(criterion.get("checks")):
            if evidence_id in {str(e) for e in check.get("evidence_ids", ()) or ()}:
                return True
    for check in _mappings_in(payload.get("checks")):
        if evidence_id in {str(e) for e in check.get("evidence_ids", ()) or ()}:
            return True
    return any(str(c.get("evidence_id")) == evidence_id for c in _mappings_in(payload.get("citations")))


def _signed_integrity(payload: Mapping[str, Any], evidence_id: str) -> Mapping[str, Any] | None:
    for entry in _mappings_in(payload.get("integrity_proof")):
        if str(entry.get("evidence_id")) == evidence_id:
            return entry
    return None


def evidence_use(evidence: Evidence) -> EvidenceUse:
    """One item: read now, every citation into it recorded by the verifications binding it (receipts, then semantic
    judgments; each resolved now, ``resolve_recorded_citation``), and those verifications with whether they cite it."""
    read = read_evidence(evidence)
    evidence_id = str(evidence.pk)
    reads = {evidence_id: read}
    bindings = list(
        VerificationEvidence.objects.filter(evidence=evidence)
        .select_related("verification", "verification__task")
        .order_by("-verification__created_at")[:MAX_CITING]
    )
    verification_ids = [b.verification_id for b in bindings]
    citations: list[RecordedCitation] = []
    seen: set[tuple[Any, ...]] = set()

    def add(raw: Mapping[str, Any], verification_id: Any, **where: Any) -> None:
        if str(raw.get("evidence_id")) != evidence_id:
            return
        resolved = resolve_recorded_citation(raw, reads)
        c = resolved.citation
        key = (c.start, c.end, c.quote, c.quote_hash, str(verification_id))
        if key not in seen:
            seen.add(key)
            citations.append(RecordedCitation(resolved, str(verification_id), **where))

    cites_by: dict[Any, bool] = {}
    heads: dict[Any, Mapping[str, Any]] = {}
    receipts = Receipt.objects.filter(verification_id__in=verification_ids).order_by("verification_id", "seq")
    for receipt in receipts.iterator(chunk_size=200):
        payload = receipt_payload(receipt)
        heads[receipt.verification_id] = payload  # the last one read is the head (seq order)
        if _cites(payload, evidence_id):
            cites_by[receipt.verification_id] = True
        for raw in _mappings_in(payload.get("citations")):
            add(raw, receipt.verification_id, receipt_seq=receipt.seq)
    judgments = ArrivedResult.objects.filter(verification_id__in=verification_ids).select_related("actor")
    for row in judgments.order_by("received_at", "id"):
        body = row.body if isinstance(row.body, Mapping) else {}
        for raw in _mappings_in(body.get("citations")):
            if str(raw.get("evidence_id")) == evidence_id:
                cites_by[row.verification_id] = True
            add(raw, row.verification_id, judged_by=row.actor.name)
    citing = [
        CitingVerification(
            verification=b.verification,
            symbol=b.symbol,
            cites=cites_by.get(b.verification_id, False),
            signed_integrity=_signed_integrity(heads.get(b.verification_id, {}), evidence_id),
        )
        for b in bindings
    ]
    return EvidenceUse(read=read, citations=citations, citing=citing)

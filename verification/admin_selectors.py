"""Reads for the admin pages (issue 7): keys and the pin log, receipt chains as the strict verifier reports them,
admitted evidence with its citations, users and tokens, the security log, the audit (STYLE §9: selectors read).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Final

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from verification import storage
from verification.errors import ServiceError
from verification.kernel import limits
from verification.kernel.evidence import Accessibility, Citation, artifact_text, resolve_citation
from verification.kernel.integrity import StoredItem, recheck
from verification.kernel.keys import PublicKey
from verification.kernel.reasons import Reason, explain
from verification.kernel.verifier import (
    STEP_NAMES,
    StepStatus,
    TrustedKey,
    VerificationReport,
    verify_proof_bytes,
    verify_report,
)
from verification.models import (
    Actor,
    ApiToken,
    ArrivedResult,
    Evidence,
    Finding,
    PinEntry,
    PinPurpose,
    Receipt,
    ReviewLease,
    SecurityEventKind,
    SecurityLogEntry,
    SigningKey,
    Verification,
    VerificationEvidence,
)
from verification.review_selectors import Segment, segments
from verification.selectors import (
    head_of,
    pin_log,
    pin_state,
    proof_for,
    receipt_payload,
    trusted_keys,
)

#: The largest proof the verify page reads (a chain of ~10,000 entries is about 20 MB).
MAX_PROOF_BYTES: Final = 32 * 1024 * 1024
#: How many verifications binding one evidence item the evidence page reads for citations.
MAX_CITING: Final = 200


def grouped(fingerprint: str) -> str:
    """A fingerprint in groups of four hex digits (SPEC §8), for reading aloud out of band."""
    return " ".join(fingerprint[i : i + 4] for i in range(0, len(fingerprint), 4))


def _explain(code: Reason | str | None) -> str:
    if code is None:
        return ""
    try:
        return explain(code)
    except ValueError:
        return ""


# --- keys and the pin log -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyRow:
    """One of the portal's own signing keys."""

    key_id: str
    fingerprint: str
    fingerprint_grouped: str
    thumbprint: str
    status: str
    created_at: datetime
    retired_at: datetime | None
    revoked_at: datetime | None
    revoked_reason: str
    receipts: int


def key_row(row: SigningKey, receipts: int = 0) -> KeyRow:
    try:
        thumbprint = PublicKey.from_raw(bytes(row.public_key)).thumbprint()
    except Exception:  # a row whose bytes are not a usable key: shown, never trusted (the audit reports it)
        thumbprint = ""
    return KeyRow(
        key_id=row.key_id,
        fingerprint=row.fingerprint,
        fingerprint_grouped=grouped(row.fingerprint),
        thumbprint=thumbprint,
        status=row.status,
        created_at=row.created_at,
        retired_at=row.retired_at,
        revoked_at=row.revoked_at,
        revoked_reason=row.revoked_reason,
        receipts=receipts,
    )


def portal_key() -> KeyRow | None:
    """The portal's active signing key (shown on every admin page and on the public key page)."""
    row = SigningKey.objects.filter(status=SigningKey.Status.ACTIVE).first()
    return key_row(row) if row is not None else None


def portal_keys() -> list[KeyRow]:
    """Every signing key of the portal, newest first, with how many receipts each signed."""
    rows = SigningKey.objects.annotate(signed=Count("receipts")).order_by("-created_at", "key_id")
    return [key_row(row, row.signed) for row in rows]


def portal_key_get(key_id: str) -> SigningKey | None:
    return SigningKey.objects.filter(key_id=key_id).first() if isinstance(key_id, str) else None


@dataclass(frozen=True)
class PinRow:
    """A pin in force: a key trusted for one purpose (SPEC §8), and whether it has since been revoked."""

    key_id: str
    purpose: str
    fingerprint_grouped: str
    entry: PinEntry
    revoked: PinEntry | None
    own: bool  # one of the portal's own signing keys


def pins_in_force() -> list[PinRow]:
    state = pin_state()
    own = set(SigningKey.objects.values_list("key_id", flat=True))
    rows = [
        PinRow(
            key_id=key_id,
            purpose=purpose,
            fingerprint_grouped=grouped(entry.fingerprint),
            entry=entry,
            revoked=state.revoked.get(key_id),
            own=key_id in own,
        )
        for (key_id, purpose), entry in state.pinned.items()
    ]
    return sorted(rows, key=lambda r: (r.purpose, r.entry.pk))


def pin_of(key_id: str, purpose: str) -> PinEntry | None:
    """The pin in force for (key, purpose), or None."""
    try:
        wanted = PinPurpose(purpose)
    except ValueError:
        return None
    return pin_state().pinned.get((key_id, wanted))


@dataclass(frozen=True)
class PinLogRow:
    entry: PinEntry
    fingerprint_grouped: str


def pin_log_rows() -> list[PinLogRow]:
    """The whole pin log, newest first."""
    return [PinLogRow(entry, grouped(entry.fingerprint)) for entry in reversed(list(pin_log()))]


def known_key(key_id: str) -> bool:
    """A key the portal knows (one of its own, or one in the pin log): the only ones a revocation can name."""
    return SigningKey.objects.filter(key_id=key_id).exists() or PinEntry.objects.filter(key_id=key_id).exists()


# --- receipt chains, as the strict verifier reports them ----------------------------------------------------------


@dataclass(frozen=True)
class StepCell:
    """One entry in one step: ``passed``, ``failed``, ``not-run`` or ``n/a`` (a whole-proof step about another)."""

    status: str
    reason: str | None = None
    reason_text: str = ""
    detail: str = ""


@dataclass(frozen=True)
class EntryRow:
    seq: int | None
    index: int
    content_hash: str
    key_id: str
    status: str
    reason: str | None
    reason_text: str
    kind: str
    verdict: str
    created_at: str
    cells: list[StepCell]


@dataclass(frozen=True)
class StepRow:
    number: int
    name: str
    status: str
    reason: str | None
    reason_text: str
    seq: int | None
    detail: str
    failed_entries: int


@dataclass(frozen=True)
class ChainReport:
    """The strict verifier's report as the chain view shows it (SPEC §7; STYLE §4): every step for every entry."""

    ok: bool
    reason: str | None
    reason_text: str
    failed_step: int | None
    failed_step_name: str
    failed_seq: int | None
    detail: str
    steps: list[StepRow]
    entries: list[EntryRow]
    trusted_head: str | None
    computed_head: str | None
    keys: list[tuple[str, bool]]  # the trust store given to the verifier: (key id, revoked)
    step_names: Sequence[str] = field(default=STEP_NAMES)


def _code(reason: Reason | None) -> str | None:
    return reason.value if reason is not None else None


def chain_report(
    report: VerificationReport, *, trusted_head: str | None, keys: Mapping[str, TrustedKey]
) -> ChainReport:
    """Lay a ``VerificationReport`` out as a grid: a row per entry, a cell per step."""
    by_step: dict[int, dict[int, Any]] = {}
    for step in report.steps:
        by_step[step.number] = {result.index: result for result in step.entries}
    status_of = {step.number: step.status for step in report.steps}
    entries = []
    for view in report.entries:
        cells = []
        for number in range(len(STEP_NAMES)):
            result = by_step.get(number, {}).get(view.index)
            if result is not None:
                cells.append(
                    StepCell(
                        status=StepStatus.PASSED.value if result.ok else StepStatus.FAILED.value,
                        reason=_code(result.reason),
                        reason_text=_explain(result.reason),
                        detail=result.detail,
                    )
                )
            elif status_of.get(number, StepStatus.NOT_RUN) is StepStatus.NOT_RUN:
                cells.append(StepCell(status=StepStatus.NOT_RUN.value))
            else:
                cells.append(StepCell(status="n/a"))
        body = view.body if isinstance(view.body, Mapping) else {}
        payload = body.get("payload") if isinstance(body.get("payload"), Mapping) else {}
        entries.append(
            EntryRow(
                seq=view.seq,
                index=view.index,
                content_hash=view.content_hash or "",
                key_id=view.key_id or "",
                status=view.status.value,
                reason=_code(view.reason),
                reason_text=_explain(view.reason),
                kind=str(payload.get("kind", "")),
                verdict=str(payload.get("verdict", "")),
                created_at=str(body.get("created_at", "")),
                cells=cells,
            )
        )
    steps = [
        StepRow(
            number=step.number,
            name=step.name,
            status=step.status.value,
            reason=_code(step.reason),
            reason_text=_explain(step.reason),
            seq=step.seq,
            detail=step.detail,
            failed_entries=sum(1 for r in step.entries if not r.ok),
        )
        for step in sorted(report.steps, key=lambda s: s.number)
    ]
    return ChainReport(
        ok=report.ok,
        reason=_code(report.reason),
        reason_text=_explain(report.reason),
        failed_step=report.failed_step,
        failed_step_name=STEP_NAMES[report.failed_step] if report.failed_step is not None else "",
        failed_seq=report.failed_seq,
        detail=report.detail,
        steps=steps,
        entries=entries,
        trusted_head=trusted_head,
        computed_head=report.computed_head,
        keys=sorted((key_id, trusted.revoked) for key_id, trusted in keys.items()),
    )


def verification_chain(verification: Verification) -> ChainReport | None:
    """The chain of a verification verified strictly: keys from the pin log (proof-signing, with revocation), the
    stored head as the trusted head, the verification's own id and submission hash. None while the chain is empty."""
    proof = proof_for(verification)
    head = head_of(verification)
    if proof is None or head is None:
        return None
    keys = trusted_keys(PinPurpose.PROOF_SIGNING)
    report = verify_report(
        proof,
        keys=keys,
        trusted_head=head.content_hash,
        expected_verification_id=str(verification.pk),
        expected_submission_hash=verification.submission_hash,
    )
    return chain_report(report, trusted_head=head.content_hash, keys=keys)


def uploaded_proof_report(
    data: bytes, *, trusted_head: str | None, verification_id: str, submission_hash: str
) -> ChainReport:
    """A proof an admin uploaded, verified against the pinned proof-signing keys and the head they entered."""
    keys = trusted_keys(PinPurpose.PROOF_SIGNING)
    report = verify_proof_bytes(
        data,
        keys=keys,
        trusted_head=trusted_head or None,
        expected_verification_id=verification_id,
        expected_submission_hash=submission_hash,
    )
    return chain_report(report, trusted_head=trusted_head or None, keys=keys)


# --- evidence ---------------------------------------------------------------------------------------------------------


EVIDENCE_STATES: Final = ("", "accessible", "redacted")


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
        when, pk = _decode_cursor(cursor)
        queryset = queryset.filter(Q(admitted_at__lt=when) | Q(admitted_at=when, id__lt=pk))
    page = list(queryset.order_by("-admitted_at", "-id")[: limit + 1])
    next_cursor = _encode_cursor(page[limit - 1].admitted_at, str(page[limit - 1].pk)) if len(page) > limit else None
    return page[:limit], next_cursor


def _encode_cursor(when: datetime, pk: str) -> str:
    return base64.urlsafe_b64encode(f"{when.isoformat()}|{pk}".encode()).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
        when, _, pk = text.partition("|")
        parsed = datetime.fromisoformat(when)
        if parsed.tzinfo is None:
            raise ValueError("naive")
        return parsed, uuid.UUID(pk)
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise ServiceError(Reason.INVALID_REQUEST, "cursor is not one this page issued") from None


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


# --- users and tokens -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserRow:
    user: Any
    roles: list[str]
    actor: str
    active_tokens: int
    leases_held: int


ROLE_ORDER: Final = ("admin", "manager", "reviewer")


def user_rows(*, now: datetime | None = None) -> list[UserRow]:
    """Every portal user, with roles, actor, active tokens and leases held now."""
    when = now or timezone.now()
    users = get_user_model().objects.order_by("username").prefetch_related("groups")
    actors = {a.user_id: a for a in Actor.objects.filter(user__isnull=False)}
    tokens = dict(
        ApiToken.objects.filter(revoked_at__isnull=True, actor__user__isnull=False)
        .values_list("actor__user_id").annotate(n=Count("id"))
    )
    leases = dict(
        ReviewLease.objects.filter(released_at__isnull=True, expires_at__gt=when)
        .values_list("holder_id").annotate(n=Count("verification"))
    )
    out = []
    for user in users:
        names = {g.name for g in user.groups.all()}
        actor = actors.get(user.pk)
        out.append(
            UserRow(
                user=user,
                roles=[r for r in ROLE_ORDER if r in names],
                actor=actor.name if actor is not None else "",
                active_tokens=int(tokens.get(user.pk, 0)),
                leases_held=int(leases.get(user.pk, 0)),
            )
        )
    return out


def user_get(user_id: Any) -> Any:
    try:
        pk = int(user_id)
    except (TypeError, ValueError):
        return None
    return get_user_model().objects.filter(pk=pk).first()


def leases_held(user: Any, *, now: datetime | None = None) -> list[ReviewLease]:
    when = now or timezone.now()
    return list(
        ReviewLease.objects.filter(holder=user, released_at__isnull=True, expires_at__gt=when)
        .select_related("verification", "verification__task")
        .order_by("expires_at")
    )


def token_rows(*, actor: str = "", state: str = "") -> QuerySet[ApiToken]:
    """API tokens newest first, with actor, boundary, scopes, who issued and who revoked each."""
    queryset = ApiToken.objects.select_related("actor", "actor__user", "created_by", "revoked_by")
    if actor:
        queryset = queryset.filter(actor__name=actor)
    if state == "active":
        queryset = queryset.filter(revoked_at__isnull=True)
    elif state == "revoked":
        queryset = queryset.filter(revoked_at__isnull=False)
    return queryset.order_by("-created_at", "-id")


def token_get(token_id: Any) -> ApiToken | None:
    try:
        pk = int(token_id)
    except (TypeError, ValueError):
        return None
    return ApiToken.objects.select_related("actor").filter(pk=pk).first()


def token_actors() -> QuerySet[Actor]:
    """The actors a token can be issued to: everyone but the portal's own service actor, whose users are active."""
    from verification.services.actors import PORTAL_ACTOR_NAME

    return (
        Actor.objects.exclude(name=PORTAL_ACTOR_NAME)
        .filter(Q(user__isnull=True) | Q(user__is_active=True))
        .order_by("name")
    )


# --- the security log -----------------------------------------------------------------------------------------------

SECURITY_FILTERS: Final = ("kind", "who", "target", "since", "until")


def _day(value: str, name: str) -> date:
    try:  # SPEC §3: dates 1970..9999 (kernel.limits)
        return limits.day(value)
    except limits.OutOfRange as exc:
        raise ServiceError(Reason.INVALID_REQUEST, f"{name} {exc}") from None


def security_log_query(filters: Mapping[str, str]) -> QuerySet[SecurityLogEntry]:
    """The security log, newest first, filtered: ``kind`` (one of the kinds), ``who`` (part of the actor label or
    the username), ``target`` (part of it), ``since``/``until`` (dates, inclusive, UTC). ``invalid-request`` for a
    bad value."""
    queryset = SecurityLogEntry.objects.select_related("user")
    kind = (filters.get("kind") or "").strip()
    if kind:
        if kind not in SecurityEventKind.values:
            raise ServiceError(Reason.INVALID_REQUEST, f"kind is one of {', '.join(SecurityEventKind.values)}")
        queryset = queryset.filter(kind=kind)
    who = (filters.get("who") or "").strip()
    if who:
        queryset = queryset.filter(Q(actor_label__icontains=who) | Q(user__username__iexact=who))
    target = (filters.get("target") or "").strip()
    if target:
        queryset = queryset.filter(target__icontains=target)
    utc = timezone.get_current_timezone()
    since = (filters.get("since") or "").strip()
    if since:
        queryset = queryset.filter(created_at__gte=datetime.combine(_day(since, "since"), time.min, tzinfo=utc))
    until = (filters.get("until") or "").strip()
    after = limits.day_after(_day(until, "until")) if until else None
    if after is not None:
        queryset = queryset.filter(created_at__lt=datetime.combine(after, time.min, tzinfo=utc))
    return queryset.order_by("-id")


def security_log_page(
    *, filters: Mapping[str, str], cursor: str | None, limit: int
) -> tuple[list[SecurityLogEntry], str | None]:
    """One page of the filtered log (keyset on id); the next page's cursor or None."""
    queryset = security_log_query(filters)
    if cursor:
        if not cursor.isdigit():
            raise ServiceError(Reason.INVALID_REQUEST, "cursor is not one this page issued")
        queryset = queryset.filter(id__lt=int(cursor))
    page = list(queryset[: limit + 1])
    return page[:limit], (str(page[limit - 1].pk) if len(page) > limit else None)


def security_log_of_user(user: Any, limit: int = 20) -> list[SecurityLogEntry]:
    """The latest entries by a user or about them (their username as the target), newest first."""
    about = Q(user=user) | Q(target=user.get_username())
    return list(SecurityLogEntry.objects.filter(about).select_related("user").order_by("-id")[:limit])


EXPORT_PAGE: Final = 1000


def security_log_rows(filters: Mapping[str, str]) -> Iterator[SecurityLogEntry]:
    """Every entry the filters select, newest first, read in keyset pages of ``EXPORT_PAGE`` (the CSV export).

    Pages, not one server-side cursor: a streamed response may be abandoned half-read, and a page query leaves no
    cursor open behind it. ``invalid-request`` for a bad filter, raised when the first row is asked for."""
    queryset = security_log_query(filters)
    last: int | None = None
    while True:
        page = list((queryset.filter(id__lt=last) if last is not None else queryset)[:EXPORT_PAGE])
        yield from page
        if len(page) < EXPORT_PAGE:
            return
        last = page[-1].pk


# --- the audit -------------------------------------------------------------------------------------------------------


def audit_findings(limit: int = 50) -> list[Finding]:
    """The most recent tamper and revoked-key findings (what the audit raises)."""
    return list(
        Finding.objects.filter(kind__in=["tamper", "revoked_key"]).select_related("verification").order_by("-id")[
            :limit
        ]
    )

"""The admin pages' view models (STYLE "The layers"): built here from what the selectors return, never in the domain.

Keys and pins, a chain laid out as the verifier's grid, the evidence page, the user list. The attribute names are the
templates' (``templates/adminportal/``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reviewportal.presenters import Segment, explain_code, segments
from verification.actors import selectors as actors_selectors
from verification.actors.roles import ROLES
from verification.evidence import selectors as evidence_selectors
from verification.evidence.models import Evidence
from verification.evidence.selectors import CitingVerification, RecordedCitation
from verification.kernel.keys import PublicKey, group_fingerprint
from verification.kernel.reasons import Reason
from verification.kernel.verifier import STEP_NAMES, StepStatus
from verification.reviews import selectors as reviews_selectors
from verification.runs.models import Verification
from verification.trust import selectors as trust_selectors
from verification.trust.models import PinEntry, SigningKey
from verification.trust.selectors import ChainCheck


def _code(reason: Reason | None) -> str | None:
    return reason.value if reason is not None else None


# --- keys and pins ------------------------------------------------------------------------------------------------


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
        fingerprint_grouped=group_fingerprint(row.fingerprint),
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
    row = trust_selectors.active_signing_key()
    return key_row(row) if row is not None else None


def portal_keys() -> list[KeyRow]:
    """Every signing key of the portal, newest first, with how many receipts each signed."""
    return [key_row(row, row.signed) for row in trust_selectors.signing_keys_with_receipt_counts()]


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
    state = trust_selectors.pin_state()
    own = trust_selectors.own_key_ids()
    rows = [
        PinRow(
            key_id=key_id,
            purpose=purpose,
            fingerprint_grouped=group_fingerprint(entry.fingerprint),
            entry=entry,
            revoked=state.revoked.get(key_id),
            own=key_id in own,
        )
        for (key_id, purpose), entry in state.pinned.items()
    ]
    return sorted(rows, key=lambda r: (r.purpose, r.entry.pk))


@dataclass(frozen=True)
class PinLogRow:
    entry: PinEntry
    fingerprint_grouped: str


def pin_log_rows() -> list[PinLogRow]:
    """The whole pin log, newest first."""
    entries = reversed(list(trust_selectors.pin_log()))
    return [PinLogRow(entry, group_fingerprint(entry.fingerprint)) for entry in entries]


# --- a chain as the verifier's grid ---------------------------------------------------------------------------------


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


def chain_report(check: ChainCheck) -> ChainReport:
    """Lay a checked chain's ``VerificationReport`` out as a grid: a row per entry, a cell per step."""
    report = check.report
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
                        reason_text=explain_code(result.reason),
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
                reason_text=explain_code(view.reason),
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
            reason_text=explain_code(step.reason),
            seq=step.seq,
            detail=step.detail,
            failed_entries=sum(1 for r in step.entries if not r.ok),
        )
        for step in sorted(report.steps, key=lambda s: s.number)
    ]
    return ChainReport(
        ok=report.ok,
        reason=_code(report.reason),
        reason_text=explain_code(report.reason),
        failed_step=report.failed_step,
        failed_step_name=STEP_NAMES[report.failed_step] if report.failed_step is not None else "",
        failed_seq=report.failed_seq,
        detail=report.detail,
        steps=steps,
        entries=entries,
        trusted_head=check.trusted_head,
        computed_head=report.computed_head,
        keys=sorted((key_id, trusted.revoked) for key_id, trusted in check.keys.items()),
    )


def verification_chain(verification: Verification) -> ChainReport | None:
    """The chain of a verification verified strictly (``trust.selectors.check_chain``); None while it is empty."""
    check = trust_selectors.check_chain(verification)
    return chain_report(check) if check is not None else None


def uploaded_proof_report(
    data: bytes, *, trusted_head: str | None, verification_id: str, submission_hash: str
) -> ChainReport:
    """A proof an admin uploaded, verified against the pinned proof-signing keys and the head they entered."""
    return chain_report(
        trust_selectors.check_uploaded_proof(
            data, trusted_head=trusted_head, verification_id=verification_id, submission_hash=submission_hash
        )
    )


# --- evidence -------------------------------------------------------------------------------------------------------


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


def _citation_row(recorded: RecordedCitation) -> CitationRow:
    citation, failure = recorded.resolved.citation, recorded.resolved.failure
    if recorded.receipt_seq is not None:
        source = f"receipt seq {recorded.receipt_seq}"
    else:
        source = f"judgment by {recorded.judged_by}"
    return CitationRow(
        start=citation.start,
        end=citation.end,
        quote=citation.quote,
        quote_hash=citation.quote_hash,
        resolves=failure is None,
        reason=_code(failure),
        reason_text=explain_code(failure),
        source=source,
        verification_id=recorded.verification_id,
    )


def _signed_integrity_word(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "(not in the proof)"
    recorded, recomputed = entry.get("recorded"), entry.get("recomputed")
    if recomputed is None:
        return "missing or redacted"
    return "intact" if recomputed == recorded else "changed"


def evidence_detail(evidence: Evidence) -> EvidenceDetail:
    """One item: its text with every citation into it highlighted, each citation's quote hash and whether it resolves
    now, and the verdicts that cite it with what a recheck answers now (``evidence-redacted`` once redacted)."""
    use = evidence_selectors.evidence_use(evidence)
    read = use.read
    integrity = read.integrity
    citations = [_citation_row(c) for c in use.citations]
    spans = [(c.start, c.end) for c in citations if c.resolves]
    citing = [_citing_verdict(c, integrity.status.value, integrity.reason) for c in use.citing]
    return EvidenceDetail(
        evidence=evidence,
        accessibility=read.accessibility.value,
        integrity=integrity.status.value,
        integrity_reason=_code(integrity.reason),
        integrity_text=explain_code(integrity.reason),
        text=read.text,
        segments=segments(read.text, spans) if read.text is not None else [],
        citations=citations,
        citing=citing,
    )


def _citing_verdict(citing: CitingVerification, recheck_now: str, recheck_reason: Reason | None) -> CitingVerdict:
    verification = citing.verification
    return CitingVerdict(
        verification=verification,
        symbol=citing.symbol,
        verdict=verification.verdict or "",
        determination=verification.determination or "",
        human_decided=verification.human_decided,
        cites=citing.cites,
        signed_integrity=_signed_integrity_word(citing.signed_integrity),
        recheck_now=recheck_now,
        recheck_reason=_code(recheck_reason),
        recheck_text=explain_code(recheck_reason),
    )


# --- users ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserRow:
    user: Any
    roles: list[str]
    actor: str
    active_tokens: int
    leases_held: int


def user_rows(*, now: datetime | None = None) -> list[UserRow]:
    """Every portal user, with roles (in the registry's order), actor, active tokens and leases held now."""
    actors = actors_selectors.actors_by_user()
    tokens = actors_selectors.active_tokens_by_user()
    leases = reviews_selectors.leases_held_by_user(now=now)
    out = []
    for user in actors_selectors.portal_users():
        names = {g.name for g in user.groups.all()}
        actor = actors.get(user.pk)
        out.append(
            UserRow(
                user=user,
                roles=[r for r in ROLES if r in names],
                actor=actor.name if actor is not None else "",
                active_tokens=int(tokens.get(user.pk, 0)),
                leases_held=int(leases.get(user.pk, 0)),
            )
        )
    return out

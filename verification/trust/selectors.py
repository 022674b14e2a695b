"""Reads of trust: keys and pins, chains and proofs, the security log, audit findings."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Final

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from verification.actors.roles import ROLES
from verification.errors import ServiceError
from verification.kernel import limits
from verification.kernel.canonical import loads_strict
from verification.kernel.chain import ALGO, FORMAT, Entry, build_proof
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
from verification.reviews.models import Finding
from verification.runs.models import (
    Verification,
)
from verification.trust.models import (
    PinAction,
    PinEntry,
    PinPurpose,
    Receipt,
    SecurityEventKind,
    SecurityLogEntry,
    SigningKey,
)


def receipts_of(verification: Verification) -> QuerySet[Receipt]:
    """The chain of a verification, in seq order."""
    return Receipt.objects.filter(verification=verification).order_by("seq")


def head_of(verification: Verification) -> Receipt | None:
    """The last receipt of the chain (the head), or None while the chain is empty."""
    return Receipt.objects.filter(verification=verification).order_by("-seq").first()


def entry_of(receipt: Receipt) -> Entry:
    """A stored receipt as the kernel's wire entry (the envelope exactly as stored and signed)."""
    return Entry(
        seq=receipt.seq,
        key_id=receipt.key_id,
        algo=ALGO,  # the portal signs every receipt with the one algorithm and format (SPEC §7)
        format=FORMAT,
        prev_hash=receipt.prev_hash,
        content_hash=receipt.content_hash,
        signature=receipt.signature,
        envelope=receipt.envelope,
    )


_ENTRY_COLUMNS = ("seq", "key_id", "prev_hash", "content_hash", "signature", "envelope")


def proof_for(verification: Verification) -> dict[str, Any] | None:
    """The proof document of a verification (SPEC §7) with the server-served head; None while the chain is empty."""
    rows = receipts_of(verification).values_list(*_ENTRY_COLUMNS)  # only the wire columns: chains can be long
    entries = [
        Entry(seq=seq, key_id=key_id, algo=ALGO, format=FORMAT, prev_hash=prev_hash, content_hash=content_hash,
              signature=signature, envelope=envelope)
        for seq, key_id, prev_hash, content_hash, signature, envelope in rows
    ]
    if not entries:
        return None
    return build_proof(
        verification_id=str(verification.id), entries=entries, proof_head_hash=entries[-1].content_hash
    )


@dataclass(frozen=True)
class PinState:
    """The pin log folded: which (key, purpose) pins are in force, and which keys are revoked (for good)."""

    pinned: Mapping[tuple[str, str], PinEntry]  # (key_id, purpose) -> the pin entry in force
    revoked: Mapping[str, PinEntry]  # key_id -> its (first) revocation entry

    def is_pinned(self, key_id: str, purpose: str) -> bool:
        return (key_id, purpose) in self.pinned

    def is_revoked(self, key_id: str) -> bool:
        return key_id in self.revoked


def pin_state() -> PinState:
    """Fold the pin log in order: the latest pin/unpin of (key, purpose) decides; any revoke is permanent."""
    pinned: dict[tuple[str, str], PinEntry] = {}
    revoked: dict[str, PinEntry] = {}
    for entry in PinEntry.objects.order_by("id").iterator():
        if entry.action == PinAction.REVOKE:
            revoked.setdefault(entry.key_id, entry)
        elif entry.purpose is None:  # pragma: no cover - a database constraint forbids it
            continue
        elif entry.action == PinAction.PIN:
            pinned[(entry.key_id, entry.purpose)] = entry
        elif entry.action == PinAction.UNPIN:
            pinned.pop((entry.key_id, entry.purpose), None)
    return PinState(pinned=pinned, revoked=revoked)


def pinned_key(entry: PinEntry) -> PublicKey:
    """The public key a pin-log entry records (checked again on the way out)."""
    return PublicKey.from_jwk(loads_strict(entry.jwk))


def trusted_keys(purpose: str) -> Mapping[str, TrustedKey]:
    """The trust root for ``purpose`` (``proof-signing`` or ``evidence-source``), with revocation state.

    The one answer is ``verification.trust.root.trusted_keys``: the pin journal outside the database and the portal's
    own private key material; the pin log above is only its cache (SPEC §8). A key pinned only for the other
    purpose is absent (``unknown-key``); a pinned key that was revoked is present with ``revoked=True``.
    """
    from verification.trust import root as trust

    return trust.trusted_keys(str(PinPurpose(purpose)))


def pin_log() -> QuerySet[PinEntry]:
    """The whole pin log, oldest first (for the admin screens)."""
    return PinEntry.objects.select_related("actor_user").order_by("id")


def active_signing_key() -> SigningKey | None:
    return SigningKey.objects.filter(status=SigningKey.Status.ACTIVE).first()


def published_keys() -> QuerySet[SigningKey]:
    """The key rows served in the JWKS: active and retired keys the trust root knows, never revoked (SPEC §8)."""
    from verification.trust import root as trust

    return SigningKey.objects.filter(
        status__in=[SigningKey.Status.ACTIVE, SigningKey.Status.RETIRED],
        key_id__in=[key.key_id for key in trust.published_keys()],
    ).order_by("created_at", "key_id")


def revoked_keys() -> QuerySet[SigningKey]:
    """The portal's revoked key rows (revoked.json itself comes from the trust root: ``revoked_document``)."""
    return SigningKey.objects.filter(status=SigningKey.Status.REVOKED).order_by("revoked_at", "key_id")


def jwks_document() -> dict[str, list[dict[str, str]]]:
    """``{"keys": [jwk, ...]}`` of the portal's keys in the trust root (the pin journal and the private key
    material outside the database), never one that only the database lists: public members only."""
    from verification.trust import root as trust

    return {"keys": [key.to_jwk() for key in trust.published_keys()]}


def revoked_document() -> dict[str, list[dict[str, str]]]:
    """``{"revoked": [{"kid", "revoked_at", "reason"}, ...]}`` of the portal's keys the pin journal revoked."""
    from verification.trust import root as trust

    return {
        "revoked": [
            {"kid": k.key.key_id, "revoked_at": k.revoked_at or "", "reason": k.revoked_reason}
            for k in trust.revoked_own_keys()
        ]
    }


def receipt_payload(receipt: Receipt) -> Mapping[str, Any]:
    """The signed payload of a stored receipt (parsed strictly from the envelope: the record, not a copy)."""
    payload = loads_strict(receipt.envelope)["payload"]
    return payload if isinstance(payload, Mapping) else {}


def untrusted_head(head: Receipt) -> bool:
    """Is the head signed by a key the trust root (``trust.trusted_keys``: the pin journal and the portal's private
    key material) does not trust for proof-signing? Such a head never yields a verdict."""
    from verification.trust import root as trust

    return not trust.is_trusted_signer(head.key_id)


#: The largest proof the verify page reads (a chain of ~10,000 entries is about 20 MB).
MAX_PROOF_BYTES: Final = 32 * 1024 * 1024


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


EVIDENCE_STATES: Final = ("", "accessible", "redacted")


ROLE_ORDER: Final = ROLES


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


def audit_findings(limit: int = 50) -> list[Finding]:
    """The most recent tamper and revoked-key findings (what the audit raises)."""
    return list(
        Finding.objects.filter(kind__in=["tamper", "revoked_key"]).select_related("verification").order_by("-id")[
            :limit
        ]
    )

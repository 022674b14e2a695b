"""Reads of trust: keys and pins, chains and proofs, the security log, audit findings."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from operator import itemgetter
from typing import Any, Final

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from verification.compiled import Compiled, Probe, Related
from verification.errors import ServiceError
from verification.kernel import limits
from verification.kernel.canonical import loads_strict
from verification.kernel.chain import ALGO, FORMAT, WIRE_COLUMNS, Entry, proof_document, proof_json, wire_entries
from verification.kernel.keys import PublicKey
from verification.kernel.reasons import Reason
from verification.kernel.verifier import (
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
    AuditRun,
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


#: A receipt from one row of a compiled ``values_list`` (every concrete column).
_RECEIPT_ROW: Final = Related(Receipt)


def _head_query(verification_pk: Any) -> QuerySet[Receipt, tuple[Any, ...]]:
    receipts = Receipt.objects.filter(verification_id=verification_pk).order_by("-seq")
    return receipts.values_list(*_RECEIPT_ROW.columns())[:1]


#: ``head_of``'s query compiled once (``verification.compiled``): every read of a verification's state asks it (the
#: API's view of a verification, the wait_ms wake-up, the review page), and compiling it cost more than running it.
_HEAD: Final = Compiled("head-of", Receipt, _head_query, {"verification_pk": Probe.key_of(Verification)}, prepared=True)


def head_of(verification: Verification) -> Receipt | None:
    """The last receipt of the chain (the head), or None while the chain is empty."""
    return head_from_rows(_HEAD.rows(verification_pk=verification.pk))


def head_query(verification_pk: Any) -> tuple[Compiled, dict[str, Any]]:
    """``head_of``'s query and its arguments, for a caller that sends it with others (``compiled.pipelined``) and
    reads its rows with ``head_from_rows``."""
    return _HEAD, {"verification_pk": verification_pk}


def head_from_rows(rows: list[tuple[Any, ...]]) -> Receipt | None:
    """The head from ``head_query``'s rows (None: the chain is empty)."""
    return _RECEIPT_ROW.first(rows)


def heads_of(verification_pks: Sequence[Any]) -> dict[Any, Receipt]:
    """The head of each of these verifications (those with a chain), in ONE query: a page of verifications asked
    ``head_of`` once per row."""
    if not verification_pks:
        return {}
    last = Receipt.objects.filter(verification_id=OuterRef("verification_id")).order_by("-seq").values("seq")[:1]
    heads = Receipt.objects.filter(verification_id__in=list(verification_pks), seq=Subquery(last))
    return {head.verification_id: head for head in heads}


def _entry(seq: int, key_id: str, prev_hash: str | None, content_hash: str, signature: str, envelope: str) -> Entry:
    return Entry(
        seq=seq,
        key_id=key_id,
        algo=ALGO,  # the portal signs every receipt with the one algorithm and format (SPEC §7)
        format=FORMAT,
        prev_hash=prev_hash,
        content_hash=content_hash,
        signature=signature,
        envelope=envelope,
    )


def entry_of(receipt: Receipt) -> Entry:
    """A stored receipt as the kernel's wire entry (the envelope exactly as stored and signed)."""
    return _entry(
        receipt.seq, receipt.key_id, receipt.prev_hash, receipt.content_hash, receipt.signature, receipt.envelope
    )


#: ``proof_for``'s read, compiled once and sent prepared (the review page verifies the chain it shows on every open).
_WIRE_ROWS: Final = Compiled(
    "proof-rows",
    Receipt,
    lambda verification_pk: Receipt.objects.filter(verification_id=verification_pk)
    .order_by()
    .values_list(*WIRE_COLUMNS),
    {"verification_pk": Probe.key_of(Verification)},
    prepared=True,
)


def proof_for(verification: Verification) -> dict[str, Any] | None:
    """The proof document of a verification (SPEC §7) with the server-served head; None while the chain is empty.

    The entries are the stored columns as they are (``wire_entries``), as the audit reads them: each was checked when
    it was signed, and whoever relies on the proof verifies it strictly (a tampered row is the verifier's finding,
    not an error here). No ``Entry`` is built: re-checking every stored signature's base64 was a quarter of the time
    it takes to fetch a 10,000-entry chain.
    """
    return proof_of_rows(verification, _WIRE_ROWS.rows(verification_pk=verification.pk))


def proof_read(verification_pk: Any) -> tuple[Compiled, Mapping[str, Any]]:
    """``proof_for``'s read of a chain as (query, arguments), to send with other reads in one round trip
    (``compiled.pipelined``); ``proof_of_rows`` makes the proof of its rows."""
    return _WIRE_ROWS, {"verification_pk": verification_pk}


def proof_of_rows(verification: Verification, rows: list[tuple[Any, ...]]) -> dict[str, Any] | None:
    """``proof_for``'s document of the rows ``proof_read`` read; None for no rows (an empty chain)."""
    entries = wire_entries(_in_seq_order(rows))
    if not entries:
        return None
    head = entries[-1]["content_hash"]
    return proof_document(verification_id=str(verification.id), entries=entries, proof_head_hash=head)


def proof_text(verification: Verification) -> str | None:
    """``proof_for``'s document as compact JSON text (``kernel.chain.proof_json``), for the API to serve as it is;
    None while the chain is empty."""
    rows = _in_seq_order(_WIRE_ROWS.rows(verification_pk=verification.pk))
    if not rows:
        return None
    head = rows[-1][_CONTENT_HASH]
    return proof_json(verification_id=str(verification.id), rows=rows, proof_head_hash=head)


_CONTENT_HASH: Final = WIRE_COLUMNS.index("content_hash")


def _in_seq_order(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``_WIRE_ROWS``' rows (the chain's wire columns, ``WIRE_COLUMNS``) sorted by seq, in place.

    Read in the database's order and sorted here: with ORDER BY seq, PostgreSQL may sort the wide rows (spilling
    11 MB to disk for 10,000 entries when it expects a short chain) where sorting the fetched tuples by seq costs a
    millisecond (they mostly arrive in order).
    """
    rows.sort(key=itemgetter(0))
    return rows


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


def signing_keys_with_receipt_counts() -> QuerySet[SigningKey]:
    """Every signing key of the portal, newest first, each annotated ``signed``: how many receipts it signed."""
    return SigningKey.objects.annotate(signed=Count("receipts")).order_by("-created_at", "key_id")


def portal_key_get(key_id: str) -> SigningKey | None:
    return SigningKey.objects.filter(key_id=key_id).first() if isinstance(key_id, str) else None


def own_key_ids() -> set[str]:
    """The key ids of the portal's own signing keys (any status)."""
    return set(SigningKey.objects.values_list("key_id", flat=True))


def pin_of(key_id: str, purpose: str) -> PinEntry | None:
    """The pin in force for (key, purpose), or None."""
    try:
        wanted = PinPurpose(purpose)
    except ValueError:
        return None
    return pin_state().pinned.get((key_id, wanted))


def known_key(key_id: str) -> bool:
    """A key the portal knows (one of its own, or one in the pin log): the only ones a revocation can name."""
    return SigningKey.objects.filter(key_id=key_id).exists() or PinEntry.objects.filter(key_id=key_id).exists()


@dataclass(frozen=True)
class ChainCheck:
    """A chain verified strictly (SPEC §7): the kernel's report of every step for every entry, the head it was
    checked against, and the trust store given to the verifier (the pinned proof-signing keys, with revocation)."""

    report: VerificationReport
    trusted_head: str | None
    keys: Mapping[str, TrustedKey]


def check_chain(verification: Verification) -> ChainCheck | None:
    """The chain of a verification verified strictly: keys from the trust root (proof-signing, with revocation), the
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
    return ChainCheck(report=report, trusted_head=head.content_hash, keys=keys)


def check_uploaded_proof(
    data: bytes, *, trusted_head: str | None, verification_id: str, submission_hash: str
) -> ChainCheck:
    """A proof an admin uploaded, verified against the pinned proof-signing keys and the head they entered."""
    keys = trusted_keys(PinPurpose.PROOF_SIGNING)
    report = verify_proof_bytes(
        data,
        keys=keys,
        trusted_head=trusted_head or None,
        expected_verification_id=verification_id,
        expected_submission_hash=submission_hash,
    )
    return ChainCheck(report=report, trusted_head=trusted_head or None, keys=keys)


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


#: The finding kinds the audit raises.
AUDIT_FINDING_KINDS: Final = ("tamper", "revoked_key")


def audit_findings(limit: int = 50) -> list[Finding]:
    """The most recent tamper and revoked-key findings (what the audit raises)."""
    return list(
        Finding.objects.filter(kind__in=AUDIT_FINDING_KINDS).select_related("verification").order_by("-id")[:limit]
    )


def audit_findings_of(verification: Verification) -> QuerySet[Finding]:
    """The tamper and revoked-key findings raised on one verification's chain, newest first."""
    return Finding.objects.filter(verification=verification, kind__in=AUDIT_FINDING_KINDS).order_by("-id")


def latest_audit_runs(limit: int = 10) -> list[AuditRun]:
    """The most recent audit runs, newest first (for the admin pages)."""
    return list(AuditRun.objects.order_by("-id")[:limit])


def checkpoint_tail(limit: int = 10) -> list[tuple[int, str]]:
    """The last ``limit`` lines of the checkpoint log, oldest first (for the admin pages)."""
    from verification.trust.services.checkpoints import checkpoint_log_path, read_checkpoints

    return list(deque(read_checkpoints(checkpoint_log_path()), maxlen=limit))

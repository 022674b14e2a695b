"""The audit's key check (SPEC §8): the trust root's keys for the run, and every signing key and pin the database
lists checked against the pin journal."""

from __future__ import annotations

from verification.kernel.canonical import loads_strict
from verification.kernel.errors import KernelError
from verification.kernel.findings import FindingKind
from verification.kernel.journal import JournalState
from verification.kernel.keys import PublicKey
from verification.kernel.reasons import Reason
from verification.kernel.verifier import TrustedKey
from verification.trust import root as trust
from verification.trust.models import PinEntry, PinPurpose, SigningKey
from verification.trust.services.audit_report import AuditReport, Problem


def journal_keys(report: AuditReport) -> tuple[JournalState | None, dict[str, TrustedKey], dict[str, TrustedKey]]:
    """The trust root (SPEC §8: the pin journal and the portal's private key material, never the database): the
    journal, the proof-signing keys with revocation lifted (the audit reports revocation itself), and the same keys
    as trusted. A journal that does not verify is a tamper problem and trusts nothing but the portal's own keys."""
    state, error = trust.journal_state()
    if error is not None:
        report.problems.append(
            Problem(
                FindingKind.TAMPER,
                Reason.PIN_JOURNAL_INVALID,
                ("pin-journal", Reason.PIN_JOURNAL_INVALID.value),
                f"{trust.journal_path()}: {error.detail}",
            )
        )
    trusted = dict(trust.trusted_keys(PinPurpose.PROOF_SIGNING.value))
    lifted = {key_id: TrustedKey(k.key, revoked=False) for key_id, k in trusted.items()}
    return state, lifted, trusted


def _key_problem(key_id: str, code: Reason, detail: str) -> Problem:
    return Problem(FindingKind.TAMPER, code, ("signing-key", key_id, code.value), detail)


def check_keys(state: JournalState | None, report: AuditReport) -> None:
    """Every signing key and pin the database lists against the pin journal (SPEC §8: the database is its cache)."""
    own = {k.key.key_id: k for k in trust.own_keys()}
    journal_keys = state.keys if state is not None else {}
    for row in SigningKey.objects.order_by("created_at", "key_id"):
        try:
            key = PublicKey.from_raw(bytes(row.public_key))
        except KernelError as exc:
            report.problems.append(_key_problem(row.key_id, exc.reason, f"{row.key_id}: {exc.detail}"))
            continue
        if key.key_id != row.key_id or key.fingerprint != row.fingerprint:
            report.problems.append(
                _key_problem(
                    row.key_id,
                    Reason.KID_MISMATCH,
                    f"{row.key_id}: its id or fingerprint does not derive from its public key ({key.key_id})",
                )
            )
            continue
        recorded = own.get(row.key_id)
        if recorded is None:
            report.problems.append(
                _key_problem(
                    row.key_id,
                    Reason.KEY_NOT_IN_PIN_JOURNAL,
                    f"{row.key_id} ({row.status}) is in the keys "
                    "table but not in the pin journal nor the portal's key material: never trusted",
                )
            )
            continue
        if recorded.key.fingerprint != key.fingerprint:
            report.problems.append(
                _key_problem(row.key_id, Reason.KID_MISMATCH, f"{row.key_id}: the pin journal holds another key")
            )
            continue
        if (row.status == SigningKey.Status.REVOKED) != (recorded.status == "revoked"):
            report.problems.append(
                _key_problem(
                    row.key_id,
                    Reason.KEY_STATE_MISMATCH,
                    f"{row.key_id} is {row.status} in the keys table but {recorded.status} in the pin journal",
                )
            )
    pinned = state.pinned if state is not None else {}
    seen: set[tuple[str, str]] = set()
    for entry in (
        PinEntry.objects.filter(action="pin").order_by("id").only("id", "key_id", "purpose", "fingerprint", "jwk")
    ):
        where = (entry.key_id, str(entry.purpose))
        if where in seen:
            continue
        seen.add(where)
        try:
            PublicKey.from_jwk(loads_strict(entry.jwk))
        except KernelError as exc:  # only a write behind the portal's back can store a key the kernel refuses
            report.problems.append(
                Problem(
                    FindingKind.TAMPER,
                    exc.reason,
                    ("pin-log", f"entry {entry.pk}", exc.reason.value),
                    f"pin entry {entry.pk} ({entry.key_id}) holds a key the kernel refuses: {exc.detail}",
                )
            )
            continue
        known = journal_keys.get(entry.key_id)
        in_journal = (
            known is not None
            and known.key.fingerprint == entry.fingerprint
            and (where in pinned or known.revoked_at is not None or _was_pinned(state, where))
        )
        if not in_journal:
            report.problems.append(
                Problem(
                    FindingKind.TAMPER,
                    Reason.KEY_NOT_IN_PIN_JOURNAL,
                    ("pin-log", entry.key_id, str(entry.purpose), Reason.KEY_NOT_IN_PIN_JOURNAL.value),
                    f"pin entry {entry.pk} pins {entry.key_id} for {entry.purpose}; the pin journal never did: "
                    "never trusted",
                )
            )


def _was_pinned(state: JournalState | None, where: tuple[str, str]) -> bool:
    """Did the journal ever pin (key, purpose)? (A pin later unpinned is still a pin the journal recorded.)"""
    return state is not None and where in state.ever_pinned

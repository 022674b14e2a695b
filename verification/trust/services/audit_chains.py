"""The audit's chain check (SPEC §7): every chain re-verified strictly from the stored rows, the queue's cached
columns compared with the head receipt, chains signed by a since-revoked key reported as such."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Final

from verification.kernel.canonical import loads_strict
from verification.kernel.chain import WIRE_COLUMNS, proof_document, wire_entries
from verification.kernel.errors import KernelError
from verification.kernel.findings import FindingKind
from verification.kernel.journal import JournalState
from verification.kernel.reasons import Reason, explain
from verification.kernel.verifier import STEP_NAMES, TrustedKey, verify_report
from verification.runs.models import Verification
from verification.trust.models import Receipt
from verification.trust.services.audit_report import CHUNK, AuditReport, Problem

_CHAIN_COLUMNS: Final = ("verification_id", *WIRE_COLUMNS, "verification__submission_hash")


def _revocation(state: JournalState | None, key_id: str) -> tuple[str, str]:
    known = state.keys.get(key_id) if state is not None else None
    if known is None or known.revoked_at is None:
        return "", ""
    return known.revoked_at, known.revoked_reason


def _cached_states() -> dict[str, tuple[Any, Any, bool, bool]]:
    """The queue's cached columns of every verification whose cache was written (verdict set): id -> (verdict,
    determination, flagged, human_decided). A bare row (no cache written yet) is not compared."""
    rows = Verification.objects.filter(verdict__isnull=False).values_list(
        "pk", "verdict", "determination", "flagged", "human_decided"
    )
    return {
        str(pk): (verdict, determination, bool(flagged), bool(human))
        for pk, verdict, determination, flagged, human in rows.iterator(chunk_size=CHUNK)
    }


def _any_decision(envelopes: list[str]) -> bool:
    for envelope in envelopes:
        try:
            payload = loads_strict(envelope)["payload"]
        except (KernelError, KeyError, TypeError):
            continue
        if isinstance(payload, Mapping) and payload.get("kind") == "decision":
            return True
    return False


def _cache_mismatch(cached: tuple[Any, Any, bool, bool], envelopes: list[str]) -> str | None:
    """How the cached columns disagree with the head receipt they derive from (SPEC §7: the receipt is the truth)."""
    verdict, determination, flagged, human_decided = cached
    try:
        head = loads_strict(envelopes[-1])["payload"]
    except (KernelError, KeyError, TypeError, AttributeError):
        return None  # a malformed envelope is the chain check's finding
    if not isinstance(head, Mapping):
        return None
    wrong = []
    if head.get("verdict") != verdict:
        wrong.append(f"verdict {verdict!r}, head {head.get('verdict')!r}")
    if head.get("determination") != determination:
        wrong.append(f"determination {determination!r}, head {head.get('determination')!r}")
    if head.get("kind") == "decision":
        if not human_decided or flagged:
            wrong.append(f"human_decided {human_decided}, flagged {flagged} under a decision head")
    else:
        if bool(head.get("flagged")) != flagged:
            wrong.append(f"flagged {flagged}, head {bool(head.get('flagged'))}")
        if human_decided and not _any_decision(envelopes[:-1]):
            wrong.append("human_decided without any decision receipt")
    return "; ".join(wrong) or None


def check_chains(
    keys: Mapping[str, TrustedKey], revoked: set[str], state: JournalState | None, report: AuditReport
) -> None:
    caches = _cached_states()
    rows = Receipt.objects.order_by("verification_id", "seq").values_list(*_CHAIN_COLUMNS).iterator(chunk_size=CHUNK)
    for verification_id, group in itertools.groupby(rows, key=lambda row: row[0]):
        chain = list(group)
        report.chains += 1
        report.receipts += len(chain)
        vid = str(verification_id)
        first = chain[0]
        entries = wire_entries(row[1:-1] for row in chain)  # the wire columns, between the id and the hash
        head = entries[-1]["content_hash"]  # the stored head (SPEC §7: the caller's trusted head)
        proof = proof_document(verification_id=vid, entries=entries, proof_head_hash=head)
        result = verify_report(
            proof, keys=keys, trusted_head=head, expected_verification_id=vid, expected_submission_hash=first[7]
        )
        cached = caches.get(vid)
        mismatch = _cache_mismatch(cached, [e["envelope"] for e in entries]) if cached is not None else None
        if mismatch is not None:
            report.problems.append(
                Problem(
                    FindingKind.TAMPER,
                    Reason.CACHED_STATE_MISMATCH,
                    (vid, f"head {head}", Reason.CACHED_STATE_MISMATCH.value),
                    f"the queue's columns disagree with the head receipt (seq {entries[-1]['seq']}): {mismatch}",
                    verification_id=vid,
                    seq=entries[-1]["seq"],
                    receipt_id=head,
                )
            )
        for key_id in sorted({e["key_id"] for e in entries} & revoked):
            revoked_at, revoked_reason = _revocation(state, key_id)
            signed = [e["seq"] for e in entries if e["key_id"] == key_id]
            report.problems.append(
                Problem(
                    FindingKind.REVOKED_KEY,
                    Reason.FINDING_REVOKED_KEY,
                    (vid, key_id),
                    f"seq {', '.join(map(str, signed))} signed by {key_id}, revoked at {revoked_at}: {revoked_reason}",
                    verification_id=vid,
                    seq=signed[0],
                    receipt_id=next(e["content_hash"] for e in entries if e["key_id"] == key_id),
                )
            )
        if result.ok:
            continue
        code = result.reason or Reason.MALFORMED_PROOF
        if code is Reason.UNKNOWN_KEY:
            # Every receipt names a key the database lists (a foreign key): one the trust root does not know is a
            # key that only the database vouches for (SPEC §8).
            code = Reason.KEY_NOT_IN_PIN_JOURNAL
        seq = result.failed_seq
        where = f"seq {seq}" if seq is not None else "the proof"
        receipt_id = next((e["content_hash"] for e in entries if e["seq"] == seq), None)
        step = result.failed_step
        step_name = STEP_NAMES[step] if step is not None else ""
        report.problems.append(
            Problem(
                FindingKind.TAMPER,
                code,
                (vid, where, code.value),
                f"step {step} ({step_name}) failed at {where}: {code.value} — {explain(code)} {result.detail}".strip(),
                verification_id=vid,
                seq=seq,
                receipt_id=receipt_id,
                step=step,
            )
        )

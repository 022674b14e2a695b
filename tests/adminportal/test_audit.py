"""The continuous audit (issue 7 §5): chains re-verified, keys checked against the pin log, an RFC 6962 tree over all
receipts with signed checkpoints outside the database, findings raised once per state.

The three attacks of the issue, each as a database superuser could mount it (the append-only triggers lifted):
(a) a receipt's bytes changed in place; (b) a whole chain rewritten and re-signed with a key inserted straight into
the keys table; (c) a key revoked — its chains are revoked-key findings, not tampering.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.adminportal.conftest import guards_lifted, issue_chain, rewrite_chain, rogue_key, tamper_envelope
from verification.kernel.canonical import canonical_text
from verification.kernel.checkpoint import checkpoint_message, parse_checkpoint, sign_checkpoint, verify_checkpoint
from verification.kernel.findings import FindingKind
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason
from verification.reviews.models import Finding
from verification.trust.models import AuditLeaf, AuditRun, PinAction, PinEntry, PinPurpose, Receipt, SecurityLogEntry
from verification.trust.services import audit
from verification.trust.services.audit import audit_run
from verification.trust.services.audit_report import AuditReport
from verification.trust.services.keys import key_revoke, signing_key_rotate

pytestmark = pytest.mark.django_db


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _codes(report: AuditReport) -> set[tuple[str, str]]:
    return {(p.kind.value, p.code.value) for p in report.problems}


# --- a clean run ----------------------------------------------------------------------------------------------------


def _record_leaves() -> int:
    from verification.trust.models import AuditRecordLeaf

    return AuditRecordLeaf.objects.count()


def test_a_clean_audit_verifies_every_chain_and_appends_a_signed_tree_head(
    chain: Any, make_verification: Any, checkpoint_log: Path, signing_key: Any
) -> None:
    verification, receipts = chain
    other = make_verification(submission_hash="3" * 64)
    issue_chain(other)

    report = audit_run()

    assert report.ok and report.problems == []
    records = _record_leaves()  # the pin log's entries (and any security-log entry) are leaves too (SPEC §8)
    assert records >= 1
    assert (report.chains, report.receipts, report.tree_size, report.leaves_added) == (2, 6, 6 + records, 6 + records)
    assert report.consistent is None  # the first checkpoint: nothing to compare with
    lines = _lines(checkpoint_log)
    assert len(lines) == 1
    checkpoint = parse_checkpoint(lines[0], line=1)
    assert (checkpoint.tree_size, checkpoint.root_hash, checkpoint.key_id) == (
        6 + records, report.root_hash, signing_key.key_id
    )
    assert verify_checkpoint(checkpoint, signing_key.public)
    assert lines[0] == canonical_text(json.loads(lines[0]))  # the line is RFC 8785 JSON
    # The leaves are the receipts' content hashes, each receipt at the position the audit first gave it.
    positions = list(AuditLeaf.objects.order_by("position").values_list("position", "content_hash"))
    assert [p for p, _ in positions] == list(range(6))
    assert {h for _, h in positions} == set(Receipt.objects.values_list("content_hash", flat=True))
    run = AuditRun.objects.get()
    assert run.ok and run.checkpoint_written and run.tree_size == 6 + records and run.root_hash == report.root_hash


def test_the_signature_covers_the_checkpoint_domain_and_every_field(checkpoint_log: Path, signing_key: Any) -> None:
    key = PrivateKey.generate()
    signed = sign_checkpoint(private_key=key, tree_size=3, root_hash="ab" * 32, timestamp=timezone.now())
    assert verify_checkpoint(signed, key.public_key)
    message = checkpoint_message(signed.body())
    assert message.startswith(b"acretix-verify/checkpoint-sig/1:")
    for change in ({"tree_size": 4}, {"root_hash": "cd" * 32}, {"timestamp": "2000-01-01T00:00:00.000000Z"}):
        forged = parse_checkpoint(canonical_text({**json.loads(signed.as_line()), **change}))
        assert not verify_checkpoint(forged, key.public_key)
    assert not verify_checkpoint(signed, PrivateKey.generate().public_key)


def test_a_second_run_over_the_same_state_is_idempotent(chain: Any, checkpoint_log: Path) -> None:
    first = audit_run()
    second = audit_run()
    assert second.ok and second.leaves_added == 0 and second.consistent is True
    assert second.written is None  # the tree did not grow: the last checkpoint still describes it
    assert len(_lines(checkpoint_log)) == 1
    assert second.root_hash == first.root_hash
    assert AuditRun.objects.count() == 2


def test_new_receipts_extend_the_tree_consistently(chain: Any, make_verification: Any, checkpoint_log: Path) -> None:
    first = audit_run()
    issue_chain(make_verification(submission_hash="4" * 64))
    second = audit_run()
    assert second.ok and second.consistent is True and second.checkpoint is not None
    records = _record_leaves()
    assert (second.checkpoint.tree_size, second.tree_size, second.leaves_added) == (3 + records, 6 + records, 3)
    assert second.checkpoint.root_hash == first.root_hash
    assert [parse_checkpoint(line).tree_size for line in _lines(checkpoint_log)] == [3 + records, 6 + records]


def test_backdated_receipts_are_appended_not_inserted(
    signing_key: Any, make_verification: Any, checkpoint_log: Path
) -> None:
    """A receipt signed with an earlier created_at than one already in the tree still gets the next position."""
    from verification.trust.services.receipts import receipt_issue

    receipt_issue(verification=make_verification(), kind="run", payload={"verdict": "PASS"})
    audit_run()
    earlier = timezone.now() - timedelta(days=3)
    late = receipt_issue(
        verification=make_verification(submission_hash="5" * 64), kind="run", payload={"verdict": "FAIL"},
        created_at=earlier,
    )
    report = audit_run()
    assert report.ok and report.consistent is True
    # position 0: the first receipt; then the records the first run saw (the pin log's entries); then the late one
    assert AuditLeaf.objects.get(content_hash=late.content_hash).position == 1 + _record_leaves()


# --- (a) bytes changed in place ---------------------------------------------------------------------------------------


def test_a_changed_receipt_is_a_tamper_finding_naming_the_verification_the_entry_and_the_code(
    chain: Any, checkpoint_log: Path
) -> None:
    verification, receipts = chain
    audit_run()
    tamper_envelope(receipts[1], '"verdict":"UNKNOWN"', '"verdict":"PASS"')

    report = audit_run()

    assert not report.ok
    [problem] = report.tamper
    assert (problem.verification_id, problem.seq, problem.code) == (
        str(verification.pk), 1, Reason.CONTENT_HASH_MISMATCH
    )
    assert problem.step == 2 and problem.receipt_id == receipts[1].content_hash
    finding = Finding.objects.get(kind=FindingKind.TAMPER)
    assert finding.verification_id == verification.pk
    assert finding.refs == [str(verification.pk), "seq 1", "content-hash-mismatch"]
    assert finding.reason == Reason.FINDING_TAMPER.value
    assert finding.receipt_refs == [receipts[1].content_hash]
    assert "content-hash-mismatch" in finding.detail and "seq 1" in finding.detail
    assert finding.events.get().action == "raised"
    entry = SecurityLogEntry.objects.get(kind="audit-finding")
    assert entry.target == str(verification.pk) and entry.actor_label == "system: audit_chains"
    # The content-hash column is unchanged, so the tree is still consistent (the chain check caught it).
    assert report.consistent is True
    # Idempotent: the same state raises nothing new.
    again = audit_run()
    assert not again.ok and again.findings_raised == 0
    assert Finding.objects.filter(kind=FindingKind.TAMPER).count() == 1


def test_a_changed_signature_fails_at_step_5(chain: Any, checkpoint_log: Path) -> None:
    verification, receipts = chain
    forged = PrivateKey.generate().sign(b"anything")
    import base64

    with guards_lifted():
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE verification_receipt SET signature = %s WHERE content_hash = %s",
                [base64.b64encode(forged).decode(), receipts[2].content_hash],
            )
    report = audit_run()
    [problem] = report.tamper
    assert (problem.seq, problem.code, problem.step) == (2, Reason.SIGNATURE_FAILURE, 5)


def test_a_deleted_last_receipt_is_missing_from_the_tree(chain: Any, checkpoint_log: Path) -> None:
    """The stored head moves back with it, so the chain alone still verifies: the tree catches it."""
    verification, receipts = chain
    audit_run()
    with guards_lifted():
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM verification_receipt WHERE content_hash = %s", [receipts[2].content_hash])
    report = audit_run()
    assert _codes(report) == {("tamper", "receipt-missing"), ("tamper", "checkpoint-inconsistent")}
    missing = next(p for p in report.problems if p.code is Reason.RECEIPT_MISSING)
    assert (missing.verification_id, missing.seq) == (str(verification.pk), 2)
    assert report.written is None and len(_lines(checkpoint_log)) == 1


# --- (b) a whole chain rewritten and re-signed -----------------------------------------------------------------------


def _make_pass(payload: dict[str, Any]) -> None:
    payload["verdict"] = "PASS"


def test_a_rewritten_chain_signed_by_a_key_inserted_into_the_keys_table_is_caught(
    chain: Any, checkpoint_log: Path
) -> None:
    verification, receipts = chain
    audit_run()
    rogue = rogue_key()
    rewrite_chain(verification, rogue, _make_pass)
    assert Receipt.objects.filter(verification=verification).count() == 3

    report = audit_run()

    kid = rogue.public_key.key_id
    refs = {p.refs for p in report.tamper}
    # the chain: signed by a key the trust root (the pin journal) does not know (step 5)
    assert (str(verification.pk), "seq 0", "key-not-in-pin-journal") in refs
    # the key: in the keys table, not in the pin journal
    assert ("signing-key", kid, "key-not-in-pin-journal") in refs
    # the tree: not an extension of the last checkpoint, which is left as the last one
    assert report.consistent is False
    inconsistent = next(p for p in report.tamper if p.code is Reason.CHECKPOINT_INCONSISTENT)
    assert f"{verification.pk} seq 0" in inconsistent.detail
    assert report.written is None and len(_lines(checkpoint_log)) == 1
    assert Finding.objects.filter(kind=FindingKind.TAMPER).count() == 3
    assert audit_run().findings_raised == 0  # still inconsistent with the same checkpoint: nothing new


def test_a_rewrite_whose_key_was_also_slipped_into_the_pin_log_is_caught_by_the_journal_and_the_tree(
    chain: Any, checkpoint_log: Path
) -> None:
    verification, _ = chain
    audit_run()
    rogue = rogue_key()
    PinEntry(
        action=PinAction.PIN, purpose=PinPurpose.PROOF_SIGNING, key_id=rogue.public_key.key_id,
        jwk=canonical_text(rogue.public_key.to_jwk()), fingerprint=rogue.public_key.fingerprint,
        actor_label="user: mallory", created_at=timezone.now(), channel="none",
    ).save()
    rewrite_chain(verification, rogue, _make_pass)

    report = audit_run()

    # The database vouches for the key twice (keys table and pin log), the pin journal outside it never did.
    assert _codes(report) == {("tamper", "checkpoint-inconsistent"), ("tamper", "key-not-in-pin-journal")}
    assert ("pin-log", rogue.public_key.key_id, "proof-signing", "key-not-in-pin-journal") in {
        p.refs for p in report.tamper
    }
    assert report.consistent is False


def test_without_a_checkpoint_a_rewrite_is_still_caught_by_the_key_check(chain: Any, checkpoint_log: Path) -> None:
    verification, _ = chain
    rewrite_chain(verification, rogue_key(), _make_pass)
    report = audit_run()
    assert ("tamper", "key-not-in-pin-journal") in _codes(report) and report.consistent is None


# --- (c) a revoked key ------------------------------------------------------------------------------------------------


def test_chains_of_a_revoked_key_are_revoked_key_findings_not_tamper(
    chain: Any, make_verification: Any, checkpoint_log: Path, admin_user: Any
) -> None:
    verification, receipts = chain
    old_kid = receipts[0].key_id
    signing_key_rotate()
    newer = make_verification(submission_hash="6" * 64)
    issue_chain(newer)  # signed by the new key
    audit_run()
    key_revoke(key_id=old_kid, reason="laptop stolen", channel="phone call with the security team",
               actor_user=admin_user)

    report = audit_run()

    assert report.ok and report.tamper == []
    [problem] = report.revoked
    assert problem.refs == (str(verification.pk), old_kid)
    assert "laptop stolen" in problem.detail
    finding = Finding.objects.get()
    assert (finding.kind, finding.reason, finding.verification_id) == (
        "revoked_key", "signed-by-revoked-key", verification.pk
    )
    assert audit_run().findings_raised == 0


def test_a_revoked_chain_that_was_also_tampered_with_is_both(chain: Any, checkpoint_log: Path, admin_user: Any) -> None:
    verification, receipts = chain
    signing_key_rotate()
    key_revoke(key_id=receipts[0].key_id, reason="compromised", channel="incident ticket", actor_user=admin_user)
    tamper_envelope(receipts[2], '"verdict":"PASS"', '"verdict":"FAIL"')
    report = audit_run()
    assert _codes(report) == {("revoked_key", "signed-by-revoked-key"), ("tamper", "content-hash-mismatch")}


def test_checkpoints_signed_by_a_since_revoked_key_are_set_aside(
    chain: Any, checkpoint_log: Path, admin_user: Any
) -> None:
    _, receipts = chain
    audit_run()  # signed by the key about to be revoked
    signing_key_rotate()
    key_revoke(key_id=receipts[0].key_id, reason="compromised", channel="incident ticket", actor_user=admin_user)
    report = audit_run()
    assert report.checkpoint is None and report.tamper == []
    assert any("since-revoked" in note for note in report.notes)
    assert report.written is not None and report.written.key_id != receipts[0].key_id


def test_key_states_that_disagree_with_the_pin_log_are_tamper(
    chain: Any, checkpoint_log: Path, signing_key: Any
) -> None:
    from verification.trust.models import SigningKey

    SigningKey.objects.filter(pk=signing_key.pk).update(status="revoked", revoked_at=timezone.now())
    report = audit_run()
    assert ("signing-key", signing_key.key_id, "key-state-mismatch") in {p.refs for p in report.tamper}


# --- corruption of the checkpoint log ---------------------------------------------------------------------------------


def test_a_forged_checkpoint_line_is_tamper_and_set_aside(chain: Any, checkpoint_log: Path) -> None:
    first = audit_run()
    line = json.loads(_lines(checkpoint_log)[0])
    with checkpoint_log.open("a") as handle:
        handle.write(canonical_text({**line, "tree_size": 2}) + "\n")  # edited: the signature no longer covers it
        handle.write("not json\n")
        other = sign_checkpoint(
            private_key=PrivateKey.generate(), tree_size=3, root_hash=first.root_hash, timestamp=timezone.now()
        )
        handle.write(other.as_line() + "\n")  # signed, but by no portal key
    report = audit_run()
    assert {p.refs for p in report.tamper} == {
        ("checkpoint-log", "line 2", "signature-failure"),
        ("checkpoint-log", "line 3", "malformed-checkpoint"),
        ("checkpoint-log", "line 4", "unknown-key"),
    }
    assert report.checkpoint is not None and report.checkpoint.line == 1 and report.consistent is True


def test_a_changed_root_in_the_log_fails_its_signature(chain: Any, checkpoint_log: Path) -> None:
    audit_run()
    line = json.loads(_lines(checkpoint_log)[0])
    flipped = ("0" if line["root_hash"][0] != "0" else "1") + line["root_hash"][1:]
    checkpoint_log.write_text(canonical_text({**line, "root_hash": flipped}) + "\n")
    report = audit_run()
    refs = {p.refs for p in report.tamper}
    assert ("checkpoint-log", "line 1", "signature-failure") in refs
    assert any(r[:2] == ("checkpoint-log", "missing") for r in refs)  # and the database knows it wrote another


def test_a_removed_checkpoint_log_is_noticed(chain: Any, checkpoint_log: Path) -> None:
    first = audit_run()
    checkpoint_log.unlink()
    report = audit_run()
    assert ("checkpoint-log", "missing", f"{first.tree_size}:{first.root_hash}") in {p.refs for p in report.tamper}


def test_a_checkpoint_larger_than_the_tree_is_inconsistent(
    chain: Any, checkpoint_log: Path, signing_key: Any
) -> None:
    from verification.trust import signing

    audit_run()
    private = signing.private_key_for(signing_key)
    bigger = sign_checkpoint(private_key=private, tree_size=99, root_hash="ab" * 32, timestamp=timezone.now())
    with checkpoint_log.open("a") as handle:
        handle.write(bigger.as_line() + "\n")
    report = audit_run()
    assert report.consistent is False
    assert ("tamper", "checkpoint-inconsistent") in _codes(report)


def test_a_removed_leaf_row_leaves_a_gap(chain: Any, checkpoint_log: Path) -> None:
    audit_run()
    with guards_lifted("verification_auditleaf"):
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM verification_auditleaf WHERE position = 1")
    report = audit_run()
    assert ("audit-tree", "position 1", "gap") in {p.refs for p in report.tamper}


# --- the doors: the command and the beat task --------------------------------------------------------------------


def test_the_command_prints_the_summary_and_fails_on_tampering(chain: Any, checkpoint_log: Path, capsys: Any) -> None:
    call_command("audit_chains")
    out = capsys.readouterr().out
    assert "1 chain(s), 3 receipt(s)" in out and "ok" in out
    _, receipts = chain
    tamper_envelope(receipts[0], '"verdict":"PENDING"', '"verdict":"PASS"')
    with pytest.raises(SystemExit) as exit_info:
        call_command("audit_chains", "--json")
    assert exit_info.value.code == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["ok"] is False and summary["problems"][0]["code"] == "content-hash-mismatch"


def test_the_beat_task_only_calls_the_service(chain: Any, checkpoint_log: Path, settings: Any) -> None:
    from verification.tasks import audit_chains

    result = audit_chains.apply().get()
    assert result["ok"] is True and result["receipts"] == 3
    entry = settings.CELERY_BEAT_SCHEDULE["audit-chains"]
    assert entry["task"] == "verification.audit_chains" and entry["schedule"] > 0


def test_a_second_run_while_one_holds_the_lock_is_skipped(chain: Any, checkpoint_log: Path) -> None:
    with audit._exclusive(checkpoint_log) as held:
        assert held
        report = audit_run()
    assert report.skipped and not report.ok and AuditRun.objects.count() == 0


def test_a_pin_entry_with_a_refused_key_is_tamper_not_a_crash(chain: Any, checkpoint_log: Path) -> None:
    small_order = {"kty": "OKP", "crv": "Ed25519", "x": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
    entry = PinEntry(
        action=PinAction.PIN, purpose=PinPurpose.PROOF_SIGNING, key_id="ed25519-0000000000000000",
        jwk=canonical_text(small_order), fingerprint="0" * 64, actor_label="user: mallory",
        created_at=timezone.now(), channel="none",
    )
    entry.save()
    report = audit_run()
    assert ("pin-log", f"entry {entry.pk}", "small-order-key") in {p.refs for p in report.tamper}
    assert report.chains == 1  # the chains were still verified

"""The trust root outside the database (issue 11 item 5; SPEC §8): the pin journal, and what row inserts cannot do.

The forgery of item 5, with raw INSERTs only (no UPDATE, no DELETE, no trigger touched): an attacker's Ed25519 key in
the keys table as ``retired``, a pin-log row pinning it for proof-signing, and a receipt at seq N+1 chained to the
current head with a decision-PASS payload signed by that key. Nothing may trust it: the audit, the API read, the
JWKS and the admin chain view.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from reviewportal.adminportal.presenters import verification_chain
from tests.verification.conftest import key_admin  # noqa: F401 - the fixture, by name
from verification.api.presenters import verification_view
from verification.kernel.canonical import canonical_text
from verification.kernel.chain import sign_entry
from verification.kernel.journal import JournalRefused, build_line, line_hash, verify_journal
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason
from verification.trust import root as trust
from verification.trust.models import PinEntry, Receipt, SigningKey
from verification.trust.selectors import head_of, jwks_document
from verification.trust.services.audit import audit_run


def _insert(table: str, row: dict[str, Any]) -> None:
    columns = ", ".join(row)
    marks = ", ".join(["%s"] * len(row))
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(row.values()))  # noqa: S608


def _when(model: Any, name: str, value: Any) -> Any:
    return model._meta.get_field(name).get_db_prep_value(value, connection)


def forge_pass(verification: Any) -> tuple[PrivateKey, str]:
    """Item 5 by INSERTs alone; the attacker's key and the forged receipt's content hash."""
    attacker = PrivateKey.generate()
    public = attacker.public_key
    now = timezone.now()
    _insert("verification_signingkey", {
        "key_id": public.key_id, "public_key": public.raw, "fingerprint": public.fingerprint, "status": "retired",
        "created_at": _when(SigningKey, "created_at", now - timedelta(days=30)),
        "retired_at": _when(SigningKey, "retired_at", now - timedelta(days=1)), "revoked_reason": "",
    })
    _insert("verification_pinentry", {
        "action": "pin", "purpose": "proof-signing", "key_id": public.key_id,
        "jwk": canonical_text(public.to_jwk()), "fingerprint": public.fingerprint, "actor_label": "user: ada",
        "created_at": _when(PinEntry, "created_at", now - timedelta(days=30)), "channel": "phone call",
        "note": "", "reason": "",
    })
    head = head_of(verification)
    assert head is not None
    payload = {
        "verdict": "PASS", "determination": "met", "score": 1.0, "confidence": 1.0, "authority": "human",
        "actor": {"id": "reviewer-1", "kind": "human"}, "flagged": False, "flag_reason": None,
        "rationale": "looks good", "supersedes_receipt_id": head.content_hash,
    }
    entry = sign_entry(
        private_key=attacker, verification_id=str(verification.pk), seq=head.seq + 1,
        rubric_hash=verification.rubric_hash, submission_hash=verification.submission_hash,
        prev_hash=head.content_hash, payload=payload, created_at=now,
    )
    _insert("verification_receipt", {
        "content_hash": entry.content_hash, "verification_id": str(verification.pk).replace("-", "")
        if connection.vendor == "sqlite" else str(verification.pk),
        "seq": head.seq + 1, "key_id": public.key_id, "prev_hash": head.content_hash,
        "signature": entry.signature, "envelope": entry.envelope, "created_at": _when(Receipt, "created_at", now),
        "kind": "decision", "verdict": "PASS", "determination": "met", "authority": "human", "actor": "reviewer-1",
        "supersedes_receipt_id": head.content_hash,
    })
    return attacker, entry.content_hash


def test_the_insert_only_forgery_is_trusted_nowhere(chain: Any, checkpoint_log: Path, client: Client) -> None:
    verification, receipts = chain
    audit_run()  # a clean audit first: a checkpoint of the honest chain
    attacker, forged = forge_pass(verification)
    kid = attacker.public_key.key_id
    assert head_of(verification).content_hash == forged  # the forged receipt is the stored head now

    # the audit: a tamper finding key-not-in-pin-journal, ok is false
    report = audit_run()
    assert report.ok is False
    refs = {p.refs for p in report.tamper}
    assert (str(verification.pk), f"seq {len(receipts)}", Reason.KEY_NOT_IN_PIN_JOURNAL.value) in refs
    assert ("signing-key", kid, Reason.KEY_NOT_IN_PIN_JOURNAL.value) in refs
    assert ("pin-log", kid, "proof-signing", Reason.KEY_NOT_IN_PIN_JOURNAL.value) in refs
    assert json.loads(json.dumps(report.summary()))["ok"] is False

    # the API's read of the verification: no verdict from the forged head, flagged for review with the code
    view = verification_view(verification, now=timezone.now())
    assert view["determination"] != "met" and view["determination"] is None
    assert view["flagged"] is True
    assert (view["flag_reason"], view["reason"]) == ("key-not-in-pin-journal", "key-not-in-pin-journal")
    assert view["kernel_verdict"] is None

    # the review page: no verdict either, flagged with the code
    from reviewportal.portal.presenters import review_view

    page = review_view(verification, now=timezone.now())
    assert (page.verdict, page.determination, page.flagged) == ("", None, True)
    assert page.flag_reason == page.reason == "key-not-in-pin-journal"
    assert page.chain_ok is False and page.chain_reason == "unknown-key"

    # the JWKS: never published (the keys table says retired, which used to be enough)
    published = client.get("/.well-known/acretix-verify/keys.json").json()
    assert kid not in {k["kid"] for k in published["keys"]}
    assert kid not in {k["kid"] for k in jwks_document()["keys"]}
    assert receipts[0].key_id in {k["kid"] for k in published["keys"]}

    # the admin chain view: the forged entry fails step 5 (unknown to the trust root)
    chain_report = verification_chain(verification)
    assert chain_report is not None and not chain_report.ok
    assert (chain_report.reason, chain_report.failed_step, chain_report.failed_seq) == ("unknown-key", 5, len(receipts))

    # the trust root itself
    assert kid not in trust.trusted_keys("proof-signing")
    assert receipts[0].key_id in trust.trusted_keys("proof-signing")


def test_an_honest_chain_reads_and_audits_clean(chain: Any, checkpoint_log: Path) -> None:
    verification, _ = chain
    report = audit_run()
    assert report.ok, report.problems
    view = verification_view(verification, now=timezone.now())
    assert view["reason"] != "key-not-in-pin-journal" and view["flag_reason"] != "key-not-in-pin-journal"


def test_the_journal_records_every_key_event_signed_and_chained(
    signing_key: Any, key_admin: Any  # noqa: F811 - the fixture, by name
) -> None:
    from verification.trust.services.keys import key_pin, key_revoke, key_unpin, signing_key_rotate

    other = PrivateKey.generate().public_key
    key_pin(actor_user=key_admin, jwk_or_pem_text=other.to_pem(), purpose="evidence-source",
            typed_fingerprint=other.fingerprint, channel="phone")
    key_unpin(actor_user=key_admin, key_id=other.key_id, purpose="evidence-source", channel="phone")
    old, new = signing_key_rotate()
    key_revoke(actor_user=key_admin, key_id=signing_key.key_id, reason="laptop stolen", channel="ticket")
    lines = trust.journal_path().read_text().splitlines()
    events = [json.loads(line)["event"]["action"] for line in lines]
    assert events == ["own-key", "pin", "pin", "unpin", "own-key", "pin", "revoke"]
    signers = [json.loads(line)["signer"] for line in lines]
    assert signers == [signing_key.key_id] * 4 + [new.key_id] * 3
    state = verify_journal(lines, anchors=frozenset({new.key_id}))
    assert state.active == new.key_id and state.is_revoked(signing_key.key_id)
    assert trust.trusted_keys("proof-signing")[signing_key.key_id].revoked
    assert [k["kid"] for k in jwks_document()["keys"]] == [new.key_id]


def test_a_journal_rewritten_without_the_portal_key_does_not_verify(signing_key: Any, checkpoint_log: Path) -> None:
    path = trust.journal_path()
    lines = path.read_text().splitlines()
    mallory = PrivateKey.generate()
    # appended by someone without the portal's key: a line signed by another key
    forged = build_line(seq=len(lines), prev_hash=line_hash(json.loads(lines[-1])),
                        event={"action": "pin", "key_id": mallory.public_key.key_id,
                               "jwk": mallory.public_key.to_jwk(), "purpose": "proof-signing", "at": ""},
                        signer=mallory)
    with pytest.raises(JournalRefused) as refused:
        verify_journal([*lines, forged])
    assert refused.value.reason is Reason.PIN_JOURNAL_INVALID
    # a whole new journal that makes the attacker's key the active one is not anchored in the portal's key
    genesis = build_line(seq=0, prev_hash=None, event={"action": "own-key", "key_id": mallory.public_key.key_id,
                         "jwk": mallory.public_key.to_jwk(), "status": "active", "at": ""}, signer=mallory)
    with pytest.raises(JournalRefused) as refused:
        verify_journal([genesis], anchors=frozenset({signing_key.key_id}))
    assert refused.value.reason is Reason.PIN_JOURNAL_INVALID
    # written to disk: trusted_keys() falls back to the portal's own key; the audit reports the journal
    path.write_text(genesis + "\n")
    assert set(trust.trusted_keys("proof-signing")) == {signing_key.key_id}
    report = audit_run()
    assert (("tamper", Reason.PIN_JOURNAL_INVALID.value) in {(p.kind.value, p.code.value) for p in report.problems})


def test_seal_pin_journal_seals_an_existing_deployment_once(
    signing_key: Any, key_admin: Any, checkpoint_log: Path  # noqa: F811 - the fixture, by name
) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    from verification.trust.services.keys import key_pin, signing_key_rotate

    issuer = PrivateKey.generate().public_key
    key_pin(actor_user=key_admin, jwk_or_pem_text=issuer.to_pem(), purpose="proof-signing",
            typed_fingerprint=issuer.fingerprint, channel="phone")
    old, new = signing_key_rotate()
    trust.journal_path().unlink()  # a deployment from before the journal: only the database knows these keys
    assert set(trust.trusted_keys("proof-signing")) == {signing_key.key_id, new.key_id}  # private material only
    assert (("tamper", Reason.KEY_NOT_IN_PIN_JOURNAL.value) in
            {(p.kind.value, p.code.value) for p in audit_run().problems})

    out = StringIO()
    call_command("seal_pin_journal", stdout=out)
    assert new.key_id in out.getvalue() and issuer.fingerprint_grouped in out.getvalue()
    trusted = trust.trusted_keys("proof-signing")
    assert {signing_key.key_id, new.key_id, issuer.key_id} <= set(trusted)
    assert [k["kid"] for k in jwks_document()["keys"]] == [signing_key.key_id, new.key_id]
    assert audit_run().ok
    before = trust.journal_path().read_bytes()
    with pytest.raises(CommandError, match="refused"):
        call_command("seal_pin_journal", stdout=StringIO())
    assert trust.journal_path().read_bytes() == before


# --- checkpoints notice deletion (issue 11 item 6; SPEC §8) ---------------------------------------------------------

APPEND_ONLY_TRUNCATED = (
    "verification_receipt",
    "verification_pinentry",
    "verification_finding",
    "verification_findingevent",
    "verification_securitylogentry",
)


def _seed_records(verification: Any) -> None:
    """A finding (with its raised event) and a security-log entry, so that every kind of leaf is in the tree."""
    from verification.kernel.findings import Finding as KernelFinding
    from verification.kernel.findings import FindingKind
    from verification.reviews.services.findings import finding_raise
    from verification.trust.models import SecurityEventKind
    from verification.trust.services.security_log import security_log_record

    finding_raise(finding=KernelFinding(kind=FindingKind.DISAGREEMENT, refs=("a", "b"), detail="seed"),
                  subject="", verification=verification, receipt_refs=[])
    security_log_record(kind=SecurityEventKind.AUDIT_FINDING, actor_label="system: test", target="seed", detail={})


def test_every_kind_of_record_is_a_leaf(chain: Any, checkpoint_log: Path) -> None:
    from verification.reviews.models import Finding, FindingEvent
    from verification.trust.models import AuditRecordLeaf, SecurityLogEntry

    verification, _ = chain
    _seed_records(verification)
    report = audit_run()
    assert report.ok
    kinds = {kind: AuditRecordLeaf.objects.filter(kind=kind).count()
             for kind in ("finding", "finding-event", "security-log", "pin-log")}
    assert kinds == {
        "finding": Finding.objects.count(), "finding-event": FindingEvent.objects.count(),
        "security-log": SecurityLogEntry.objects.count(), "pin-log": PinEntry.objects.count(),
    }
    assert min(kinds.values()) >= 1
    assert report.tree_size == Receipt.objects.count() + AuditRecordLeaf.objects.count()


@pytest.mark.postgres
@pytest.mark.parametrize("table", APPEND_ONLY_TRUNCATED)
def test_truncating_an_append_only_table_is_checkpoint_inconsistent(
    chain: Any, checkpoint_log: Path, table: str
) -> None:
    from tests.conftest import as_owner
    from verification import db_guards

    verification, _ = chain
    _seed_records(verification)
    first = audit_run()
    assert first.ok and first.written is not None
    with as_owner(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for name in db_guards.APPEND_ONLY_TABLES:  # the guards would refuse: the owner lifts them first
            cursor.execute(f'ALTER TABLE "{name}" DISABLE TRIGGER USER')
        cursor.execute(f'TRUNCATE "{table}" CASCADE')
        for name in db_guards.APPEND_ONLY_TABLES:
            cursor.execute(f'ALTER TABLE "{name}" ENABLE TRIGGER USER')
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    report = audit_run()
    assert report.ok is False
    codes = {p.code for p in report.tamper}
    assert Reason.CHECKPOINT_INCONSISTENT in codes, report.problems
    if table == "verification_receipt":
        assert Reason.RECEIPT_MISSING in codes
        assert Reason.UNKNOWN_KEY not in codes


def test_cached_columns_are_checked_against_the_head_receipt(chain: Any, checkpoint_log: Path) -> None:
    """The queue reads Verification's cached columns; the audit compares them with the receipts they derive from."""
    from verification.runs.models import Verification

    verification, receipts = chain
    head = receipts[-1]
    payload = json.loads(head.envelope)["payload"]
    Verification.objects.filter(pk=verification.pk).update(  # what the decision service writes with its receipt
        verdict=payload["verdict"], determination=payload.get("determination"), flagged=False, human_decided=True
    )
    assert audit_run().ok
    # a cache that no longer derives from its head: the queue would show what no receipt says
    Verification.objects.filter(pk=verification.pk).update(human_decided=False, flagged=True)
    report = audit_run()
    assert report.ok is False
    [mismatch] = [p for p in report.tamper if p.code is Reason.CACHED_STATE_MISMATCH]
    assert mismatch.verification_id == str(verification.pk) and mismatch.seq == len(receipts) - 1
    assert "human_decided False, flagged True" in mismatch.detail


def test_the_subject_timeline_shows_no_verdict_from_the_forged_receipt(chain: Any, checkpoint_log: Path) -> None:
    from verification.records.selectors_timeline import subject_timeline
    from verification.runs.models import Task, Verification

    verification, receipts = chain
    task = Task.objects.create(title="subject of the forgery")
    Verification.objects.filter(pk=verification.pk).update(task=task, cycle=1)
    forge_pass(verification)
    timeline = subject_timeline(task, now=timezone.now())
    shown = [r for c in timeline.cycles for v in c.verifications for r in v.receipts]
    assert [r.seq for r in shown] == list(range(len(receipts) + 1))
    honest, forged = shown[len(receipts) - 1], shown[-1]
    assert (honest.verdict, honest.determination) == ("PASS", "met")  # the honest decision still reads as it was
    assert (forged.verdict, forged.determination, forged.reason) == ("", None, "key-not-in-pin-journal")

"""receipt_issue builds real chains that the strict verifier accepts with keys from the pin log (SPEC §7, §8)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command

from tests.verification.conftest import RUBRIC_HASH, SUBMISSION_HASH, issue_chain
from verification.errors import NotFound
from verification.kernel.canonical import loads_strict
from verification.kernel.chain import content_hash_of
from verification.kernel.errors import InvariantError, ProofVerificationError
from verification.kernel.reasons import Reason
from verification.kernel.verifier import verify_report, verify_strict
from verification.trust import signing
from verification.trust.models import Receipt, SigningKey
from verification.trust.selectors import head_of, proof_for, trusted_keys
from verification.trust.services.keys import key_pin, key_unpin, signing_key_rotate
from verification.trust.services.receipts import receipt_issue
from verification.trust.signing import SigningKeyUnavailable


def verify(verification: Any, **overrides: Any) -> Any:
    """Strictly verify a verification's stored proof with the pin log's proof-signing trust root."""
    head = head_of(verification)
    arguments: dict[str, Any] = {
        "keys": trusted_keys("proof-signing"),
        "trusted_head": head.content_hash if head else None,
        "expected_verification_id": str(verification.id),
        "expected_submission_hash": verification.submission_hash,
    }
    arguments.update(overrides)
    return verify_strict(proof_for(verification), **arguments)


def test_a_three_entry_chain_verifies_strictly(chain: tuple[Any, list[Any]], signing_key: SigningKey) -> None:
    verification, (run, result, decision) = chain
    report = verify(verification)
    assert report.ok and report.entries_verified == 3
    assert [r.seq for r in (run, result, decision)] == [0, 1, 2]
    assert run.prev_hash is None and result.prev_hash == run.content_hash and decision.prev_hash == result.content_hash
    assert {r.key_id for r in (run, result, decision)} == {signing_key.key_id}
    # The receipt id is the content hash of the exact stored envelope.
    for receipt in (run, result, decision):
        receipt.refresh_from_db()
        assert content_hash_of(receipt.envelope) == receipt.content_hash


def test_indexed_copies_come_from_the_signed_payload(chain: tuple[Any, list[Any]]) -> None:
    verification, (run, result, decision) = chain
    stored = {r.kind: r for r in Receipt.objects.filter(verification=verification)}
    assert stored["run"].verdict == "PENDING" and stored["run"].authority == "deterministic"
    assert stored["result"].actor == "external-verifier-1"  # an actor object is indexed by its id
    assert stored["result"].supersedes_receipt_id == run.content_hash
    assert stored["decision"].determination == "met" and stored["decision"].actor == "user:alice"
    assert stored["decision"].supersedes_receipt_id == result.content_hash
    assert list(Receipt.objects.filter(supersedes_receipt=result)) == [stored["decision"]]
    body = loads_strict(stored["decision"].envelope)
    assert body["payload"]["kind"] == "decision"
    assert body["payload"]["supersedes_receipt_id"] == result.content_hash
    assert body["verification_id"] == str(verification.id)
    assert (body["rubric_hash"], body["submission_hash"]) == (RUBRIC_HASH, SUBMISSION_HASH)


def test_the_proof_document_is_the_wire_format(chain: tuple[Any, list[Any]]) -> None:
    verification, receipts = chain
    proof = proof_for(verification)
    assert proof is not None
    assert set(proof) == {"verification_id", "format", "signing_domain", "jwks_uri", "proof_head_hash", "entries"}
    assert proof["format"] == "acretix-verify/proof/2"
    assert proof["signing_domain"] == "acretix-verify/proof-sig/2:"
    assert proof["jwks_uri"] == "/.well-known/acretix-verify/keys.json"
    assert proof["proof_head_hash"] == receipts[-1].content_hash
    assert [e["content_hash"] for e in proof["entries"]] == [r.content_hash for r in receipts]
    assert [e["envelope"] for e in proof["entries"]] == [r.envelope for r in receipts]


def test_created_at_is_signed_as_given(signing_key: SigningKey, make_verification: Any) -> None:
    verification = make_verification()
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    receipt = receipt_issue(verification=verification, kind="run", payload={"verdict": "FAIL"}, created_at=when)
    assert loads_strict(receipt.envelope)["created_at"] == "2026-01-02T03:04:05.678901Z"
    receipt.refresh_from_db()
    assert receipt.created_at == when


def test_a_key_pinned_only_as_evidence_source_is_unknown_for_proofs(
    chain: tuple[Any, list[Any]], signing_key: SigningKey, key_admin: Any
) -> None:
    verification, _ = chain
    key = signing_key.public
    key_unpin(actor_user=key_admin, key_id=key.key_id, purpose="proof-signing", channel="phone call")
    key_pin(
        actor_user=key_admin,
        jwk_or_pem_text=key.to_pem(),
        purpose="evidence-source",
        typed_fingerprint=key.fingerprint_grouped,
        channel="phone call",
    )
    assert key.key_id in trusted_keys("evidence-source")
    assert key.key_id not in trusted_keys("proof-signing")
    with pytest.raises(ProofVerificationError) as excinfo:
        verify(verification)
    assert excinfo.value.reason is Reason.UNKNOWN_KEY


def test_a_revoked_key_fails_with_revoked_key(chain: tuple[Any, list[Any]], signing_key: SigningKey) -> None:
    verification, _ = chain
    assert verify(verification).ok
    call_command("revoke_signing_key", signing_key.key_id, reason="laptop stolen")
    assert trusted_keys("proof-signing")[signing_key.key_id].revoked is True
    with pytest.raises(ProofVerificationError) as excinfo:
        verify(verification)
    assert excinfo.value.reason is Reason.REVOKED_KEY
    # The receipts stay on record; the portal can no longer sign until a new key is created.
    assert Receipt.objects.filter(verification=verification).count() == 3
    with pytest.raises(SigningKeyUnavailable) as no_key:
        receipt_issue(verification=verification, kind="decision", payload={"verdict": "FAIL"})
    assert no_key.value.reason is Reason.NO_SIGNING_KEY


def test_rotation_keeps_old_receipts_verifying_and_signs_new_ones_with_the_new_key(
    chain: tuple[Any, list[Any]], signing_key: SigningKey, make_verification: Any
) -> None:
    verification, receipts = chain
    retired, new = signing_key_rotate()
    assert retired is not None and retired.key_id == signing_key.key_id
    assert SigningKey.objects.get(key_id=signing_key.key_id).status == SigningKey.Status.RETIRED
    # The same chain continues under the new key and verifies with both keys pinned.
    more = receipt_issue(verification=verification, kind="decision", payload={"verdict": "FAIL", "actor": "user:bob"})
    assert more.key_id == new.key_id != signing_key.key_id
    assert more.seq == 3 and more.prev_hash == receipts[-1].content_hash
    assert verify(verification).ok
    # A new verification is signed by the new key alone.
    other = make_verification()
    first = receipt_issue(verification=other, kind="run", payload={"verdict": "PASS"})
    assert first.key_id == new.key_id
    assert verify(other).ok


def test_appends_continue_the_chain_and_the_head_is_the_last_receipt(chain: tuple[Any, list[Any]]) -> None:
    verification, receipts = chain
    assert head_of(verification) == receipts[-1]
    fourth = receipt_issue(verification=verification, kind="decision", payload={"verdict": "FAIL"})
    assert head_of(verification) == fourth
    report = verify(verification)
    assert report.ok and report.entries_verified == 4
    # The previous head is no longer the head: verifying against it fails at step 7.
    stale = verify_report(
        proof_for(verification),
        keys=trusted_keys("proof-signing"),
        trusted_head=receipts[-1].content_hash,
        expected_verification_id=str(verification.id),
        expected_submission_hash=verification.submission_hash,
    )
    assert stale.reason is Reason.TERMINAL_HEAD_MISMATCH


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("verdict", {}),  # not a receipt kind
        ("run", {"kind": "decision"}),  # the payload names another kind
        ("run", {"verdict": 3}),  # an indexed field of the wrong type
        ("run", {"actor": "x" * 201}),  # longer than its indexed column
        ("decision", {"supersedes_receipt_id": "not-a-hash"}),
    ],
)
def test_malformed_requests_are_refused_and_nothing_is_stored(
    signing_key: SigningKey, make_verification: Any, kind: str, payload: dict[str, Any]
) -> None:
    verification = make_verification()
    with pytest.raises(InvariantError) as excinfo:
        receipt_issue(verification=verification, kind=kind, payload=payload)
    assert excinfo.value.reason is Reason.MALFORMED_RECORD
    assert not Receipt.objects.exists()


def test_superseding_an_unknown_receipt_is_refused(signing_key: SigningKey, make_verification: Any) -> None:
    with pytest.raises(NotFound) as excinfo:
        receipt_issue(
            verification=make_verification(), kind="decision", payload={"supersedes_receipt_id": "a" * 64}
        )
    assert excinfo.value.reason is Reason.NOT_FOUND
    assert not Receipt.objects.exists()


def test_a_naive_created_at_is_refused(signing_key: SigningKey, make_verification: Any) -> None:
    with pytest.raises(InvariantError):
        receipt_issue(
            verification=make_verification(), kind="run", payload={}, created_at=datetime(2026, 1, 1)  # noqa: DTZ001
        )
    assert not Receipt.objects.exists()


def test_without_a_signing_key_nothing_is_issued(var_dir: Any, make_verification: Any) -> None:
    with pytest.raises(SigningKeyUnavailable) as excinfo:
        receipt_issue(verification=make_verification(), kind="run", payload={})
    assert excinfo.value.reason is Reason.NO_SIGNING_KEY
    assert not Receipt.objects.exists()


def test_a_missing_private_key_file_stops_signing(signing_key: SigningKey, make_verification: Any) -> None:
    signing.key_path(signing_key.key_id).unlink()
    signing.clear_cache()
    with pytest.raises(SigningKeyUnavailable) as excinfo:
        receipt_issue(verification=make_verification(), kind="run", payload={})
    assert "does not exist" in excinfo.value.detail
    assert not Receipt.objects.exists()


def test_every_receipt_of_a_second_chain_is_bound_to_its_own_subject(
    chain: tuple[Any, list[Any]], make_verification: Any
) -> None:
    verification, _ = chain
    other = make_verification(submission_hash="3" * 64)
    issue_chain(other)
    assert verify(other).ok
    # The other chain is valid, but not about the request we expected.
    with pytest.raises(ProofVerificationError) as excinfo:
        verify(other, expected_verification_id=str(verification.id))
    assert excinfo.value.reason is Reason.SUBJECT_MISMATCH

"""The chain view and the proof upload (issue 7 §2): the strict verifier's report, each step for each entry, passed or
failed with its code and the registry's words, SPEC §12's limits beside it; an uploaded proof verified against the
pinned keys and a head the admin enters."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.urls import reverse

from tests.adminportal.conftest import guards_lifted, tamper_envelope
from verification.kernel.chain import sign_entry
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason, explain
from verification.trust.selectors import proof_for

pytestmark = pytest.mark.django_db

LIMITS = "Independence here is process-distinct, not party-distinct."


@pytest.fixture
def admin(admin_user: Any, signing_key: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def _words(reason: Reason) -> str:
    return explain(reason).replace("'", "&#x27;")


def test_a_sound_chain_passes_every_step_for_every_entry(admin: Client, chain: Any) -> None:
    verification, receipts = chain
    page = admin.get(reverse("adminportal:chain", args=[verification.pk])).content.decode()
    assert 'data-report-ok="true"' in page
    assert page.count('data-step-status="passed"') == 9
    assert page.count('data-cell-status="passed"') == 3 * 8 + 1  # step 7 checks the last entry only
    assert page.count('data-cell-status="n/a"') == 2
    assert LIMITS in page and "data-limits" in page
    assert receipts[-1].content_hash in page  # the trusted head: the stored head


def test_a_tampered_chain_shows_the_failing_step_and_entry(admin: Client, chain: Any) -> None:
    verification, receipts = chain
    tamper_envelope(receipts[1], '"verdict":"UNKNOWN"', '"verdict":"PASS"')
    page = admin.get(reverse("adminportal:chain", args=[verification.pk])).content.decode()
    assert 'data-report-ok="false"' in page
    assert 'data-failed-step="2"' in page and 'data-failed-seq="1"' in page
    assert '<code data-failed-code>content-hash-mismatch</code>' in page
    assert _words(Reason.CONTENT_HASH_MISMATCH) in page
    row = re.search(r'<tr data-entry="1" data-entry-status="failed">.*?</tr>', page, re.S)
    assert row is not None and "content-hash-mismatch" in row.group(0)
    assert '<tr data-step="3" data-step-status="not-run">' in page  # verification stops after the failing step
    assert LIMITS in page


def test_a_stored_signature_that_is_not_base64_is_step_0_on_the_page(admin: Client, chain: Any) -> None:
    # proof_for hands the stored columns over as they are: a row altered in the database is the verifier's
    # finding (malformed-proof at step 0), not an error page.
    verification, receipts = chain
    with guards_lifted(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE verification_receipt SET signature = %s WHERE content_hash = %s",
            ["not base64!", receipts[1].content_hash],
        )
    response = admin.get(reverse("adminportal:chain", args=[verification.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-report-ok="false"' in page
    assert 'data-failed-step="0"' in page
    assert '<code data-failed-code>malformed-proof</code>' in page


def test_a_revoked_key_fails_step_5_with_its_code(admin: Client, chain: Any, admin_user: Any) -> None:
    from verification.trust.services.keys import key_revoke, signing_key_rotate

    verification, receipts = chain
    signing_key_rotate()
    key_revoke(key_id=receipts[0].key_id, reason="compromised", channel="call", actor_user=admin_user)
    page = admin.get(reverse("adminportal:chain", args=[verification.pk])).content.decode()
    assert 'data-failed-step="5"' in page and '<code data-failed-code>revoked-key</code>' in page
    assert f"<code>{receipts[0].key_id}</code> (revoked)" in page


def test_a_chain_with_audit_findings_lists_them(admin: Client, chain: Any, checkpoint_log: Any) -> None:
    from verification.trust.services.audit import audit_run

    verification, receipts = chain
    tamper_envelope(receipts[0], '"verdict":"PENDING"', '"verdict":"PASS"')
    audit_run()
    page = admin.get(reverse("adminportal:chain", args=[verification.pk])).content.decode()
    assert "Audit findings on this chain" in page and "tamper" in page


def test_an_unknown_verification_is_404(admin: Client) -> None:
    assert admin.get(reverse("adminportal:chain", args=["00000000-0000-0000-0000-000000000000"])).status_code == 404


# --- an uploaded proof ----------------------------------------------------------------------------------------------


def _upload(client: Client, proof: bytes | str, *, head: str, verification: Any, as_file: bool = True) -> str:
    data: dict[str, Any] = {
        "trusted_head": head,
        "verification_id": str(verification.pk),
        "submission_hash": verification.submission_hash,
    }
    if as_file:
        data["proof_file"] = SimpleUploadedFile("proof.json", proof if isinstance(proof, bytes) else proof.encode())
    else:
        data["proof_text"] = proof
    response = client.post(reverse("adminportal:verify-proof"), data)
    assert response.status_code == 200
    return response.content.decode()


def test_an_uploaded_proof_verifies_against_the_pinned_keys_and_the_entered_head(admin: Client, chain: Any) -> None:
    verification, receipts = chain
    proof = json.dumps(proof_for(verification)).encode()
    page = _upload(admin, proof, head=receipts[-1].content_hash, verification=verification)
    assert 'data-report-ok="true"' in page and LIMITS in page
    # pasted works the same
    assert 'data-report-ok="true"' in _upload(
        admin, proof.decode(), head=receipts[-1].content_hash, verification=verification, as_file=False
    )


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("old head", Reason.TERMINAL_HEAD_MISMATCH),
        ("no head", Reason.MISSING_TRUSTED_HEAD),
        ("not json", Reason.MALFORMED_PROOF),
        ("dropped first", Reason.NON_CONTIGUOUS_SEQ),
        ("other key", Reason.UNKNOWN_KEY),
    ],
)
def test_an_uploaded_proof_is_refused_with_its_step_and_code(
    admin: Client, chain: Any, case: str, reason: Reason
) -> None:
    verification, receipts = chain
    proof = proof_for(verification)
    assert proof is not None
    head = receipts[-1].content_hash
    if case == "old head":
        head = receipts[1].content_hash
    elif case == "no head":
        head = ""
    elif case == "dropped first":
        proof["entries"] = proof["entries"][1:]
    elif case == "other key":
        key = PrivateKey.generate()
        entry = sign_entry(
            private_key=key, verification_id=str(verification.pk), seq=0, rubric_hash=verification.rubric_hash,
            submission_hash=verification.submission_hash, prev_hash=None, payload={"verdict": "PASS"},
            created_at=receipts[0].created_at,
        )
        proof["entries"] = [entry.as_json()]
        proof["proof_head_hash"] = head = entry.content_hash
    body = b'{"entries": [' if case == "not json" else json.dumps(proof).encode()
    page = _upload(admin, body, head=head, verification=verification)
    assert f"<code data-failed-code>{reason.value}</code>" in page
    assert _words(reason) in page


def test_the_upload_form_needs_a_proof(admin: Client, chain: Any) -> None:
    verification, _ = chain
    response = admin.post(
        reverse("adminportal:verify-proof"),
        {"verification_id": str(verification.pk), "submission_hash": verification.submission_hash},
    )
    assert "Upload a proof file or paste the proof." in response.content.decode()


def test_the_audit_page_runs_the_audit(admin: Client, chain: Any, checkpoint_log: Any) -> None:
    response = admin.post(reverse("adminportal:audit-run"))
    assert response.status_code == 302
    page = admin.get(reverse("adminportal:audit")).content.decode()
    assert 'data-ok="true"' in page and "acretix-verify/checkpoint/1" in page
    assert 'data-last-audit="ok"' in admin.get(reverse("adminportal:home")).content.decode()

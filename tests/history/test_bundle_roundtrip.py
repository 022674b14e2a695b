"""One bundle format (issue 14): what History downloads is what ``/admin/verify-proof``, ``manage.py verify_proof
--bundle`` and the stand-alone ``scripts/verify_proof.py`` accept. The same downloaded bytes go through all three."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.history.conftest import client_for
from tests.history.test_exports import attacker_bundle, bundle, verify  # noqa: F401 - the bundle fixture, by name
from tests.verification.test_verify_proof_script import run_verify_proof
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason

pytestmark = pytest.mark.django_db


def _web(admin: Any, b: dict[str, Any], data: bytes, *, head: str | None = None) -> str:
    response = client_for(admin).post(
        reverse("adminportal:verify-proof"),
        {
            "proof_file": SimpleUploadedFile("proof-bundle.json", data),
            "trusted_head": b["head"] if head is None else head,
            "verification_id": str(b["verification"].pk),
            "submission_hash": b["verification"].submission_hash,
        },
    )
    assert response.status_code == 200
    return response.content.decode()


def test_a_downloaded_bundle_verifies_on_the_web_with_the_cli_and_with_the_stand_alone_script(
    bundle: dict[str, Any], admin_user: Any  # noqa: F811 - the fixture imported above, by name
) -> None:
    downloaded = bundle["path"].read_bytes()
    # 1. the admin page, against the keys pinned here
    page = _web(admin_user, bundle, downloaded)
    assert 'data-report-ok="true"' in page and "data-from-bundle" in page
    assert Reason.MALFORMED_PROOF.value not in page
    # 2. manage.py verify_proof --bundle, with the pinned fingerprint
    assert verify(bundle, "--pin", bundle["fingerprint"]) == (0, "ok")
    # 3. the stand-alone scripts/verify_proof.py
    args = [bundle["fingerprint"], str(bundle["path"]), str(bundle["path"]), bundle["head"],
            str(bundle["verification"].pk), bundle["verification"].submission_hash]
    done = run_verify_proof(args, cwd=bundle["tmp"])
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr


def test_the_web_refuses_a_bundle_with_the_wrong_head_or_a_forged_key_as_the_cli_does(
    bundle: dict[str, Any], admin_user: Any  # noqa: F811 - the fixture imported above, by name
) -> None:
    downloaded = bundle["path"].read_bytes()
    stale = _web(admin_user, bundle, downloaded, head="0" * 64)
    assert 'data-report-ok="false"' in stale and Reason.TERMINAL_HEAD_MISMATCH.value in stale
    assert verify(bundle, "--pin", bundle["fingerprint"], head="0" * 64) == (1, Reason.TERMINAL_HEAD_MISMATCH.value)
    forged, forged_head = attacker_bundle(bundle, PrivateKey.from_seed(bytes([9]) * 32))
    page = _web(admin_user, bundle, forged.read_bytes(), head=forged_head)
    # the bundle's own (attacker's) key set is ignored: the pinned keys decide
    assert 'data-report-ok="false"' in page and Reason.UNKNOWN_KEY.value in page
    assert verify(bundle, "--pin", bundle["fingerprint"], path=forged, head=forged_head) == (
        1, Reason.UNKNOWN_KEY.value
    )

"""Claims inside imported results (SPEC §5, issue 13 item 4 of the rest): an external verifier's own assertions about
evidence, in a submission's ``results[].claims`` or in a delivered result, are classified by the kernel like a
submission's claims, returned in the result and signed in the receipt; a contradicted one flags for review and
decides nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import NOTES, NOTES_DIGEST, OTHER, Api, Cast, assert_error, b64, contracted_task
from verification.kernel.digests import sha256_digest
from verification.runs.models import ArrivedResult, Verification
from verification.trust.models import Receipt
from verification.trust.selectors import head_of, receipt_payload

pytestmark = pytest.mark.django_db

RUBRIC = {
    "name": "external scan",
    "criteria": [{"id": "scan", "kind": "imported", "deadline_seconds": 3600, "on_expiry": "UNKNOWN"}],
}
OTHER_DIGEST = sha256_digest(OTHER)


def _ran(response: Any) -> str:
    """The verification's id once its run has happened (on commit is not reached inside a test's transaction)."""
    assert response.status_code in (200, 202), response.content
    if response.json()["status"] == "queued":
        from verification.runs.services.run import verification_run

        verification_run(verification_id=response.json()["id"])
    return str(response.json()["id"])


def _claim(observable: str, expression: str, symbol: str = "notes") -> dict[str, str]:
    return {"symbol": symbol, "observable": observable, "expression": expression}


def _answers(view: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["verdict"], c["reason"]) for c in view["claims"]]


def _signed(view: dict[str, Any]) -> list[tuple[str, str]]:
    payload = receipt_payload(head_of(Verification.objects.get(pk=view["id"])))
    return [(c["verdict"], c["reason"]) for c in payload["claims"]]


def test_claims_in_a_submitted_imported_result_answer_and_are_signed(signing_key: Any, api: Api, cast: Cast) -> None:
    task_id = contracted_task(api, cast, RUBRIC, claim=False)
    body = {
        "task": task_id,
        "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}],
        "results": [
            {
                "criterion": "scan",
                "verdict": "FAIL",
                "claims": [
                    _claim("evidence.content-digest", f'(= notes "{NOTES_DIGEST}")'),
                    _claim("evidence.present", "(present notes)"),
                    _claim("evidence.size", "(< notes 10)"),
                ],
            }
        ],
        "wait_ms": 200,
    }
    vid = _ran(api.post("/v1/verifications", body, caller=cast.external))
    view = api.get(f"/v1/verifications/{vid}", caller=cast.external).json()
    expected = [
        ("PASS", "digest-match"), ("UNKNOWN", "evidence-present-declined"), ("UNKNOWN", "unsupported-observable")
    ]
    assert _answers(view) == expected
    assert _signed(view) == expected


def test_claims_in_a_delivered_result_answer_flag_and_decide_nothing(signing_key: Any, api: Api, cast: Cast) -> None:
    task_id = contracted_task(api, cast, RUBRIC)
    vid = _ran(api.post(
        "/v1/verifications",
        {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 200},
        caller=cast.agent,
    ))
    without = api.post(f"/v1/verifications/{vid}/results", {"criterion": "scan", "verdict": "NOT_RUN"},
                       caller=cast.external)  # no claims: the same outcome, unflagged by a claim
    assert without.status_code == 200, without.content
    assert without.json()["claims"] == []

    other = contracted_task(api, cast, RUBRIC)
    again = _ran(api.post(
        "/v1/verifications",
        {"task": other, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 200},
        caller=cast.agent,
    ))
    delivered = api.post(
        f"/v1/verifications/{again}/results",
        {"criterion": "scan", "verdict": "NOT_RUN",
         "claims": [_claim("evidence.content-digest", f'(= notes "{OTHER_DIGEST}")')]},
        caller=cast.external,
    )
    assert delivered.status_code == 200, delivered.content
    view = delivered.json()
    assert _answers(view) == [("FAIL", "claim-contradicted")] == _signed(view)
    assert view["head_receipt_kind"] == "result"
    # The claim flags for a person and leaves the verdict and determination to the contract.
    assert (view["kernel_verdict"], view["determination"]) == (
        without.json()["kernel_verdict"], without.json()["determination"])
    assert view["flagged"] is True


def test_a_judgment_cannot_carry_claims_and_nothing_is_written(signing_key: Any, api: Api, cast: Cast) -> None:
    task_id = contracted_task(api, cast, RUBRIC)
    vid = _ran(api.post("/v1/verifications", {"task": task_id, "wait_ms": 200}, caller=cast.agent))
    before = (ArrivedResult.objects.count(), Receipt.objects.count())
    refused = api.post(
        f"/v1/verifications/{vid}/results",
        {"criterion": "scan", "outcome": "abstain", "claims": [_claim("evidence.present", "(present notes)")]},
        caller=cast.semantic,
    )
    assert_error(refused, 400, "invalid-request")
    malformed = api.post(
        f"/v1/verifications/{vid}/results",
        {"criterion": "scan", "verdict": "FAIL", "claims": [{"symbol": "notes", "observable": "x"}]},
        caller=cast.external,
    )
    assert_error(malformed, 400, "invalid-request")
    assert (ArrivedResult.objects.count(), Receipt.objects.count()) == before

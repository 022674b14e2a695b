"""Claims inside a submission (SPEC §5, issue 13 item 7): they bind, answer with a code, and never decide.

A decidable content-digest claim answers PASS/FAIL against the bound bytes; ``evidence.present`` answers UNKNOWN
``evidence-present-declined``; any other observable ``unsupported-observable``; any other shape
``malformed-expression``. The answers come back in the result and are signed in the receipt beside the criteria. A
contradicted claim flags the verification (``claim-contradicted``) and leaves the determination to the contract.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.api.conftest import NOTES, NOTES_DIGEST, OTHER, Api, Cast, assert_error, b64, contracted_task
from verification.kernel.claims import BoundBytes, evaluate_claim
from verification.kernel.digests import sha256_digest
from verification.runs.models import Verification
from verification.trust.selectors import head_of, receipt_payload

pytestmark = pytest.mark.django_db

OTHER_DIGEST = sha256_digest(OTHER)


def _claim(observable: str, expression: str, symbol: str = "notes") -> dict[str, str]:
    return {"symbol": symbol, "observable": observable, "expression": expression}


def _submit(api: Api, cast: Cast, content: bytes, claims: list[dict[str, str]]) -> dict[str, Any]:
    task_id = contracted_task(api, cast)
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(content)}], "claims": claims,
            "wait_ms": 200}
    response = api.post("/v1/verifications", body, caller=cast.agent)
    assert response.status_code in (200, 202), response.content
    vid = response.json()["id"]
    if response.json()["status"] == "queued":
        from verification.runs.services.run import verification_run

        verification_run(verification_id=vid)
    read = api.get(f"/v1/verifications/{vid}", caller=cast.agent)
    assert read.status_code == 200, read.content
    return dict(read.json())


def test_each_kind_of_claim_answers_with_its_code(signing_key: Any, api: Api, cast: Cast) -> None:
    claims = [
        _claim("evidence.content-digest", f'(= notes "{NOTES_DIGEST}")'),
        _claim("evidence.present", "(present notes)"),
        _claim("evidence.size", "(< notes 10)"),
        _claim("evidence.content-digest", "(== notes sha256)"),
        _claim("evidence.content-digest", f'(= other "{NOTES_DIGEST}")', symbol="other"),
    ]
    view = _submit(api, cast, NOTES, claims)
    answered = [(c["verdict"], c["reason"]) for c in view["claims"]]
    assert answered == [
        ("PASS", "digest-match"),
        ("UNKNOWN", "evidence-present-declined"),
        ("UNKNOWN", "unsupported-observable"),
        ("UNKNOWN", "malformed-expression"),
        ("UNKNOWN", "evidence-not-bound"),
    ]
    # No claim decides: the contract's criterion met, nothing contradicted, nothing flagged.
    assert (view["status"], view["determination"], view["flagged"]) == ("succeeded", "met", False)
    # Signed beside the criteria in the receipt.
    payload = receipt_payload(head_of(Verification.objects.get(pk=view["id"])))
    assert [(c["verdict"], c["reason"]) for c in payload["claims"]] == answered
    assert [c["criterion"] for c in payload["criteria"]] == ["notes-digest"]


def test_a_contradicted_claim_flags_for_review_and_leaves_the_determination(
    signing_key: Any, api: Api, cast: Cast
) -> None:
    view = _submit(api, cast, NOTES, [_claim("evidence.content-digest", f'(= notes "{OTHER_DIGEST}")')])
    (claim,) = view["claims"]
    assert (claim["verdict"], claim["reason"]) == ("FAIL", "claim-contradicted")
    assert (view["status"], view["determination"], view["kernel_verdict"]) == ("succeeded", "met", "PASS")
    assert view["flagged"] is True and view["flag_reason"] == "needs_review: claim-contradicted"
    from django.utils import timezone

    from verification.reviews.selectors import review_queue

    assert Verification.objects.get(pk=view["id"]) in review_queue(now=timezone.now())


def test_a_claim_never_raises_the_determination(signing_key: Any, api: Api, cast: Cast) -> None:
    view = _submit(api, cast, OTHER, [_claim("evidence.content-digest", f'(= notes "{OTHER_DIGEST}")')])
    assert view["claims"][0]["verdict"] == "PASS"
    assert view["determination"] == "not_met" and view["kernel_verdict"] == "FAIL"


@pytest.mark.parametrize(
    ("claims", "code"),
    [
        ("not a list", "invalid-request"),
        ([{"symbol": "notes", "observable": "evidence.present"}], "invalid-request"),
        ([{"symbol": "notes", "observable": "x", "expression": 7}], "invalid-request"),
        ([{"symbol": "notes", "observable": "x", "expression": "y", "verdict": "PASS"}], "unknown-field"),
    ],
)
def test_a_claims_list_of_the_wrong_shape_is_refused(
    signing_key: Any, api: Api, cast: Cast, claims: Any, code: str
) -> None:
    task_id = contracted_task(api, cast)
    response = api.post("/v1/verifications", {"task": task_id, "claims": claims}, caller=cast.agent)
    assert_error(response, 400, code)
    assert not Verification.objects.exists()


@given(claim=st.dictionaries(st.sampled_from(["symbol", "observable", "expression", "x"]),
                             st.one_of(st.text(max_size=80), st.integers(), st.none(), st.binary(max_size=8))))
def test_evaluating_a_claim_never_crashes(claim: dict[str, Any]) -> None:
    answered = evaluate_claim(claim, {"notes": BoundBytes("e1", NOTES)})
    assert answered.verdict.value in ("PASS", "FAIL", "UNKNOWN")
    if answered.verdict.value != "UNKNOWN":
        assert claim.get("observable") == "evidence.content-digest"

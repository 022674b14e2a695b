"""The fuzz test of issue 13's acceptance: rubrics and submissions generated from the OpenAPI schema (the same
constraints the serializers apply: schemathesis builds them from ``/api/schema/``), valid and invalid alike.

- every accepted rubric, accepted as a contract, and every accepted submission leads to a run that ends
  ``succeeded`` (read past every deadline: a PENDING that expires resolves) with no operational error;
- every refused one gets a 4xx whose code is in the registry (``kernel/reasons.py``), never a 5xx.

Bounded: ``EXAMPLES`` examples per mode and endpoint, derandomized.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from tests.api.conftest import NOTES, Api, Cast, b64, contracted_task, digest_rubric
from tests.api.test_schemathesis import schema
from verification.kernel import limits
from verification.kernel.reasons import Reason

pytestmark = pytest.mark.django_db

EXAMPLES = 15
REGISTERED = frozenset(reason.value for reason in Reason)
RUBRICS = schema["/v1/rubrics"]["POST"]
SUBMISSIONS = schema["/v1/verifications"]["POST"]
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


def assert_refused_with_a_registered_code(response: Any) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    code = response.json()["error"]["code"]
    assert code in REGISTERED, code


def assert_run_ends_succeeded(verification_id: str) -> None:
    """The run happened (no operational failure) and, read after every deadline has passed, it has succeeded."""
    from verification.api.presenters import verification_view
    from verification.runs.models import Verification
    from verification.runs.services.run import verification_run

    verification = Verification.objects.get(pk=verification_id)
    if verification.failed_at is None and not verification.receipts.exists():
        verification_run(verification_id=verification_id)  # on commit is not reached inside a test's transaction
        verification.refresh_from_db()
    assert verification.failed_at is None and not verification.last_error, verification.last_error
    later = verification.submitted_at + timedelta(seconds=limits.DURATION_MAX_SECONDS + 1)
    view = verification_view(verification, now=later)
    assert view["status"] == "succeeded", view


def _post(api: Api, path: str, body: Any, caller: Any, **headers: str) -> Any:
    """A generated body as JSON, or as the raw bytes a negative case may be."""
    if isinstance(body, bytes | bytearray):
        return api.post(path, raw=bytes(body), caller=caller, **headers)
    return api.post(path, body, caller=caller, **headers)


def _submit_to(api: Api, cast: Cast, task_id: str, body: dict[str, Any]) -> Any:
    return api.post("/v1/verifications", {**body, "task": task_id}, caller=cast.agent)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_rubric_is_refused_with_a_code_or_runs_to_the_end(
    signing_key: Any, api: Api, cast: Cast, mode: GenerationMode
) -> None:
    accepted: list[str] = []

    @given(case=RUBRICS.as_strategy(generation_mode=mode))
    @FUZZ
    def run(case: Any) -> None:
        registered = _post(api, "/v1/rubrics", case.body, cast.owner)
        if registered.status_code >= 300:
            assert_refused_with_a_registered_code(registered)
            return
        task_id = api.post("/v1/tasks", {"title": "fuzzed"}, caller=cast.owner).json()["id"]
        contract = api.post(f"/v1/tasks/{task_id}/contract", {"rubric_hash": registered.json()["rubric_hash"]},
                            caller=cast.owner)
        assert contract.status_code == 201, contract.content
        submitted = _submit_to(api, cast, task_id, {"evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}]})
        assert submitted.status_code in (200, 202), submitted.content
        assert_run_ends_succeeded(submitted.json()["id"])
        accepted.append(task_id)

    run()
    if mode is GenerationMode.POSITIVE:
        assert accepted, "no generated rubric was accepted: the schema is looser than the registrar"


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_submission_is_refused_with_a_code_or_runs_to_the_end(
    signing_key: Any, api: Api, cast: Cast, mode: GenerationMode
) -> None:
    rubric = digest_rubric()
    rubric["criteria"].append({"id": "scan", "kind": "imported", "deadline_seconds": 60, "on_expiry": "FAIL"})
    task_id = contracted_task(api, cast, rubric)
    evidence_id = api.post("/v1/evidence", {"content_base64": b64(NOTES)}, caller=cast.agent).json()["id"]
    accepted: list[str] = []

    @given(case=SUBMISSIONS.as_strategy(generation_mode=mode))
    @FUZZ
    def run(case: Any) -> None:
        body = case.body
        if isinstance(body, dict):
            body = {**body, "task": task_id} if isinstance(body.get("task"), str) else body
            for binding in body.get("evidence") or () if isinstance(body.get("evidence"), list) else ():
                if isinstance(binding, dict) and isinstance(binding.get("evidence_id"), str):
                    binding["evidence_id"] = evidence_id
        submitted = _post(api, "/v1/verifications", body, cast.agent, HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
        if submitted.status_code >= 300:
            assert_refused_with_a_registered_code(submitted)
            return
        assert_run_ends_succeeded(submitted.json()["id"])
        accepted.append(submitted.json()["id"])

    run()
    if mode is GenerationMode.POSITIVE:
        assert accepted, "no generated submission was accepted: the schema is looser than the API"

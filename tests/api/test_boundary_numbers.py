"""Numbers at the boundary (SPEC §3, issue 13 item 2): every number a client sends is checked on arrival.

Each reproduced value is refused with 400 ``invalid-request`` naming the field, and nothing is written; the largest
accepted values still give a run that ends ``succeeded``. The ranges come from ``verification.kernel.limits``, which
the serializers, the kernel's rubric parser and the services share, and the OpenAPI schema publishes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import NOTES, NOTES_DIGEST, Api, Cast, assert_error, b64, contracted_task, digest_rubric
from verification.errors import ServiceError
from verification.evidence.models import Evidence
from verification.kernel import limits
from verification.kernel.criteria import register_rubric
from verification.kernel.errors import RubricError
from verification.runs.models import Rubric, Verification

pytestmark = pytest.mark.django_db

HUGE = 9007199254740991
FAR_DATES = ("9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00")


def _fields(error: dict[str, Any]) -> set[str]:
    return set(error["details"].get("fields", {}))


def _rubric_with(**extra: Any) -> dict[str, Any]:
    rubric = digest_rubric()
    rubric["criteria"].append({"id": "scan", "kind": "imported", **extra})
    return rubric


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"deadline_seconds": HUGE}, "criteria[1].deadline_seconds"),
        ({"deadline_seconds": 10**12}, "criteria[1].deadline_seconds"),
        ({"deadline_seconds": 1e12}, "criteria[1].deadline_seconds"),
        ({"policy": {"max_age_seconds": HUGE}}, "criteria[1].policy.max_age_seconds"),
        ({"weight": 1e308}, "criteria[1].weight"),
        ({"weight": HUGE}, "criteria[1].weight"),
    ],
)
def test_a_rubric_number_out_of_range_is_refused_naming_the_field(
    api: Api, cast: Cast, extra: dict[str, Any], field: str
) -> None:
    refused = api.post("/v1/rubrics", _rubric_with(**extra), caller=cast.owner)
    error = assert_error(refused, 400, "invalid-request")
    assert field in _fields(error), error
    assert not Rubric.objects.exists()


def test_two_weights_of_1e308_are_refused(api: Api, cast: Cast) -> None:
    rubric = digest_rubric()
    rubric["criteria"][0]["weight"] = 1e308
    rubric["criteria"].append({"id": "scan", "kind": "imported", "weight": 1e308})
    error = assert_error(api.post("/v1/rubrics", rubric, caller=cast.owner), 400, "invalid-request")
    assert {"criteria[0].weight", "criteria[1].weight"} <= _fields(error), error
    assert not Rubric.objects.exists()


@pytest.mark.parametrize(
    "entry",
    [
        {"deadline_seconds": HUGE},
        {"deadline_seconds": limits.DURATION_MAX_SECONDS + 1},
        {"policy": {"max_age_seconds": HUGE}},
        {"weight": 1e308},
        {"weight": float("inf")},
        {"weight": limits.WEIGHT_MAX * 2},
    ],
)
def test_the_kernels_rubric_parser_refuses_the_same_ranges(entry: dict[str, Any]) -> None:
    with pytest.raises(RubricError) as exc:
        register_rubric({"name": "r", "criteria": [{"id": "scan", "kind": "imported", **entry}]})
    assert exc.value.reason.value == "malformed-rubric"


@pytest.mark.parametrize("body_field", ["max_age_seconds", "collected_at", "expires_at"])
@pytest.mark.parametrize("door", ["evidence", "inline"])
def test_evidence_numbers_and_dates_out_of_range_are_refused(
    signing_key: Any, api: Api, cast: Cast, body_field: str, door: str
) -> None:
    values = [HUGE] if body_field == "max_age_seconds" else list(FAR_DATES)
    task_id = contracted_task(api, cast)
    for value in values:
        item = {"content_base64": b64(NOTES), body_field: value}
        if door == "evidence":
            response = api.post("/v1/evidence", item, caller=cast.agent)
        else:
            body = {"task": task_id, "evidence": [{"symbol": "notes", **item}]}
            response = api.post("/v1/verifications", body, caller=cast.agent)
        error = assert_error(response, 400, "invalid-request")
        assert any(name.endswith(body_field) for name in _fields(error)), error
    assert not Evidence.objects.exists() and not Verification.objects.exists()


def test_the_services_refuse_what_the_api_refuses(cast: Cast) -> None:
    from datetime import datetime

    from verification.evidence.services import evidence_admit

    for kwargs in ({"max_age_seconds": HUGE}, {"collected_at": datetime.fromisoformat(FAR_DATES[0])},
                   {"expires_at": datetime.fromisoformat(FAR_DATES[1])}):
        with pytest.raises(ServiceError) as exc:
            evidence_admit(actor=cast.agent.actor, token=cast.agent.token, content=NOTES, **kwargs)
        assert exc.value.reason.value == "invalid-request" and exc.value.details["fields"], kwargs
    assert not Evidence.objects.exists()


def test_the_largest_accepted_numbers_give_a_run_that_succeeds(signing_key: Any, api: Api, cast: Cast) -> None:
    rubric = digest_rubric()
    rubric["criteria"][0].update(weight=limits.WEIGHT_MAX, policy={"max_age_seconds": limits.DURATION_MAX_SECONDS})
    rubric["criteria"].append({"id": "scan", "kind": "imported", "weight": limits.WEIGHT_MAX,
                               "deadline_seconds": limits.DURATION_MAX_SECONDS, "on_expiry": "FAIL"})
    task_id = contracted_task(api, cast, rubric)
    evidence = {"symbol": "notes", "content_base64": b64(NOTES), "collected_at": "2026-01-01T00:00:00Z",
                "max_age_seconds": limits.DURATION_MAX_SECONDS, "expires_at": "9999-12-31T23:59:59Z"}
    submitted = api.post("/v1/verifications", {"task": task_id, "evidence": [evidence], "wait_ms": 200},
                         caller=cast.agent)
    assert submitted.status_code in (200, 202), submitted.content
    vid = submitted.json()["id"]
    from verification.runs.services.run import verification_run

    if submitted.json()["status"] == "queued":
        verification_run(verification_id=vid)
    read = api.get(f"/v1/verifications/{vid}", caller=cast.agent).json()
    assert read["status"] == "running" and read["last_error"] is None, read  # PENDING until its 100-year deadline
    notes = next(r for r in read["verdict"]["results"] if r["criterion"] == "notes-digest")
    assert notes["verdict"] == "PASS", notes
    assert NOTES_DIGEST in json.dumps(rubric)


def test_the_schema_publishes_the_ranges(api: Api) -> None:
    response = api.client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schemas = json.loads(response.content)["components"]["schemas"]
    criterion = schemas["PendingCriterionRequest"]["properties"]  # a criterion is one of four shapes (issue 13)
    assert (criterion["deadline_seconds"]["minimum"], criterion["deadline_seconds"]["maximum"]) == (
        1, limits.DURATION_MAX_SECONDS)
    assert criterion["weight"]["maximum"] == limits.WEIGHT_MAX
    policy = schemas["EvidencePolicyRequest"]["properties"]
    assert policy["max_age_seconds"]["maximum"] == limits.DURATION_MAX_SECONDS
    binding = schemas["BoundInlineRequest"]["properties"]  # a binding is by id or inline (issue 13)
    assert binding["max_age_seconds"]["maximum"] == limits.DURATION_MAX_SECONDS

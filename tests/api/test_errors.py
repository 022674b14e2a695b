"""Every error answers ``{"error": {"code", "message", "details"}}`` with a precise code and status (issue 4 §3).

Malformed JSON, unknown fields, oversize bodies, bad base64, wrong scope and unknown ids each get a 4xx with their
own code; a true bug answers a 500 of the same shape (and is logged), never an HTML page.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import NOTES, Api, Cast, assert_error, b64, contracted_task, digest_rubric

pytestmark = pytest.mark.django_db

UNKNOWN_UUID = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def task_id(signing_key: Any, api: Api, cast: Cast) -> str:
    return contracted_task(api, cast)


# --- malformed bodies -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"title": ', "invalid-json"),
        (b"", "invalid-request"),  # an empty body is an empty object: the title is missing
        (b'{"title": "a", "title": "b"}', "duplicate-key"),
        (b'{"title": NaN}', "non-finite-number"),
        (b'{"title": "\\ud800"}', "lone-surrogate"),
        (b'{"title": "a", "n": 9007199254740993}', "integer-out-of-range"),
        (b"\xef\xbb\xbf{}", "invalid-json"),
        (b"\xff\xfe", "invalid-json"),
        (b"[1, 2]", "invalid-request"),
        (b'"a string"', "invalid-request"),
    ],
)
def test_malformed_json_is_refused_with_the_strict_parsers_code(api: Api, cast: Cast, raw: bytes, code: str) -> None:
    assert_error(api.post("/v1/tasks", raw=raw, caller=cast.owner), 400, code)


def test_unknown_fields_are_refused_at_every_depth(api: Api, cast: Cast, task_id: str) -> None:
    error = assert_error(api.post("/v1/tasks", {"title": "t", "owner": "me"}, caller=cast.owner), 400, "unknown-field")
    assert error["details"]["fields"] == {"owner": ["unknown field"]}
    nested = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES), "trust_tier": "T0"}]}
    error = assert_error(api.post("/v1/verifications", nested, caller=cast.agent), 400, "unknown-field")
    assert "evidence[0].trust_tier" in error["details"]["fields"]


@pytest.mark.parametrize(
    "field",
    ["actor", "authority", "cycle", "contract", "rubric", "rubric_hash", "submitted_by", "boundary"],
)
def test_a_body_cannot_name_who_or_against_what(api: Api, cast: Cast, task_id: str, field: str) -> None:
    """SPEC §1: the actor, the authority, the cycle and the contract are the server's."""
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], field: "x"}
    assert_error(api.post("/v1/verifications", body, caller=cast.agent), 400, "unknown-field")


def test_wrong_types_are_invalid_requests_not_coerced(api: Api, cast: Cast, task_id: str) -> None:
    error = assert_error(api.post("/v1/tasks", {"title": 5}, caller=cast.owner), 400, "invalid-request")
    assert "title" in error["details"]["fields"]
    for wait in ("100", 30001, -1, True, 1.5):
        body = {"task": task_id, "wait_ms": wait}
        assert_error(api.post("/v1/verifications", body, caller=cast.agent), 400, "invalid-request")
    both = {"task": task_id, "evidence": [{"symbol": "notes", "evidence_id": UNKNOWN_UUID, "content_base64": ""}]}
    assert_error(api.post("/v1/verifications", both, caller=cast.agent), 400, "invalid-request")
    naive = {"content_base64": b64(NOTES), "collected_at": "2026-01-01T00:00:00"}
    assert_error(api.post("/v1/evidence", naive, caller=cast.collector), 400, "invalid-request")


@pytest.mark.parametrize("value", ["not base64!", "QUJD=", "QUJ", "QU JD", "QR==", "QUJDRA==\n", "QUJD\u00e9"])
def test_bad_base64_is_refused(api: Api, cast: Cast, task_id: str, value: str) -> None:
    assert_error(api.post("/v1/evidence", {"content_base64": value}, caller=cast.collector), 400, "bad-base64")
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": value}]}
    assert_error(api.post("/v1/verifications", body, caller=cast.agent), 400, "bad-base64")


def test_a_bad_source_signature_encoding_is_bad_base64(api: Api, cast: Cast) -> None:
    body = {"content_base64": b64(NOTES), "source_signature_base64": "%%%", "source_key_id": "ed25519-0000000000000000"}
    assert_error(api.post("/v1/evidence", body, caller=cast.collector), 400, "bad-base64")


def test_a_source_signature_under_no_pinned_key_is_refused(api: Api, cast: Cast) -> None:
    body = {"content_base64": b64(NOTES), "source_signature_base64": b64(b"\0" * 64),
            "source_key_id": "ed25519-0000000000000000"}
    assert_error(api.post("/v1/evidence", body, caller=cast.collector), 422, "source-signature-invalid")


# --- sizes ---------------------------------------------------------------------------------------------------------


def test_an_oversize_body_is_refused_before_it_is_read(api: Api, cast: Cast, settings: Any) -> None:
    settings.REVIEWPORTAL_API_MAX_BODY_BYTES = 1000
    error = assert_error(
        api.post("/v1/tasks", {"title": "x" * 2000}, caller=cast.owner), 413, "payload-too-large"
    )
    assert error["details"]["limit_bytes"] == 1000


def test_an_inline_item_over_the_documented_size_is_refused(api: Api, cast: Cast, task_id: str, settings: Any) -> None:
    limit = settings.REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES
    assert limit == 1024 * 1024  # the documented limit (README: API)
    too_big = b64(b"x" * (limit + 1))
    assert_error(api.post("/v1/evidence", {"content_base64": too_big}, caller=cast.collector), 413,
                 "payload-too-large")
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": too_big}]}
    assert_error(api.post("/v1/verifications", body, caller=cast.agent), 413, "payload-too-large")
    exactly = api.post("/v1/evidence", {"content_base64": b64(b"x" * limit)}, caller=cast.collector)
    assert exactly.status_code == 201 and exactly.json()["size"] == limit


# --- transport --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]
)
def test_a_body_that_is_not_json_is_unsupported(api: Api, cast: Cast, content_type: str) -> None:
    response = api.post("/v1/tasks", raw=b'{"title": "t"}', content_type=content_type, caller=cast.owner)
    assert_error(response, 415, "unsupported-media-type")


def test_json_with_a_charset_is_fine(api: Api, cast: Cast) -> None:
    response = api.post("/v1/tasks", raw=b'{"title": "t"}', content_type="application/json; charset=utf-8",
                        caller=cast.owner)
    assert response.status_code == 201


def test_the_api_answers_json_whatever_the_accept_header(api: Api, cast: Cast) -> None:
    response = api.post("/v1/tasks", {"title": "t"}, caller=cast.owner, HTTP_ACCEPT="text/html")
    assert response.status_code == 201 and response["Content-Type"] == "application/json"


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/tasks"), ("PUT", "/v1/rubrics"), ("DELETE", "/v1/events"),
                                              ("PATCH", "/v1/verifications"), ("POST", "/v1/events")])
def test_other_methods_are_not_allowed(api: Api, cast: Cast, method: str, path: str) -> None:
    assert_error(api.call(method, path, caller=cast.owner), 405, "method-not-allowed")


def test_answers_are_never_cached(api: Api, cast: Cast) -> None:
    assert api.post("/v1/tasks", {"title": "t"}, caller=cast.owner)["Cache-Control"] == "private, no-store"
    assert api.get("/v1/events", caller=cast.owner)["Cache-Control"] == "private, no-store"
    assert api.post("/v1/tasks", {}, caller=cast.owner)["Cache-Control"] == "private, no-store"


# --- unknown ids ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ident", [UNKNOWN_UUID, "not-a-uuid", "%00"])
def test_unknown_ids_are_not_found(api: Api, cast: Cast, ident: str) -> None:
    assert_error(api.post(f"/v1/tasks/{ident}/claims", {}, caller=cast.agent), 404, "not-found")
    assert_error(api.post(f"/v1/tasks/{ident}/contract", {"rubric_hash": "a" * 64}, caller=cast.owner), 404,
                 "not-found")
    assert_error(api.post(f"/v1/tasks/{ident}/reopen", {}, caller=cast.owner), 404, "not-found")
    assert_error(api.get(f"/v1/verifications/{ident}", caller=cast.agent), 404, "not-found")
    assert_error(api.post(f"/v1/verifications/{ident}/results", {"criterion": "c", "verdict": "FAIL"},
                          caller=cast.external), 404, "not-found")
    assert_error(api.post(f"/v1/verifications/{ident}/evidence",
                          {"evidence": [{"symbol": "notes", "evidence_id": UNKNOWN_UUID}]}, caller=cast.agent),
                 404, "not-found")
    assert_error(api.post("/v1/verifications", {"task": ident}, caller=cast.agent), 404, "not-found")
    assert_error(api.post("/v1/links", {"task": ident, "commit_id": "c", "committing_actor": "a"},
                          caller=cast.collector), 404, "not-found")


def test_unknown_referenced_records_are_not_found(api: Api, cast: Cast, task_id: str) -> None:
    manifest = {"task": task_id, "evidence_id": UNKNOWN_UUID}
    assert_error(api.post("/v1/manifests", manifest, caller=cast.collector), 404, "not-found")
    body = {"task": task_id, "evidence": [{"symbol": "notes", "evidence_id": UNKNOWN_UUID}]}
    assert_error(api.post("/v1/verifications", body, caller=cast.agent), 404, "not-found")
    contract = {"rubric_hash": "a" * 64}
    assert_error(api.post(f"/v1/tasks/{task_id}/contract", contract, caller=cast.owner), 404, "not-found")


def test_unknown_paths_under_v1_are_json_404s(api: Api, cast: Cast) -> None:
    for path in ("/v1/nothing", "/v1/", "/v1/tasks/x/y/z", "/v1/verifications/x/proof/y"):
        error = assert_error(api.get(path, caller=cast.agent), 404, "not-found")
        assert error["details"]["path"] == path


# --- refusals by the rules --------------------------------------------------------------------------------------------


def test_an_obligation_that_cannot_fail_is_refused_with_its_sub_reason(api: Api, cast: Cast) -> None:
    present = {"name": "r", "criteria": [{"id": "c", "kind": "digest", "observable": "evidence.present",
                                          "expression": '(= notes "sha256:' + "0" * 64 + '")'}]}
    error = assert_error(api.post("/v1/rubrics", present, caller=cast.owner), 422, "obligation-not-falsifiable")
    assert error["details"] == {"sub_reason": "evidence-present-declined", "criterion": "c"}
    semantic = {"name": "r", "criteria": [{"id": "c", "kind": "semantic", "expression": "(= a \"x\")"}]}
    error = assert_error(api.post("/v1/rubrics", semantic, caller=cast.owner), 422, "obligation-not-falsifiable")
    assert error["details"]["sub_reason"] == "malformed-expression"
    never = {"name": "r", "criteria": [{"id": "c", "kind": "imported", "deadline_seconds": 5, "on_expiry": "PASS"}]}
    assert_error(api.post("/v1/rubrics", never, caller=cast.owner), 422, "expiry-verdict-cannot-pass")
    assert_error(api.post("/v1/rubrics", {"name": "r", "criteria": []}, caller=cast.owner), 400, "invalid-request")


def test_a_rubric_registers_once_and_returns_its_witness(api: Api, cast: Cast) -> None:
    first = api.post("/v1/rubrics", digest_rubric(), caller=cast.owner)
    assert first.status_code == 201
    body = first.json()
    assert body["created"] is True and body["criteria"] == 1
    [witness] = body["witnesses"]
    assert witness["criterion_id"] == "notes-digest" and witness["outcome"] == "FAIL"
    again = api.post("/v1/rubrics", digest_rubric(), caller=cast.owner)
    assert again.status_code == 200 and again.json() == {**body, "created": False}


def test_the_claiming_agent_cannot_accept_the_contract(api: Api, cast: Cast, signing_key: Any) -> None:
    rubric_hash = api.post("/v1/rubrics", digest_rubric(), caller=cast.owner).json()["rubric_hash"]
    task_id = api.post("/v1/tasks", {"title": "t"}, caller=cast.agent).json()["id"]  # the agent owns the task
    assert api.post(f"/v1/tasks/{task_id}/claims", {}, caller=cast.agent).status_code == 201
    refused = api.post(f"/v1/tasks/{task_id}/contract", {"rubric_hash": rubric_hash}, caller=cast.agent)
    assert_error(refused, 403, "self-contract-acceptance")


def test_only_a_collector_reports_links(api: Api, cast: Cast, task_id: str) -> None:
    body = {"task": task_id, "commit_id": "abc123", "committing_actor": "agent-w"}
    assert_error(api.post("/v1/links", body, caller=cast.agent), 403, "permission-denied")
    link = api.post("/v1/links", body, caller=cast.collector)
    assert link.status_code == 201
    assert link.json()["committing_actor_known"] is True and link.json()["reported_by"] == "collector-c"
    unknown = api.post("/v1/links", {**body, "committing_actor": "someone"}, caller=cast.collector).json()
    assert unknown["committing_actor_known"] is False


def test_idempotency_same_key_same_body_same_verification_other_body_conflict(
    api: Api, cast: Cast, task_id: str
) -> None:
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 0}
    first = api.post("/v1/verifications", body, caller=cast.agent, HTTP_IDEMPOTENCY_KEY="key-1")
    assert first.status_code in (200, 202), first.content
    again = api.post("/v1/verifications", {**body, "wait_ms": 10}, caller=cast.agent, HTTP_IDEMPOTENCY_KEY="key-1")
    assert again.json()["id"] == first.json()["id"]  # wait_ms is transport: not part of the body's identity
    assert again["Idempotent-Replayed"] == "true"
    other = {**body, "evidence": [{"symbol": "notes", "content_base64": b64(b"other")}]}
    error = assert_error(api.post("/v1/verifications", other, caller=cast.agent, HTTP_IDEMPOTENCY_KEY="key-1"), 409,
                         "idempotency-conflict")
    assert error["details"]["verification_id"] == first.json()["id"]
    # The key is the actor's: another actor with the same key gets its own verification.
    mine = api.post("/v1/verifications", body, caller=cast.owner, HTTP_IDEMPOTENCY_KEY="key-1")
    assert mine.json()["id"] != first.json()["id"]
    without = api.post("/v1/verifications", body, caller=cast.agent)
    assert without.json()["id"] != first.json()["id"]
    assert_error(api.post("/v1/verifications", body, caller=cast.agent, HTTP_IDEMPOTENCY_KEY="x" * 201), 400,
                 "invalid-request")


def test_judgments_and_results_need_the_results_scope(api: Api, cast: Cast, make_caller: Any, task_id: str) -> None:
    from tests.api.conftest import ALL_SCOPES

    worker = make_caller("sem-2", "semantic_worker", scopes=tuple(s for s in ALL_SCOPES if s != "results:write"))
    body = {"task": task_id, "judgments": [{"criterion": "c", "outcome": "abstain"}]}
    error = assert_error(api.post("/v1/verifications", body, caller=worker), 403, "scope-denied")
    assert error["details"] == {"required_scope": "results:write"}
    body = {"task": task_id, "results": [{"criterion": "c", "verdict": "FAIL"}]}
    assert_error(api.post("/v1/verifications", body, caller=worker), 403, "scope-denied")


def test_an_agent_cannot_bring_an_imported_result(api: Api, cast: Cast, task_id: str) -> None:
    body = {"task": task_id, "results": [{"criterion": "notes-digest", "verdict": "FAIL"}]}
    assert_error(api.post("/v1/verifications", body, caller=cast.agent), 403, "actor-cannot-author-result")


# --- a true bug -------------------------------------------------------------------------------------------------------


def test_a_bug_is_a_logged_500_of_the_same_shape(
    api: Api, cast: Cast, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from verification.runs.services import tasks as task_services

    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("a defect")

    monkeypatch.setattr(task_services, "task_create", broken)
    with caplog.at_level("ERROR", logger="verification.api"):
        response = api.post("/v1/tasks", {"title": "t"}, caller=cast.owner)
    error = assert_error(response, 500, "internal-error")
    assert "defect" not in json.dumps(error)  # the cause goes to the log, not the body
    assert any("API bug" in r.getMessage() and r.exc_info for r in caplog.records)

"""End to end through HTTP (issue 4 §3): register → task → claim → contract → evidence → verification → proof.

These tests commit (``transaction=True``): a submission's run is enqueued when its transaction commits. With the
embedded default (no broker) it runs right then, inside the request; with CELERY_BROKER_URL set, a real Celery worker
takes it from the broker (``engine``) while the view polls the database. Either way ``wait_ms`` sees it finish. With
DATABASE_URL=postgres://... and CELERY_BROKER_URL=redis://... (CI's second pass) this is the acceptance's "end to end
through HTTP on PostgreSQL with a real worker".
"""

from __future__ import annotations

import hashlib
import json
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.renderers import JSONRenderer

from tests.api.conftest import (
    NOTES,
    NOTES_DIGEST,
    OTHER,
    Api,
    Cast,
    assert_error,
    b64,
    contracted_task,
)
from verification.kernel.canonical import canonicalize
from verification.kernel.digests import sha256_digest
from verification.kernel.keys import PublicKey
from verification.runs.selectors import verification_get
from verification.trust.selectors import proof_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]


@pytest.fixture
def ready(signing_key: Any, api: Api, cast: Cast) -> tuple[Api, Cast, str]:
    return api, cast, contracted_task(api, cast)


def client_submission_hash(body: dict[str, Any]) -> str:
    """What a client recomputes from its own request log (SPEC §7): minus wait_ms, inline bytes as their sha256."""
    hashed = {k: v for k, v in body.items() if k != "wait_ms"}
    if "evidence" in hashed:
        hashed["evidence"] = [
            {**item, "content_base64": sha256_digest(__import__("base64").b64decode(item["content_base64"]))}
            if "content_base64" in item else item
            for item in hashed["evidence"]
        ]
    return hashlib.sha256(canonicalize(hashed)).hexdigest()


def verify_with_cli(tmp_path: Path, proof: dict[str, Any], jwks: dict[str, Any], *, pin: str, head: str,
                    verification_id: str, submission_hash: str) -> tuple[int, str, str]:
    proof_file, keys_file = tmp_path / "proof.json", tmp_path / "keys.json"
    proof_file.write_text(json.dumps(proof))
    keys_file.write_text(json.dumps(jwks))
    out, err = StringIO(), StringIO()
    try:
        call_command(
            "verify_proof", str(proof_file), "--keys", str(keys_file), "--pin", pin, "--head", head,
            "--verification-id", verification_id, "--submission-hash", submission_hash, stdout=out, stderr=err,
        )
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_a_matching_digest_is_met_and_the_served_proof_passes_verify_proof_pinned_by_fingerprint(
    ready: tuple[Api, Cast, str], signing_key: Any, tmp_path: Path
) -> None:
    api, cast, task_id = ready
    admitted = api.post("/v1/evidence", {"content_base64": b64(NOTES), "task": task_id}, caller=cast.collector)
    assert admitted.status_code == 201, admitted.content
    evidence = admitted.json()
    assert evidence["digest"] == NOTES_DIGEST and evidence["trust_tier"] == "third_party"
    assert evidence["admitted_by"] == "collector-c"  # from the token, never from the body

    body = {"task": task_id, "evidence": [{"symbol": "notes", "evidence_id": evidence["id"]}], "wait_ms": 5000}
    submitted = api.post("/v1/verifications", body, caller=cast.agent)
    assert submitted.status_code == 200, submitted.content
    result = submitted.json()
    assert submitted["Location"] == f"/v1/verifications/{result['id']}"
    assert (result["status"], result["determination"], result["flagged"]) == ("succeeded", "met", False)
    assert result["score"] == 1.0 and result["confidence"] == 1.0 and result["kernel_verdict"] == "PASS"
    assert result["submission_hash"] == client_submission_hash(body)
    assert result["proof_ref"] == f"/v1/verifications/{result['id']}/proof"
    [criterion] = result["verdict"]["results"]
    assert criterion["determination"] == "met" and criterion["authority"] == "deterministic"
    assert criterion["evidence_spans"][0]["trust_tier"] == "third_party"

    # The same result when read again, and the proof through the agent's token (verifications:read).
    assert api.get(f"/v1/verifications/{result['id']}", caller=cast.agent).json() == result
    proof = api.get(result["proof_ref"], caller=cast.agent)
    assert proof.status_code == 200, proof.content
    # Written as text (``proof_text``), the bytes DRF's renderer writes for the document ``proof_for`` builds.
    assert proof.content == JSONRenderer().render(proof_for(verification_get(result["id"])))
    assert proof["Content-Type"] == "application/json" and proof["Cache-Control"] == "private, no-store"
    jwks = api.get("/.well-known/acretix-verify/keys.json").json()
    fingerprint = PublicKey.from_raw(bytes(signing_key.public_key)).fingerprint
    code, out, err = verify_with_cli(
        tmp_path, proof.json(), jwks, pin=fingerprint, head=proof.json()["proof_head_hash"],
        verification_id=result["id"], submission_hash=client_submission_hash(body),
    )
    assert (code, out.strip()) == (0, "ok"), err
    # The same proof against another request's hash is refused (step 8).
    code, _, err = verify_with_cli(
        tmp_path, proof.json(), jwks, pin=fingerprint, head=proof.json()["proof_head_hash"],
        verification_id=result["id"], submission_hash="0" * 64,
    )
    assert code == 1 and err.strip().splitlines()[-1] == "subject-mismatch"


def test_a_differing_digest_is_not_met_and_not_flagged(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(OTHER)}], "wait_ms": 5000}
    submitted = api.post("/v1/verifications", body, caller=cast.agent)
    assert submitted.status_code == 200, submitted.content
    result = submitted.json()
    assert (result["status"], result["determination"], result["flagged"]) == ("succeeded", "not_met", False)
    assert result["verdict"]["results"][0]["reason"] == "digest-differs"
    assert result["submission_hash"] == client_submission_hash(body)


def test_inline_evidence_is_admitted_as_claimant_and_meets_the_digest(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 5000}
    result = api.post("/v1/verifications", body, caller=cast.agent).json()
    assert result["determination"] == "met"
    assert result["verdict"]["results"][0]["evidence_spans"][0]["trust_tier"] == "claimant"


def test_a_verification_without_an_accepted_contract_cannot_determine(signing_key: Any, api: Api, cast: Cast) -> None:
    task_id = api.post("/v1/tasks", {"title": "no contract"}, caller=cast.owner).json()["id"]
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 5000}
    result = api.post("/v1/verifications", body, caller=cast.agent).json()
    assert (result["status"], result["determination"], result["flagged"]) == ("succeeded", "cannot_determine", True)
    assert result["reason"] == "no-accepted-contract"


def test_wait_ms_zero_on_a_slow_run_answers_202_and_polling_reaches_succeeded(
    ready: tuple[Api, Cast, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker-less path made slow: the task is enqueued but does not run inline; a "worker" runs it later."""
    from verification import tasks
    from verification.runs.services.run import verification_run

    api, cast, task_id = ready
    enqueued: list[str] = []
    monkeypatch.setattr(tasks.verification_run, "delay", lambda verification_id: enqueued.append(verification_id))
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 0}
    submitted = api.post("/v1/verifications", body, caller=cast.agent)
    assert submitted.status_code == 202, submitted.content
    location = submitted["Location"]
    assert submitted.json()["status"] == "queued" and submitted.json()["determination"] is None
    assert enqueued == [submitted.json()["id"]]

    polled = api.get(location, caller=cast.agent)
    assert polled.status_code == 200 and polled.json()["status"] == "queued"
    verification_run(verification_id=enqueued[0])  # the worker
    polled = api.get(location, caller=cast.agent).json()
    assert (polled["status"], polled["determination"]) == ("succeeded", "met")


def test_wait_ms_bounds_the_wait_and_then_answers_202(
    ready: tuple[Api, Cast, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verification import tasks

    api, cast, task_id = ready
    monkeypatch.setattr(tasks.verification_run, "delay", lambda verification_id: None)
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 300}
    started = time.monotonic()
    submitted = api.post("/v1/verifications", body, caller=cast.agent)
    waited = time.monotonic() - started
    assert submitted.status_code == 202 and submitted.json()["status"] == "queued"
    assert waited >= 0.3


def test_more_evidence_runs_a_new_verification_that_supersedes_the_old_head(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(OTHER)}], "wait_ms": 5000}
    first = api.post("/v1/verifications", body, caller=cast.agent).json()
    assert first["determination"] == "not_met" and first["awaiting_evidence"] is True

    more = api.post(
        f"/v1/verifications/{first['id']}/evidence",
        {"evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}], "wait_ms": 5000},
        caller=cast.agent,
    )
    assert more.status_code == 200, more.content
    second = more.json()
    assert second["id"] != first["id"] and more["Location"] == f"/v1/verifications/{second['id']}"
    assert (second["determination"], second["supersedes"]) == ("met", first["id"])
    # Its first receipt supersedes the old head (SPEC §7), and the old one no longer waits.
    proof = api.get(f"/v1/verifications/{second['id']}/proof", caller=cast.agent).json()
    payload = json.loads(proof["entries"][0]["envelope"])["payload"]
    assert payload["supersedes_receipt_id"] == first["head_receipt_id"]
    again = api.post(
        f"/v1/verifications/{first['id']}/evidence",
        {"evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}]},
        caller=cast.agent,
    )
    assert_error(again, 409, "not-awaiting-evidence")


def test_an_imported_result_arrives_in_time_and_a_late_one_is_refused(signing_key: Any, api: Api, cast: Cast) -> None:
    rubric = {
        "name": "external scan",
        "criteria": [
            {"id": "scan", "kind": "imported", "deadline_seconds": 1, "on_expiry": "UNKNOWN"},
            {"id": "late", "kind": "imported", "deadline_seconds": 1, "on_expiry": "FAIL"},
        ],
    }
    task_id = contracted_task(api, cast, rubric)
    submitted = api.post("/v1/verifications", {"task": task_id, "wait_ms": 200}, caller=cast.agent)
    assert submitted.status_code == 202, submitted.content  # an unexpired PENDING decides the fold: running
    verification = submitted.json()
    assert verification["status"] == "running" and verification["determination"] is None

    delivered = api.post(
        f"/v1/verifications/{verification['id']}/results",
        {"criterion": "scan", "verdict": "PASS", "detail": "clean", "authority": "deterministic"},
        caller=cast.external,
    )
    assert delivered.status_code == 200, delivered.content
    scan = next(r for r in delivered.json()["verdict"]["results"] if r["criterion"] == "scan")
    # A claimed authority decides nothing: the result is imported, and an imported PASS is no PASS (SPEC §1, §2).
    assert scan["authority"] == "imported" and scan["verdict"] == "UNKNOWN"
    assert delivered.json()["head_receipt_kind"] == "result"

    time.sleep(1.2)  # past both deadlines
    late = api.post(
        f"/v1/verifications/{verification['id']}/results", {"criterion": "late", "verdict": "FAIL"},
        caller=cast.external,
    )
    assert_error(late, 409, "pending-expired")
    read = api.get(f"/v1/verifications/{verification['id']}", caller=cast.agent).json()
    late_result = next(r for r in read["verdict"]["results"] if r["criterion"] == "late")
    assert (late_result["verdict"], late_result["reason"]) == ("FAIL", "pending-expired")
    assert read["status"] == "succeeded" and read["determination"] == "not_met"


def test_only_an_external_verifiers_token_may_deliver_an_imported_result(api: Api, cast: Cast) -> None:
    rubric = {"name": "scan", "criteria": [{"id": "scan", "kind": "imported", "deadline_seconds": 60}]}
    task_id = contracted_task(api, cast, rubric)
    verification = api.post("/v1/verifications", {"task": task_id}, caller=cast.agent).json()
    refused = api.post(f"/v1/verifications/{verification['id']}/results", {"criterion": "scan", "verdict": "FAIL"},
                       caller=cast.semantic)
    assert_error(refused, 403, "actor-cannot-author-result")
    unknown = api.post(f"/v1/verifications/{verification['id']}/results", {"criterion": "nope", "verdict": "FAIL"},
                       caller=cast.external)
    assert_error(unknown, 409, "not-pending")


def test_the_events_feed_is_ordered_and_the_cursor_moves_on(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready
    ids = []
    for content in (NOTES, OTHER, NOTES):
        body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(content)}], "wait_ms": 5000}
        ids.append(api.post("/v1/verifications", body, caller=cast.agent).json()["id"])
    feed = api.get("/v1/events", caller=cast.agent)
    assert feed.status_code == 200, feed.content
    events = feed.json()["events"]
    finished = [e for e in events if e["kind"] == "verification.finished"]
    assert [e["verification_id"] for e in finished] == ids
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)
    assert finished[1]["payload"]["determination"] == "not_met"
    assert feed.json()["next_after"] == events[-1]["id"]

    first_page = api.get("/v1/events", caller=cast.agent, limit=1).json()
    assert [e["id"] for e in first_page["events"]] == [events[0]["id"]]
    rest = api.get("/v1/events", caller=cast.agent, after=first_page["next_after"]).json()
    assert [e["id"] for e in rest["events"]] == [e["id"] for e in events[1:]]
    empty = api.get("/v1/events", caller=cast.agent, after=events[-1]["id"]).json()
    assert empty == {"events": [], "next_after": events[-1]["id"]}


def test_the_list_filters_and_pages_with_a_cursor(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready
    made = []
    for content in (NOTES, OTHER, NOTES):
        body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(content)}], "wait_ms": 5000}
        made.append(api.post("/v1/verifications", body, caller=cast.agent).json())
    page = api.get("/v1/verifications", caller=cast.agent, limit=2).json()
    assert [v["id"] for v in page["results"]] == [made[2]["id"], made[1]["id"]]  # newest first
    assert page["next_cursor"]
    page2 = api.get("/v1/verifications", caller=cast.agent, limit=2, cursor=page["next_cursor"]).json()
    assert [v["id"] for v in page2["results"]] == [made[0]["id"]] and page2["next_cursor"] is None
    met = api.get("/v1/verifications", caller=cast.agent, determination="met", task=task_id).json()
    assert {v["id"] for v in met["results"]} == {made[0]["id"], made[2]["id"]}
    assert_error(api.get("/v1/verifications", caller=cast.agent, colour="red"), 400, "unknown-field")
    assert_error(api.get("/v1/verifications", caller=cast.agent, cursor="garbage!"), 400, "invalid-request")

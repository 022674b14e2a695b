"""Who may call what (issue 4 §3, SPEC §1): every endpoint against no token, a bad token, a token without the
endpoint's scope, a token with only that scope, and portal sessions (reads only)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from tests.api.conftest import ALL_SCOPES, NOTES, Api, Cast, assert_error, b64, contracted_task

pytestmark = pytest.mark.django_db

UNKNOWN_UUID = "00000000-0000-4000-8000-000000000000"

# (method, path, body, scope); {task} and {verification} are filled in with real ids.
ENDPOINTS: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("POST", "/v1/rubrics", {"name": "r", "criteria": [{"id": "c", "kind": "imported"}]}, "rubrics:write"),
    ("POST", "/v1/tasks", {"title": "t"}, "tasks:write"),
    ("POST", "/v1/tasks/{task}/claims", {}, "claims:write"),
    ("POST", "/v1/tasks/{task}/contract", {"rubric_hash": "a" * 64}, "contracts:write"),
    ("POST", "/v1/tasks/{task}/reopen", {}, "tasks:write"),
    ("POST", "/v1/tasks/{task}/cases", {"content": "case"}, "tasks:write"),
    ("POST", "/v1/links", {"task": "{task}", "commit_id": "c1", "committing_actor": "x"}, "links:write"),
    ("POST", "/v1/manifests", {"task": "{task}", "evidence_id": UNKNOWN_UUID}, "manifests:write"),
    ("POST", "/v1/baselines", {"task": "{task}", "artifact_key": "notes", "digest": "sha256:" + "0" * 64},
     "baselines:write"),
    ("POST", "/v1/evidence", {"content_base64": b64(NOTES)}, "evidence:write"),
    ("POST", "/v1/verifications", {"task": "{task}"}, "verifications:write"),
    ("GET", "/v1/verifications", None, "verifications:read"),
    ("GET", "/v1/verifications/{verification}", None, "verifications:read"),
    ("POST", "/v1/verifications/{verification}/results", {"criterion": "c", "verdict": "FAIL"}, "results:write"),
    ("POST", "/v1/verifications/{verification}/evidence",
     {"evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}]}, "verifications:write"),
    ("GET", "/v1/events", None, "events:read"),
    ("GET", "/v1/verifications/{verification}/proof", None, "verifications:read"),
    ("GET", "/v1/verifications/{verification}/proof/envelope", None, "verifications:read"),
]
IDS = [f"{method} {path}" for method, path, _, _ in ENDPOINTS]


@pytest.fixture
def ids(signing_key: Any, api: Api, cast: Cast) -> dict[str, str]:
    task = contracted_task(api, cast)
    body = {"task": task, "evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}]}
    verification = api.post("/v1/verifications", body, caller=cast.agent).json()["id"]
    return {"task": task, "verification": verification}


def _fill(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


def _call(api: Api, method: str, path: str, body: Any, ids: dict[str, str], **kwargs: Any) -> Any:
    url = _fill(path, ids)
    if method == "GET":
        return api.get(url, **kwargs)
    return api.post(url, _fill(body, ids), **kwargs)


@pytest.mark.parametrize(("method", "path", "body", "scope"), ENDPOINTS, ids=IDS)
def test_without_credentials_every_endpoint_is_401(
    api: Api, ids: dict[str, str], method: str, path: str, body: Any, scope: str
) -> None:
    response = _call(api, method, path, body, ids)
    assert_error(response, 401, "not-authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    ["Bearer rpt_" + "A" * 43, "Bearer ", "Bearer not-a-token", "bearer rpt_" + "x" * 500, "Basic YWxhZGRpbjpvcGVu",
     "Bearer rpt_\u00e9" + "A" * 42],
)
@pytest.mark.parametrize(("method", "path", "body", "scope"), ENDPOINTS[:2] + ENDPOINTS[11:13] + ENDPOINTS[16:17],
                         ids=IDS[:2] + IDS[11:13] + IDS[16:17])
def test_a_bad_token_is_401(
    api: Api, ids: dict[str, str], header: str, method: str, path: str, body: Any, scope: str
) -> None:
    assert_error(_call(api, method, path, body, ids, HTTP_AUTHORIZATION=header), 401, "not-authenticated")


def test_a_revoked_token_is_401(api: Api, cast: Cast, ids: dict[str, str]) -> None:
    from verification.actors.services.actors import token_revoke

    assert api.get("/v1/events", caller=cast.agent).status_code == 200
    token_revoke(token=cast.agent.token)
    assert_error(api.get("/v1/events", caller=cast.agent), 401, "not-authenticated")
    assert_error(api.get(f"/v1/verifications/{ids['verification']}/proof", caller=cast.agent), 401,
                 "not-authenticated")


@pytest.mark.parametrize(("method", "path", "body", "scope"), ENDPOINTS, ids=IDS)
def test_a_token_without_the_scope_is_403_scope_denied(
    api: Api, make_caller: Any, ids: dict[str, str], method: str, path: str, body: Any, scope: str
) -> None:
    caller = make_caller("narrow", "agent", scopes=tuple(s for s in ALL_SCOPES if s != scope))
    error = assert_error(_call(api, method, path, body, ids, caller=caller), 403, "scope-denied")
    assert error["details"]["required_scope"] == scope


@pytest.mark.parametrize(("method", "path", "body", "scope"), ENDPOINTS, ids=IDS)
def test_a_token_with_only_the_scope_gets_past_the_check(
    api: Api, make_caller: Any, ids: dict[str, str], method: str, path: str, body: Any, scope: str
) -> None:
    caller = make_caller("only", "external_verifier", scopes=(scope,))
    response = _call(api, method, path, body, ids, caller=caller)
    assert response.status_code != 401
    if response.status_code == 403:  # a rule may still refuse this actor, but not for want of the scope
        assert response.json()["error"]["code"] != "scope-denied"
    assert response.status_code < 500


# --- portal sessions ------------------------------------------------------------------------------------------------


@pytest.fixture
def reviewer(django_user_model: Any) -> Any:
    user = django_user_model.objects.create_user(username="rita", password="x" * 20)
    user.groups.add(Group.objects.get(name="reviewer"))
    return user


READS = [e for e in ENDPOINTS if e[0] == "GET" and "proof" not in e[1]]
WRITES = [e for e in ENDPOINTS if e[0] == "POST"]


@pytest.mark.parametrize(("method", "path", "body", "scope"), READS, ids=[f"{m} {p}" for m, p, _, _ in READS])
def test_a_reviewers_session_may_read(
    api: Api, reviewer: Any, ids: dict[str, str], method: str, path: str, body: Any, scope: str
) -> None:
    api.client.force_login(reviewer)
    response = _call(api, method, path, body, ids)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(("method", "path", "body", "scope"), WRITES, ids=[f"{m} {p}" for m, p, _, _ in WRITES])
def test_a_session_may_not_write(
    api: Api, reviewer: Any, ids: dict[str, str], method: str, path: str, body: Any, scope: str
) -> None:
    from django.test import Client

    api.client = Client(enforce_csrf_checks=False)
    api.client.force_login(reviewer)
    assert_error(_call(api, method, path, body, ids), 403, "permission-denied")


def test_a_session_without_a_role_may_not_read(api: Api, django_user_model: Any, ids: dict[str, str]) -> None:
    api.client.force_login(django_user_model.objects.create_user(username="nobody", password="x" * 20))
    assert_error(api.get("/v1/events"), 403, "permission-denied")
    assert_error(api.get(f"/v1/verifications/{ids['verification']}"), 403, "permission-denied")


def test_a_session_post_without_csrf_is_refused(api: Api, reviewer: Any) -> None:
    from django.test import Client

    api.client = Client(enforce_csrf_checks=True)
    api.client.force_login(reviewer)
    assert_error(api.post("/v1/tasks", {"title": "t"}), 403, "permission-denied")


def test_a_token_wins_over_a_session(api: Api, reviewer: Any, cast: Cast, ids: dict[str, str]) -> None:
    """With both, the token decides (SPEC §1: machines act as their actor, not as whoever is logged in)."""
    api.client.force_login(reviewer)
    created = api.post("/v1/tasks", {"title": "t"}, caller=cast.owner)
    assert created.status_code == 201 and created.json()["created_by"] == "owner-o"

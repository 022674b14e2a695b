"""Ownership (SPEC §1; issue 11 item 4): who may write on whose object.

First the two attacks of item 4 exactly as reproduced, then ONE parametrised walk of the table in docs/api-ownership.md
("Who may call what"): every write endpoint, with the task owner, a worker of the cycle, an unrelated actor of each
kind, a person (a reviewer's human actor holding a token) and a portal admin. The table is parsed from that file, so
the documentation and this test cannot drift apart; and its endpoints must be exactly the API's write endpoints.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps

from tests.api.conftest import ALL_SCOPES, NOTES, OTHER, Api, b64, digest_rubric
from tests.portal.conftest import make_user  # noqa: F401 - the fixture
from tests.verification.service_world import CONFIG_AFTER, World, inline, unchanged_entry
from verification.actors.services.actors import actor_create, actor_for_user, token_issue
from verification.kernel.reasons import Reason, explain
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_decide
from verification.runs.models import TaskCycle, Verification

pytestmark = pytest.mark.django_db

OWNERSHIP_DOC = Path(__file__).resolve().parents[2] / "docs" / "api-ownership.md"


def row_counts() -> dict[str, int]:
    return {m.__name__: m.objects.count() for m in apps.get_app_config("verification").get_models()}


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def assert_refused(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.content[:400])
    error = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"].startswith(explain(code))


# --- item 4, exactly as reproduced -----------------------------------------------------------------------------------


def test_item4_an_unrelated_agent_cannot_reopen_another_owners_task_mid_review(
    signing_key: Any, api: Api, make_user: Any  # noqa: F811 - fixtures
) -> None:
    world = World.build()
    world.contract(unchanged_entry())
    verification, _ = world.submit_and_run({"evidence": [inline("config", CONFIG_AFTER)]})
    reviewer = make_user("rita", "reviewer")
    review_claim(user=reviewer, verification=verification)  # a reviewer's decision is in progress
    stranger = actor_create(name="stranger-a", kind="agent")
    _, raw = token_issue(actor=stranger, boundary="host-stranger", scopes=["tasks:write"])

    before = row_counts()
    assert_refused(api.post(f"/v1/tasks/{world.task.pk}/reopen", {}, **bearer(raw)), 403, "not-task-owner")
    assert row_counts() == before
    assert TaskCycle.objects.filter(task=world.task).count() == 1

    cited = [str(verification.bindings.get().evidence_id)]
    decision = review_decide(user=reviewer, verification=verification, verdict="PASS", rationale="config is right",
                             cited_evidence_ids=cited, request_key=new_request_key())
    assert decision.receipt is not None  # not stale-cycle: nobody reopened the task


def test_item4_an_unrelated_agent_cannot_add_evidence_to_another_agents_verification(
    signing_key: Any, api: Api  # noqa: F811 - the fixture
) -> None:
    world = World.build()
    world.contract(digest_rubric()["criteria"][0])
    verification, _ = world.submit_and_run({"evidence": [inline("notes", OTHER)]})
    assert verification.awaiting_evidence and verification.determination == "not_met"
    stranger = actor_create(name="stranger-a", kind="agent")
    _, raw = token_issue(actor=stranger, boundary="host-stranger", scopes=["verifications:write"])

    before = row_counts()
    response = api.post(f"/v1/verifications/{verification.pk}/evidence",
                        {"evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}]}, **bearer(raw))
    assert_refused(response, 403, "not-a-worker-of-this-cycle")
    assert row_counts() == before
    assert not Verification.objects.filter(supersedes=verification).exists()
    verification.refresh_from_db()
    assert verification.awaiting_evidence


# --- the ownership table, walked --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One row of docs/api-ownership.md's "Who may call what": the endpoint, whose object, who may call, the refusal."""

    method: str
    path: str
    whose: str
    who: frozenset[str]
    status: int
    code: str


_ROW = re.compile(
    r"^\|\s*`(?P<method>POST) (?P<path>/v1/[^`]+)`\s*\|(?P<whose>[^|]*)\|(?P<who>[^|]*)\|(?P<refusal>[^|]*)\|"
)
_REFUSAL = re.compile(r"(?P<status>\d{3}) `(?P<code>[a-z-]+)`")
#: The words the table's "who may call" column uses, each a role a caller of the walk has or has not.
ROLES = frozenset(
    {"anyone", "task owner", "portal admin", "contract owner", "worker of the cycle", "collector",
     "external verifier"}
)


def readme_rows() -> list[Row]:
    text = OWNERSHIP_DOC.read_text(encoding="utf-8")
    if "## Who may call what" not in text:
        return []  # the drift test below fails: the table must exist
    section = text.split("## Who may call what", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        who = frozenset(w.strip() for w in match["who"].split(",") if w.strip())
        assert who <= ROLES, f"{line}: unknown roles {sorted(who - ROLES)}"
        refusal = _REFUSAL.search(match["refusal"])
        if "anyone" in who:
            status, code = 0, ""
        else:
            assert refusal is not None, line
            status, code = int(refusal["status"]), refusal["code"]
            assert code in {r.value for r in Reason}, code
        rows.append(Row(match["method"], match["path"].strip(), match["whose"].strip(), who, status, code))
    return rows


def api_write_endpoints() -> set[str]:
    """``POST /v1/...`` paths of the API's routes, ids as ``{id}``."""
    from verification.api import urls

    found = set()
    for pattern in urls.urlpatterns:
        route = str(pattern.pattern)
        view = getattr(pattern.callback, "view_class", None)
        if route.startswith("v1/") and view is not None and hasattr(view, "post"):
            found.add("/" + re.sub(r"<str:[a-z_]+>", "{id}", route))
    return found


def test_the_readme_table_lists_exactly_the_apis_write_endpoints() -> None:
    listed = [r.path for r in readme_rows()]
    assert len(listed) == len(set(listed))
    assert set(listed) == api_write_endpoints()


#: Who walks the table: the owner, a worker of the cycle (claimant and submitter), an unrelated actor of each kind,
#: a person (a reviewer's human actor) and a portal admin's human actor, each with every scope.
CALLERS = ("owner", "worker", "agent", "service", "collector", "semantic_worker", "external_verifier",
           "contract_owner", "human", "admin")


def roles_of(caller: str) -> frozenset[str]:
    roles = {"anyone"}
    roles |= {
        "owner": {"task owner"},
        "worker": {"worker of the cycle"},
        "collector": {"collector"},
        "external_verifier": {"external verifier"},
        "contract_owner": {"contract owner"},
        "admin": {"portal admin"},
    }.get(caller, set())
    return frozenset(roles)


@dataclass
class Stage:
    api: Api
    raw: dict[str, str]
    ids: dict[str, str]


def _stage(new_user: Callable[..., Any], *, rubric: dict[str, Any] | None, submit: dict[str, Any] | None) -> Stage:
    """A task owned by ``owner`` (an agent); a separate contract owner accepts ``rubric``; ``worker`` claims and
    submits ``submit``; then one token for every caller."""
    api = Api()
    raw: dict[str, str] = {}
    for name, kind in (("owner", "agent"), ("worker", "agent"), ("agent", "agent"), ("service", "service"),
                       ("collector", "collector"), ("semantic_worker", "semantic_worker"),
                       ("external_verifier", "external_verifier"), ("contract_owner", "contract_owner"),
                       ("acceptor", "contract_owner")):
        actor = actor_create(name=f"{name}-x", kind=kind)
        raw[name] = token_issue(actor=actor, boundary=f"host-{name}", scopes=list(ALL_SCOPES))[1]
    for name, role in (("human", "reviewer"), ("admin", "admin")):
        actor = actor_for_user(new_user(name, role))
        raw[name] = token_issue(actor=actor, boundary=f"laptop-{name}", scopes=list(ALL_SCOPES))[1]
    task = api.post("/v1/tasks", {"title": "owned"}, **bearer(raw["owner"])).json()["id"]
    ids = {"task": task}
    if rubric is not None:
        rubric_hash = api.post("/v1/rubrics", rubric, **bearer(raw["acceptor"])).json()["rubric_hash"]
        accepted = api.post(f"/v1/tasks/{task}/contract", {"rubric_hash": rubric_hash}, **bearer(raw["acceptor"]))
        assert accepted.status_code == 201, accepted.content
        ids["rubric_hash"] = rubric_hash
    claimed = api.post(f"/v1/tasks/{task}/claims", {}, **bearer(raw["worker"]))
    assert claimed.status_code == 201, claimed.content
    if submit is not None:
        from verification.runs.services.run import verification_run

        submitted = api.post("/v1/verifications", {"task": task, **submit}, **bearer(raw["worker"]))
        assert submitted.status_code in (200, 202), submitted.content
        ids["verification"] = submitted.json()["id"]
        verification_run(verification_id=ids["verification"])
    evidence = api.post("/v1/evidence", {"content_base64": b64(b"observed"), "task": task}, **bearer(raw["collector"]))
    ids["evidence"] = evidence.json()["id"]
    return Stage(api, raw, ids)


NOT_MET = {"evidence": [{"symbol": "notes", "content_base64": b64(OTHER)}]}
AWAITS_SCAN = {"name": "scan", "criteria": [{"id": "ext-scan", "kind": "imported", "deadline_seconds": 3600,
                                             "on_expiry": "UNKNOWN"}]}
#: Per endpoint: the stage it needs (rubric, submission) and the request (a body with {task}, {verification}...).
CALLS: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None, str, dict[str, Any]]] = {
    "/v1/rubrics": (digest_rubric(), None, "/v1/rubrics", {"name": "another", "criteria": [
        {"id": "c", "kind": "imported"}]}),
    "/v1/tasks": (digest_rubric(), None, "/v1/tasks", {"title": "another"}),
    "/v1/tasks/{id}/claims": (digest_rubric(), None, "/v1/tasks/{task}/claims", {}),
    "/v1/tasks/{id}/contract": (None, None, "/v1/tasks/{task}/contract", {"rubric_hash": "{rubric}"}),
    "/v1/tasks/{id}/reopen": (digest_rubric(), None, "/v1/tasks/{task}/reopen", {}),
    "/v1/tasks/{id}/cases": (digest_rubric(), None, "/v1/tasks/{task}/cases", {"content": "did it pass?"}),
    "/v1/links": (digest_rubric(), None, "/v1/links", {"task": "{task}", "commit_id": "c1",
                                                      "committing_actor": "worker-x"}),
    "/v1/manifests": (digest_rubric(), None, "/v1/manifests", {"task": "{task}", "evidence_id": "{evidence}"}),
    "/v1/baselines": (digest_rubric(), None, "/v1/baselines", {"task": "{task}", "artifact_key": "notes",
                                                              "digest": "sha256:" + "0" * 64}),
    "/v1/evidence": (digest_rubric(), None, "/v1/evidence", {"content_base64": b64(b"more")}),
    "/v1/verifications": (digest_rubric(), None, "/v1/verifications", {"task": "{task}"}),
    "/v1/verifications/{id}/results": (AWAITS_SCAN, {"evidence": []}, "/v1/verifications/{verification}/results",
                                       {"criterion": "ext-scan", "verdict": "FAIL", "detail": "2 issues"}),
    "/v1/verifications/{id}/evidence": (digest_rubric(), NOT_MET, "/v1/verifications/{verification}/evidence",
                                        {"evidence": [{"symbol": "notes", "content_base64": b64(NOTES)}]}),
}


def _fill(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


ROWS = readme_rows()


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("row", ROWS, ids=[r.path for r in ROWS])
def test_who_may_call_what(signing_key: Any, make_user: Any, row: Row, caller: str) -> None:  # noqa: F811
    rubric, submit, path, body = CALLS[row.path]
    stage = _stage(make_user, rubric=rubric, submit=submit)
    if row.path == "/v1/tasks/{id}/contract":  # a registered rubric the cycle has not accepted yet
        registered = stage.api.post("/v1/rubrics", digest_rubric(), **bearer(stage.raw["acceptor"]))
        stage.ids["rubric"] = registered.json()["rubric_hash"]
    allowed = bool(row.who & roles_of(caller))
    before = row_counts()
    response = stage.api.post(_fill(path, stage.ids), _fill(body, stage.ids), **bearer(stage.raw[caller]))
    if allowed:
        assert 200 <= response.status_code < 300, (caller, response.status_code, response.content[:400])
        assert row_counts() != before  # it wrote what it was asked to
    else:
        assert_refused(response, row.status, row.code)
        assert row_counts() == before  # nothing written

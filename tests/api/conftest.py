"""Fixtures for the API tests: actors with tokens in separate boundaries, and a client that speaks the API.

Tokens are issued through the services (issuing them is an admin screen, not an API endpoint); everything else
goes through HTTP with ``Authorization: Bearer``.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from tests.verification.conftest import signing_key, var_dir  # noqa: F401 - fixtures shared with the receipts tests
from verification.actors.services.actors import SCOPES
from verification.kernel.digests import sha256_digest

ALL_SCOPES = tuple(sorted(SCOPES))

NOTES = b"release-notes v1.2\n- fix: retry on timeout\n"
NOTES_DIGEST = sha256_digest(NOTES)
OTHER = b"release-notes v1.2\n- fix: nothing at all\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def digest_rubric(literal: str = NOTES_DIGEST, *, name: str = "release 1.2", symbol: str = "notes") -> dict[str, Any]:
    return {
        "name": name,
        "criteria": [
            {
                "id": "notes-digest",
                "kind": "digest",
                "observable": "evidence.content-digest",
                "expression": f'(= {symbol} "{literal}")',
            }
        ],
    }


@dataclass
class Caller:
    """An actor and the plaintext of one of its tokens."""

    name: str
    raw: str
    actor: Any
    token: Any

    @property
    def header(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.raw}"}


class Api:
    """``django.test.Client`` with JSON bodies and a bearer token per call."""

    def __init__(self) -> None:
        self.client = Client()

    def post(self, path: str, body: Any = None, *, caller: Caller | None = None, raw: bytes | None = None,
             content_type: str = "application/json", **headers: str) -> Any:
        data = raw if raw is not None else json.dumps({} if body is None else body).encode("utf-8")
        extra = {**(caller.header if caller is not None else {}), **headers}
        return self.client.generic("POST", path, data, content_type=content_type, **extra)

    def get(self, path: str, *, caller: Caller | None = None, **params_and_headers: Any) -> Any:
        headers = {k: v for k, v in params_and_headers.items() if k.startswith("HTTP_")}
        params = {k: v for k, v in params_and_headers.items() if not k.startswith("HTTP_")}
        extra = {**(caller.header if caller is not None else {}), **headers}
        return self.client.get(path, params, **extra)

    def call(self, method: str, path: str, *, caller: Caller | None = None, **extra: Any) -> Any:
        return self.client.generic(method, path, **{**(caller.header if caller is not None else {}), **extra})


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The one error shape, with a registered code and the registry's words in the message."""
    from verification.kernel.reasons import explain

    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code, error
    assert error["message"].startswith(explain(code)), error
    assert isinstance(error["details"], dict)
    return error


@pytest.fixture
def api() -> Api:
    return Api()


@pytest.fixture
def make_caller(db: None) -> Any:
    from verification.actors.services.actors import actor_create, token_issue

    def make(name: str, kind: str, *, boundary: str | None = None, scopes: tuple[str, ...] = ALL_SCOPES) -> Caller:
        actor = actor_create(name=name, kind=kind)
        token, raw = token_issue(actor=actor, boundary=boundary or f"host-{name}", scopes=list(scopes))
        return Caller(name, raw, actor, token)

    return make


@dataclass
class Cast:
    owner: Caller
    agent: Caller
    collector: Caller
    semantic: Caller
    external: Caller


@pytest.fixture
def cast(make_caller: Any) -> Cast:
    return Cast(
        owner=make_caller("owner-o", "contract_owner"),
        agent=make_caller("agent-w", "agent"),
        collector=make_caller("collector-c", "collector"),
        semantic=make_caller("sem-1", "semantic_worker"),
        external=make_caller("ext-v", "external_verifier"),
    )


def contracted_task(api: Api, cast: Cast, rubric: dict[str, Any] | None = None, *, claim: bool = True) -> str:
    """Through HTTP: register the rubric, create a task, the agent claims it, the owner accepts the contract."""
    registered = api.post("/v1/rubrics", rubric or digest_rubric(), caller=cast.owner)
    assert registered.status_code in (200, 201), registered.content
    task = api.post("/v1/tasks", {"title": "release 1.2"}, caller=cast.owner)
    assert task.status_code == 201, task.content
    task_id = task.json()["id"]
    if claim:
        claimed = api.post(f"/v1/tasks/{task_id}/claims", {}, caller=cast.agent)
        assert claimed.status_code == 201, claimed.content
    accepted = api.post(f"/v1/tasks/{task_id}/contract", {"rubric_hash": registered.json()["rubric_hash"]},
                        caller=cast.owner)
    assert accepted.status_code == 201, accepted.content
    return str(task_id)


@pytest.fixture
def engine(transactional_db: None, signing_key: Any) -> Iterator[str]:  # noqa: F811 - the fixture
    """Who runs the verifications: with CELERY_BROKER_URL set (CI's second pass), a real Celery worker consuming from
    the broker in this process (its own thread and database connection); otherwise the embedded eager default."""
    if not os.environ.get("CELERY_BROKER_URL"):
        yield "eager"
        return
    from celery.contrib.testing.worker import start_worker

    from reviewportal.celery import app

    assert not app.conf.task_always_eager
    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING", shutdown_timeout=10):
        yield "worker"

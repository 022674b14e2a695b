"""schemathesis against ``/api/schema/`` (issue 4 §3): generated requests to every operation, through the WSGI app,
with a token holding every scope. No response may be a 5xx, and every response must match the schema (status,
content type, body).

Bounded: ``MAX_EXAMPLES`` examples per operation, no shrinking deadline; the whole module runs well under a minute.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis import checks

from tests.api.conftest import ALL_SCOPES

MAX_EXAMPLES = 15
CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.status_code_conformance,
    checks.content_type_conformance,
]


# Loaded at import (pytest-django has configured Django before collection; generating the schema reads no database).
# get_wsgi_application, not reviewportal.wsgi: the tests make their own signing key (the start-up gate is tested
# elsewhere). schemathesis.pytest.from_fixture is not used: it relies on pytest internals that pytest 9 removed.
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())


@contextlib.contextmanager
def keep_connection() -> Iterator[None]:
    """As Django's test client does around each request: a request through the raw WSGI app must not close the
    database connection (it holds the test's transaction)."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def world(db: None, signing_key: Any) -> dict[str, str]:
    """A token with every scope, and real ids to put into generated requests so that success paths run too."""
    from tests.api.conftest import NOTES, b64
    from verification.services.actors import actor_create, token_issue

    actor = actor_create(name="fuzzer", kind="external_verifier")
    _, raw = token_issue(actor=actor, boundary="fuzz-host", scopes=list(ALL_SCOPES))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    task = client.post("/v1/tasks", {"title": "fuzzed"}, content_type="application/json").json()["id"]
    evidence = client.post("/v1/evidence", {"content_base64": b64(NOTES)}, content_type="application/json").json()["id"]
    verification = client.post("/v1/verifications", {"task": task}, content_type="application/json").json()["id"]
    return {"authorization": f"Bearer {raw}", "task": task, "evidence": evidence, "verification": verification}


def with_real_ids(case: Any, world: dict[str, str]) -> None:
    """Point generated ids at records that exist (random ids only ever reach the 404 path)."""
    params = case.path_parameters or {}
    if "task_id" in params:
        params["task_id"] = world["task"]
    if "verification_id" in params:
        params["verification_id"] = world["verification"]
    body = case.body
    if isinstance(body, dict):
        if isinstance(body.get("task"), str):
            body["task"] = world["task"]
        if isinstance(body.get("evidence_id"), str):
            body["evidence_id"] = world["evidence"]


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
    derandomize=True,
)
def test_the_api_matches_its_schema_and_never_answers_5xx(case: Any, world: dict[str, str]) -> None:
    with_real_ids(case, world)
    with keep_connection():
        case.call_and_validate(headers={"Authorization": world["authorization"]}, checks=CHECKS)

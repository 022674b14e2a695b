"""schemathesis against ``/api/schema/`` (issue 4 §3, issue 13 item 4): generated requests to every operation, through
the WSGI app, with a token holding every scope, then the stateful phase that follows the schema's links (a created
task to its claim, contract, reopening and cases; a submitted verification to its read, proof, envelope, results and
more evidence). No response may be a 5xx, and every response must match the schema (status, headers, content type,
body).

"Schema looser than the implementation" is schemathesis's ``validation_mismatch`` warning: every positive
(schema-valid) case of an operation refused with a 4xx that is about the data (not 401/403/404/409/429). The
per-operation test asserts the same rule (``assert_schema_not_looser``), so a schema that loses its real constraints
fails here rather than silently testing nothing past the validators.

Bounded: ``MAX_EXAMPLES`` examples per operation and ``STATEFUL_EXAMPLES`` scenarios of at most ``STATEFUL_STEPS``
steps; the whole module runs in about a minute.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from tests.api.conftest import ALL_SCOPES

MAX_EXAMPLES = 15
STATEFUL_EXAMPLES = 12
STATEFUL_STEPS = 6
CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
]
#: The statuses schemathesis does not count as "the data was refused" (auth, missing data, conflicts, rate).
NOT_ABOUT_THE_DATA = frozenset({401, 403, 404, 409, 429})
SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)


# Loaded at import (pytest-django has configured Django before collection; generating the schema reads no database).
# get_wsgi_application, not reviewportal.wsgi: the tests make their own signing key (the start-up gate is tested
# elsewhere). schemathesis.pytest.from_fixture is not used: it relies on pytest internals that pytest 9 removed.
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


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
    from django.test import Client

    from tests.api.conftest import NOTES, b64
    from verification.actors.services.actors import actor_create, token_issue

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
        for binding in body.get("evidence") or ():
            if isinstance(binding, dict) and "evidence_id" in binding:
                binding["evidence_id"] = world["evidence"]


def assert_schema_not_looser(label: str, statuses: Counter[int]) -> None:
    """schemathesis's validation_mismatch rule: not every schema-valid case may be refused for its data."""
    refused = sum(n for status, n in statuses.items() if 400 <= status < 500 and status not in NOT_ABOUT_THE_DATA)
    assert statuses, label
    assert refused < sum(statuses.values()), f"{label}: every schema-valid case refused: {dict(statuses)}"


@pytest.mark.django_db
@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_the_api_matches_its_schema_and_never_answers_5xx(operation: Any, world: dict[str, str]) -> None:
    statuses: Counter[int] = Counter()

    @given(case=operation.as_strategy())
    @SETTINGS
    def run(case: Any) -> None:
        with_real_ids(case, world)
        with keep_connection():
            response = case.call(headers={"Authorization": world["authorization"]})
            case.validate_response(response, checks=CHECKS)
        statuses[response.status_code] += 1

    run()
    assert_schema_not_looser(operation.label, statuses)


@pytest.mark.django_db
def test_stateful_link_following_finds_no_5xx_and_no_schema_violation(world: dict[str, str]) -> None:
    """The stateful phase: sequences of calls where each step may feed a link from an earlier response."""
    machine = schema.as_state_machine()
    seen: Counter[str] = Counter()

    class Linked(machine):  # type: ignore[misc,valid-type]
        def before_call(self, case: Any) -> None:
            with_real_ids_if_unlinked(case, world)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": {"Authorization": world["authorization"]}}

        def call(self, case: Any, **kwargs: Any) -> Any:
            with keep_connection():
                response = case.call(**kwargs)
            seen[f"{case.operation.label} {response.status_code}"] += 1
            return response

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS)

    Linked.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=STATEFUL_STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
    )
    followed = {label for label in seen if "{" in label.split(" ")[1] and not label.endswith(" 404")}
    assert followed, f"no link was followed to a record that exists: {dict(seen)}"


def with_real_ids_if_unlinked(case: Any, world: dict[str, str]) -> None:
    """A path id a link filled in names a real record already; a generated one is pointed at the world's."""
    params = case.path_parameters or {}
    for name, key in (("task_id", "task"), ("verification_id", "verification")):
        value = params.get(name)
        if value is not None and not _exists(name, str(value)):
            params[name] = world[key]


def _exists(name: str, value: str) -> bool:
    from verification.runs import selectors

    found = selectors.task_get(value) if name == "task_id" else selectors.verification_get(value)
    return found is not None

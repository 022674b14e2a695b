"""One validation layer (issue 13 item 5): a submission's wire shape is checked once, by the API's serializers, and
the services take the typed result. Reproduced: the service's own parser took non-canonical base64 (``AB==``, whose
stray bits the API refuses) and kept its own 1 MiB constant beside the setting, so the two doors disagreed.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.verification.service_world import World, digest_entry, inline
from verification.errors import ServiceError
from verification.evidence.models import Evidence
from verification.kernel.reasons import Reason
from verification.runs.models import Verification
from verification.runs.services.submit import verification_add_evidence, verification_submit
from verification.runs.submissions import Submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(signing_key: Any) -> World:
    world = World.build()
    world.contract(digest_entry())
    return world


def submit(world: World, body: Any) -> tuple[Verification, bool]:
    return verification_submit(
        actor=world.agent.actor, token=world.agent.token, task=world.task, body=body, idempotency_key=None
    )


def assert_refused(world: World, body: Any, reason: Reason, status: int) -> None:
    with pytest.raises(ServiceError) as exc:
        submit(world, body)
    assert (exc.value.reason, exc.value.http_status) == (reason, status)
    assert Verification.objects.count() == 0 and Evidence.objects.count() == 0


@pytest.mark.parametrize("spelling", ["AB==", "AAB=", "AA", "AA==\n", " AA=="])
def test_base64_is_canonical_only_through_every_door(world: World, spelling: str) -> None:
    assert_refused(world, {"evidence": [{"symbol": "notes", "content_base64": spelling}]}, Reason.BAD_BASE64, 400)


@override_settings(REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES=8)
def test_the_inline_limit_is_the_one_setting(world: World) -> None:
    assert_refused(world, {"evidence": [inline("notes", b"x" * 9)]}, Reason.PAYLOAD_TOO_LARGE, 413)
    verification, created = submit(world, {"evidence": [inline("notes", b"x" * 8)]})
    assert created and Evidence.objects.get().size == 8


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"evidence": [inline("notes", b"a", max_age_seconds=9007199254740991)]}, Reason.INVALID_REQUEST),
        ({"evidence": [inline("notes", b"a", collected_at="9999-12-31T23:59:59-12:00")]}, Reason.INVALID_REQUEST),
        ({"evidence": [{"symbol": "notes", "evidence_id": 7}]}, Reason.INVALID_REQUEST),
        ({"claims": [{"symbol": "notes", "observable": "evidence.present"}]}, Reason.INVALID_REQUEST),
        ({"claims": [{"symbol": "notes", "observable": "x", "expression": "y", "verdict": "PASS"}]},
         Reason.UNKNOWN_FIELD),
        ({"judgments": [{"criterion": "c", "outcome": "abstain"}, {"criterion": "c", "outcome": "abstain"}]},
         Reason.INVALID_REQUEST),
        (["not", "an", "object"], Reason.INVALID_REQUEST),
    ],
)
def test_the_service_refuses_what_the_api_refuses_with_the_same_code(world: World, body: Any, reason: Reason) -> None:
    assert_refused(world, body, reason, 400)


def test_the_api_hands_the_service_a_typed_submission(world: World) -> None:
    from verification.api.serializers.submissions import submission_from_body

    submission = submission_from_body({"evidence": [inline("notes", b"bytes", collected_at="2026-01-01T00:00:00Z")]})
    assert isinstance(submission, Submission)
    (binding,) = submission.bindings
    assert binding.content == b"bytes" and binding.collected_at is not None and binding.collected_at.tzinfo
    verification, created = submit(world, submission)
    assert created and verification.submission_hash == submission.submission_hash


def test_more_evidence_goes_through_the_same_layer(world: World) -> None:
    verification, _ = world.submit_and_run({"evidence": [inline("notes", b"not the notes")]})
    verification.refresh_from_db()
    with pytest.raises(ServiceError) as exc:
        verification_add_evidence(
            actor=world.agent.actor, token=world.agent.token, verification=verification,
            body={"evidence": [{"symbol": "notes", "content_base64": "AB=="}]},
        )
    assert exc.value.reason is Reason.BAD_BASE64
    assert Verification.objects.count() == 1

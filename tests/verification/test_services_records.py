"""Findings, finding events and the event feed are append-only, in code and in the database (SPEC §10).

Also: raising the same finding twice is a no-op, tasks and cycles, links, baselines and rubric registration.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, connection

from tests.conftest import owner_cursor
from tests.verification.service_world import NOTES, World, digest_entry, inline
from verification.db_guards import AppendOnlyError, installed_triggers
from verification.errors import ServiceError
from verification.evidence.models import Baseline
from verification.kernel.errors import RubricError
from verification.kernel.findings import Finding as KernelFinding
from verification.kernel.findings import FindingKind
from verification.kernel.reasons import Reason
from verification.reviews.models import Finding, FindingEvent
from verification.reviews.services.findings import finding_raise
from verification.runs.models import Event, Link, Rubric, TaskCycle
from verification.runs.selectors import current_cycle
from verification.runs.services.rubrics import rubric_register
from verification.runs.services.tasks import baseline_capture, baseline_secret, link_record, task_reopen

pytestmark = pytest.mark.django_db

#: The append-only tables of this block (all of them are in ``db_guards.APPEND_ONLY_TABLES``, the one registry).
APPEND_ONLY_RECORD_TABLES = ("verification_finding", "verification_findingevent", "verification_event")


@pytest.fixture
def world(signing_key: Any) -> World:
    return World.build()


@pytest.fixture
def finding(world: World) -> Finding:
    world.contract(digest_entry())
    verification = world.submit({"evidence": [inline("notes", NOTES)]})
    raised = finding_raise(
        finding=KernelFinding(kind=FindingKind.TAMPER, refs=("chain", str(verification.pk)), detail="test"),
        verification=verification,
    )
    assert raised is not None
    return raised


def test_every_record_table_has_its_database_guard() -> None:
    present = installed_triggers(connection)
    for table in APPEND_ONLY_RECORD_TABLES:
        expected = {f"{table}_append_only"} if connection.vendor == "postgresql" else {
            f"{table}_no_update",
            f"{table}_no_delete",
        }
        assert expected <= present, table


def test_findings_and_events_refuse_edits_in_code(finding: Finding) -> None:
    finding.detail = "edited"
    with pytest.raises(AppendOnlyError):
        finding.save()
    with pytest.raises(AppendOnlyError):
        finding.delete()
    with pytest.raises(AppendOnlyError):
        Event.objects.all().update(kind="verification.finished")
    with pytest.raises(AppendOnlyError):
        FindingEvent.objects.all().delete()
    assert Finding.objects.get(pk=finding.pk).detail == "test"


@pytest.mark.parametrize("table", APPEND_ONLY_RECORD_TABLES)
def test_findings_and_events_refuse_edits_in_the_database(finding: Finding, table: str) -> None:
    assert Event.objects.exists() and FindingEvent.objects.exists()
    for statement in (f'UPDATE "{table}" SET id = id', f'DELETE FROM "{table}"'):  # noqa: S608 - fixed names
        with pytest.raises(IntegrityError), owner_cursor() as cursor:  # the trigger, past the app role's grants
            cursor.execute(statement)
    assert Finding.objects.count() == 1 and FindingEvent.objects.count() == 1


def test_raising_the_same_finding_twice_is_a_no_op(finding: Finding) -> None:
    again = finding_raise(
        finding=KernelFinding(kind=FindingKind.TAMPER, refs=tuple(finding.refs), detail="again"),
    )
    assert again is None
    assert Finding.objects.count() == 1
    assert list(Event.objects.values_list("kind", flat=True)) == ["finding.raised"]
    assert FindingEvent.objects.get().action == "raised"


def test_reopening_starts_a_new_cycle(world: World) -> None:
    assert current_cycle(world.task) == 1
    cycle = task_reopen(actor=world.owner.actor, task=world.task)
    assert cycle.number == 2 and current_cycle(world.task) == 2
    assert list(TaskCycle.objects.filter(task=world.task).values_list("number", flat=True)) == [1, 2]


def test_links_are_reported_by_collectors_and_unknown_committers_stay_unnamed(world: World) -> None:
    link = link_record(
        actor=world.collector.actor, token=world.collector.token, task=world.task, commit_id="c0ffee1",
        committing_actor="someone-we-never-met",
    )
    assert (link.committing_actor, link.committing_actor_name, link.reported_boundary) == (
        None,
        "someone-we-never-met",
        "ctr-collector",
    )
    known = link_record(actor=world.collector.actor, task=world.task, commit_id="deadbee", committing_actor="agent-w")
    assert known.committing_actor == world.agent.actor
    with pytest.raises(ServiceError) as exc:
        link_record(actor=world.agent.actor, task=world.task, commit_id="bad", committing_actor="agent-w")
    assert exc.value.reason is Reason.PERMISSION_DENIED
    assert Link.objects.count() == 2


def test_a_baseline_carries_the_capture_tokens_hmac(world: World) -> None:
    baseline = baseline_capture(
        actor=world.collector.actor, token=world.collector.token, task=world.task, artifact_key="config",
        digest="sha256:" + "a" * 64,
    )
    assert baseline.capture_token.startswith("hmac-sha256:") and baseline.reporter_boundaries == ["ctr-collector"]
    assert len(baseline_secret()) >= 32
    with pytest.raises(ServiceError):
        baseline_capture(
            actor=world.collector.actor, token=world.collector.token, task=world.task, artifact_key="config",
            digest="md5:abc",
        )
    assert Baseline.objects.count() == 1


def test_a_token_of_another_actor_is_refused(world: World) -> None:
    with pytest.raises(ServiceError) as exc:
        baseline_capture(
            actor=world.collector.actor, token=world.agent.token, task=world.task, artifact_key="config",
            digest="sha256:" + "a" * 64,
        )
    assert exc.value.reason is Reason.PERMISSION_DENIED and exc.value.http_status == 403


def test_rubric_registration_is_idempotent_and_refuses_what_cannot_fail(world: World) -> None:
    doc = {"name": "r", "criteria": [digest_entry()]}
    first = rubric_register(actor=world.owner.actor, document=doc)
    assert rubric_register(actor=world.agent.actor, document=doc) == first
    assert first.witnesses[0]["outcome"] == "FAIL" and first.witnesses[0]["criterion_id"] == "notes-digest"
    with pytest.raises(RubricError) as exc:
        rubric_register(
            actor=world.owner.actor,
            document={"name": "r", "criteria": [{"id": "x", "kind": "digest", "observable": "evidence.present",
                                                 "expression": '(= notes "sha256:' + "a" * 64 + '")'}]},
        )
    assert exc.value.reason is Reason.OBLIGATION_NOT_FALSIFIABLE
    assert Rubric.objects.count() == 1


def test_the_baseline_secret_file_is_read_again_only_when_it_changed(settings: Any, tmp_path: Any) -> None:
    """Every run asks for the secret: the file is read once and then only looked at (``stat``); a rewritten file is
    read again, and a file that others may read is refused every time, read before or not."""
    import os

    settings.VAR_DIR = str(tmp_path)
    first = baseline_secret()
    path = tmp_path / "baseline_secret"
    assert path.read_text().strip().encode() == first and baseline_secret() == first
    replaced = tmp_path / "replacement"
    replaced.write_text("b" * 64)
    replaced.chmod(0o600)
    os.replace(replaced, path)  # a new file (another inode)
    assert baseline_secret() == b"b" * 64
    path.chmod(0o640)
    with pytest.raises(ServiceError) as exc:
        baseline_secret()
    assert exc.value.reason is Reason.INVALID_BASELINE_TOKEN
    path.chmod(0o600)
    path.write_text("c" * 8)  # rewritten in place: too short now
    with pytest.raises(ServiceError) as exc:
        baseline_secret()
    assert exc.value.reason is Reason.INVALID_BASELINE_TOKEN

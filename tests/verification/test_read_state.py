"""One derivation of the read-time state (SPEC §3, issue 13 item 1): every list filter agrees with the item read.

A PENDING check past its deadline reads as its expiry verdict. The API list (``verdict``, ``determination``,
``flagged``, ``status``), the history filters and the exports must return exactly the items whose single read says
so at that moment. The clock is an argument (or a monkeypatched ``timezone.now``); nothing sleeps.
"""

from __future__ import annotations

import contextlib
import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import Api, Cast, api, cast, contracted_task, make_caller  # noqa: F401 - fixtures
from tests.verification.service_world import NOTES, OTHER_DIGEST, World, digest_entry, imported_entry, inline
from verification.api.presenters import verification_view
from verification.errors import ServiceError
from verification.kernel.determination import Determination, Status
from verification.kernel.verdicts import Verdict
from verification.records.selectors_export import export_rows
from verification.records.selectors_history import history_queryset
from verification.runs.models import ReadPhase, Verification
from verification.runs.selectors import verification_list
from verification.runs.services.results import result_deliver
from verification.runs.services.run import verification_run

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content[:300]
    return [r["id"] for r in response.json()["results"]]


def test_an_expired_pending_is_listed_as_it_reads_issue_13_item_1(
    signing_key: Any, api: Api, cast: Cast, monkeypatch: pytest.MonkeyPatch  # noqa: F811 - the fixtures, by name
) -> None:
    """The reproduction: deadline 1 s, on_expiry FAIL; 1.6 s later the item reads FAIL / not_met / flagged."""
    clock = {"now": datetime.now(UTC)}
    monkeypatch.setattr("django.utils.timezone.now", lambda: clock["now"])
    rubric = {"name": "scan", "criteria": [{"id": "scan", "kind": "imported", "deadline_seconds": 1,
                                            "on_expiry": "FAIL"}]}
    task_id = contracted_task(api, cast, rubric)
    submitted = api.post("/v1/verifications", {"task": task_id, "wait_ms": 200}, caller=cast.agent)
    assert submitted.status_code == 202, submitted.content
    vid = submitted.json()["id"]
    if submitted.json()["status"] == "queued":  # the frozen clock: the bounded wait may return before the run
        verification_run(verification_id=vid, now=clock["now"])
    assert _ids(api.get("/v1/verifications", caller=cast.agent, task=task_id, verdict="PENDING")) == [vid]
    assert _ids(api.get("/v1/verifications", caller=cast.agent, task=task_id, flagged="true")) == []

    clock["now"] += timedelta(seconds=1.6)
    read = api.get(f"/v1/verifications/{vid}", caller=cast.agent).json()
    assert (read["status"], read["kernel_verdict"], read["determination"], read["flagged"]) == (
        "succeeded", "FAIL", "not_met", True)
    listed = {
        f"{name}={value}": _ids(api.get("/v1/verifications", caller=cast.agent, task=task_id, **{name: value}))
        for name, value in [("verdict", "PENDING"), ("verdict", "FAIL"), ("determination", "not_met"),
                            ("flagged", "true"), ("flagged", "false"), ("status", "running"),
                            ("status", "succeeded")]
    }
    assert listed == {
        "verdict=PENDING": [], "verdict=FAIL": [vid], "determination=not_met": [vid], "flagged=true": [vid],
        "flagged=false": [], "status=running": [], "status=succeeded": [vid],
    }


def test_a_bad_verdict_or_determination_filter_is_invalid_request(
    signing_key: Any, api: Api, cast: Cast  # noqa: F811 - the fixtures, by name
) -> None:
    from tests.api.conftest import assert_error

    assert_error(api.get("/v1/verifications", caller=cast.agent, verdict="MAYBE"), 400, "invalid-request")
    assert_error(api.get("/v1/verifications", caller=cast.agent, determination="sort_of"), 400, "invalid-request")


# --- history filters and exports --------------------------------------------------------------------------------------


@pytest.fixture
def expiring(signing_key: Any) -> tuple[World, Verification]:
    world = World.build()
    world.contract(digest_entry(), imported_entry(deadline_seconds=2, on_expiry="FAIL"))
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]}, now=T0)
    return world, verification


def test_history_filters_and_export_read_an_expired_pending_as_it_reads(
    expiring: tuple[World, Verification]
) -> None:
    _, verification = expiring
    before, after = T0 + timedelta(seconds=1), T0 + timedelta(seconds=3)
    view = verification_view(verification, now=after)
    assert (view["kernel_verdict"], view["determination"], view["flagged"]) == ("FAIL", "not_met", True)

    def found(filters: dict[str, str], now: datetime) -> bool:
        return history_queryset(filters=filters, now=now).filter(pk=verification.pk).exists()

    assert found({"verdict": "PENDING"}, before) and not found({"verdict": "PENDING"}, after)
    assert found({"verdict": "FAIL"}, after) and not found({"verdict": "FAIL"}, before)
    assert found({"determination": "not_met"}, after) and found({"determination": "none"}, before)
    assert found({"flagged": "true"}, after) and found({"flagged": "false"}, before)
    assert found({"reason": "pending-expired"}, after) and not found({"reason": "pending-expired"}, before)

    (row,) = list(export_rows(filters={}, now=after))
    from verification.records.selectors_export import EXPORT_COLUMNS

    exported = dict(zip(EXPORT_COLUMNS, row, strict=True))
    assert (exported["verdict"], exported["determination"], exported["flagged"], exported["pending_expired"],
            exported["reason"]) == ("FAIL", "not_met", True, True, "pending-expired")


def test_history_page_and_csv_show_the_read_verdict(
    expiring: tuple[World, Verification], admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("django.utils.timezone.now", lambda: T0 + timedelta(seconds=3))
    page = admin_client.get("/history/", {"verdict": "FAIL"})
    assert page.status_code == 200 and str(expiring[1].pk) in page.content.decode()
    exported = admin_client.get("/history/export.csv", {"flagged": "true"})
    assert exported.status_code == 200
    rows = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert [(r["verification_id"], r["verdict"], r["determination"]) for r in rows] == [
        (str(expiring[1].pk), "FAIL", "not_met")
    ]


# --- the property: every filtered list equals the per-item reads over random histories ----------------------------

_IMPORTED = st.fixed_dictionaries(
    {"deadline": st.integers(1, 4), "on_expiry": st.sampled_from(["FAIL", "UNKNOWN"]), "hard": st.booleans()}
)
_EVENT = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, 6), st.booleans()),
    st.tuples(st.just("deliver"), st.integers(0, 6), st.sampled_from(["PASS", "FAIL", "UNKNOWN"])),
    st.tuples(st.just("read"), st.integers(0, 6), st.just(None)),
)

FILTERS: list[tuple[str, str, str]] = (
    [("verdict", v.value, "kernel_verdict") for v in Verdict]
    + [("determination", d.value, "determination") for d in Determination]
    + [("flagged", "true", "flagged"), ("flagged", "false", "flagged")]
    + [("status", s.value, "status") for s in Status]
)


def _check_lists_against_reads(now: datetime) -> None:
    everyone = list(Verification.objects.all())
    for name, value, field in FILTERS:
        listed, _ = verification_list(actor=None, filters={name: value}, cursor=None, limit=200, now=now)
        expected = {
            v.pk for v in everyone
            if str(verification_view(v, now=now)[field]).lower() == value.lower()
        }
        assert {v.pk for v in listed} == expected, (name, value, now)
        history_name = {"status": None}.get(name, name)
        if history_name is not None:
            in_history = set(history_queryset(filters={name: value}, now=now).values_list("pk", flat=True))
            assert in_history == expected, ("history", name, value, now)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(imported=st.lists(_IMPORTED, min_size=1, max_size=3), events=st.lists(_EVENT, min_size=1, max_size=8))
def test_every_filtered_list_is_exactly_the_items_that_read_so(
    signing_key: Any, imported: list[dict[str, Any]], events: list[tuple[str, int, Any]]
) -> None:
    with transaction.atomic():
        world = World.build()
        entries = [
            imported_entry(f"ext-{i}", deadline_seconds=c["deadline"], on_expiry=c["on_expiry"], hard=c["hard"])
            for i, c in enumerate(imported)
        ]
        world.contract(digest_entry(), *entries)
        clock = T0
        submitted: list[Verification] = []
        for i, (kind, step, arg) in enumerate(events):
            clock += timedelta(milliseconds=700 * step)
            if kind == "submit":
                literal_ok = bool(arg)
                content = NOTES if literal_ok else OTHER_DIGEST.encode()
                verification, _ = world.submit_and_run({"evidence": [inline("notes", content)]}, now=clock)
                submitted.append(verification)
            elif kind == "deliver" and submitted:
                target = submitted[i % len(submitted)]
                # Refused when not pending any more or past its deadline: nothing written.
                with contextlib.suppress(ServiceError):
                    result_deliver(actor=world.external.actor, token=world.external.token, verification=target,
                                   criterion_id=f"ext-{i % len(imported)}", body={"verdict": arg}, now=clock)
            _check_lists_against_reads(clock)
        _check_lists_against_reads(clock + timedelta(seconds=5))
        transaction.set_rollback(True)


def test_phases_are_replaced_when_a_result_arrives(expiring: tuple[World, Verification]) -> None:
    world, verification = expiring
    assert list(ReadPhase.objects.filter(verification=verification).values_list("verdict", "determination")) == [
        ("FAIL", "not_met")
    ]
    result_deliver(actor=world.external.actor, token=world.external.token, verification=verification,
                   criterion_id="ext-scan", body={"verdict": "UNKNOWN"}, now=T0 + timedelta(seconds=1))
    assert not ReadPhase.objects.filter(verification=verification).exists()

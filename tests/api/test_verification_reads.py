"""Reading a verification through the API (issue 15): the row and its head receipt in one round trip, a page's heads
in one query.

``GET /v1/verifications/<id>``, a submission's answer and each wake-up of a ``wait_ms`` submission read the
verification (with its submitter and contract) and its head receipt together (``verification_and_head``: two
statements compiled once, pipelined on PostgreSQL); a page of ``GET /v1/verifications`` reads the heads of its rows in
one query (``heads_of``), not one per row. What is answered is what ``verification_view`` answers with its own reads.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.api.conftest import NOTES, Api, Cast, assert_error, b64, contracted_task
from verification.api.presenters import verification_view
from verification.runs.selectors import verification_and_head, verification_get
from verification.trust.models import Receipt
from verification.trust.selectors import head_of, heads_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]


@pytest.fixture
def ready(signing_key: Any, api: Api, cast: Cast) -> tuple[Api, Cast, str]:
    return api, cast, contracted_task(api, cast)


def _submit(api: Api, cast: Cast, task_id: str, content: bytes = NOTES) -> dict[str, Any]:
    body = {"task": task_id, "evidence": [{"symbol": "notes", "content_base64": b64(content)}], "wait_ms": 5000}
    submitted = api.post("/v1/verifications", body, caller=cast.agent)
    assert submitted.status_code == 200, submitted.content
    return dict(submitted.json())


def _comparable(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if k != "verdict"} | {"results": len(view["verdict"]["results"])}


def test_the_view_of_a_verification_is_what_its_own_reads_give(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready
    submitted = _submit(api, cast, task_id)
    got = api.get(f"/v1/verifications/{submitted['id']}", caller=cast.agent)
    assert got.status_code == 200
    verification = verification_get(submitted["id"])
    assert verification is not None
    expected = verification_view(verification, now=timezone.now())  # reads its head itself
    assert _comparable(got.json()) == _comparable(expected) and got.json()["status"] == "succeeded"
    assert got.json() == submitted  # the submission's answer is the same view


def test_the_row_and_its_head_are_read_together(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready
    submitted = _submit(api, cast, task_id)
    found = verification_and_head(submitted["id"])
    assert found is not None
    verification, head = found
    assert str(verification.pk) == submitted["id"] and verification.submitted_by.name == cast.agent.name
    expected = head_of(verification)
    assert head is not None and expected is not None and head.content_hash == expected.content_hash
    assert head.content_hash == submitted["head_receipt_id"]
    assert verification_and_head("not-a-uuid") is None
    assert verification_and_head("00000000-0000-0000-0000-000000000000") is None


@pytest.mark.postgres
def test_a_get_sends_the_row_and_head_reads_in_one_round_trip(
    ready: tuple[Api, Cast, str], round_trips: list[str]
) -> None:
    api, cast, task_id = ready
    submitted = _submit(api, cast, task_id)
    round_trips.clear()
    got = api.get(f"/v1/verifications/{submitted['id']}", caller=cast.agent)
    sent = list(round_trips)
    assert got.status_code == 200
    # Neither read goes on its own: both are in one pipeline (the token's reads are the request's own).
    alone = [s for s in sent if '"verification_verification"' in s or '"verification_receipt"' in s]
    assert alone == [] and "pipeline" in sent, sent


def test_an_unknown_verification_is_refused_not_found(ready: tuple[Api, Cast, str]) -> None:
    api, cast, _ = ready
    for unknown in ("00000000-0000-0000-0000-000000000000", "nope"):
        assert_error(api.get(f"/v1/verifications/{unknown}", caller=cast.agent), 404, "not-found")


def test_a_page_reads_its_heads_in_one_query_whatever_its_length(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready

    def listed() -> tuple[int, list[dict[str, Any]]]:
        with CaptureQueriesContext(connection) as captured:
            page = api.get("/v1/verifications", caller=cast.agent, limit=50)
        assert page.status_code == 200
        return len(captured.captured_queries), page.json()["results"]

    for _ in range(2):
        _submit(api, cast, task_id)
    few, results = listed()
    for n in range(4):
        _submit(api, cast, task_id, content=NOTES if n % 2 else b"other notes\n")  # met and not met
    many, more = listed()
    assert (len(results), len(more)) == (2, 6)
    assert many == few  # the same queries for 2 rows or 6: the heads in one, the rows with their rubric in one
    for row in more:  # each row as its own view gives it
        verification = verification_get(row["id"])
        assert verification is not None
        assert _comparable(row) == _comparable(verification_view(verification, now=timezone.now()))


def test_heads_of_gives_each_chain_its_last_receipt(ready: tuple[Api, Cast, str]) -> None:
    api, cast, task_id = ready
    first, second = _submit(api, cast, task_id), _submit(api, cast, task_id, content=b"other notes\n")
    heads = heads_of([first["id"], second["id"], "00000000-0000-0000-0000-000000000000"])
    assert {str(pk): head.content_hash for pk, head in heads.items()} == {
        first["id"]: first["head_receipt_id"],
        second["id"]: second["head_receipt_id"],
    }
    assert heads_of([]) == {}
    assert Receipt.objects.count() == 2

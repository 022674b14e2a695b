"""The one keyset cursor and the one CSV writer (issue 12): round trips, refusals, formula neutralisation."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verification import csv_export, cursors
from verification.errors import ServiceError
from verification.kernel.reasons import Reason

aware = st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-12)), timezone(timedelta(hours=14))]))


@given(rank=st.integers(-(2**62), 2**62), when=aware, pk=st.uuids())
def test_a_cursor_round_trips_its_values(rank: int, when: datetime, pk: uuid.UUID) -> None:
    assert cursors.decode(cursors.encode(rank, when, pk), int, datetime, uuid.UUID) == (rank, when, pk)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "!!!",
        "x" * 600,
        cursors.encode(1, uuid.uuid4()),  # wrong arity
        cursors.encode("not-a-number", datetime.now(UTC), uuid.uuid4()),
        cursors.encode(1, "2026-01-01T00:00:00", uuid.uuid4()),  # a naive time
        cursors.encode(1, datetime.now(UTC), "not-a-uuid"),
    ],
)
def test_a_cursor_not_issued_here_is_refused_with_invalid_request(raw: str) -> None:
    with pytest.raises(ServiceError) as refused:
        cursors.decode(raw, int, datetime, uuid.UUID)
    assert refused.value.reason is Reason.INVALID_REQUEST


def test_encoding_refuses_what_would_not_decode() -> None:
    with pytest.raises(ValueError, match="aware"):
        cursors.encode(datetime(2026, 1, 1))  # noqa: DTZ001 - the naive time under test
    with pytest.raises(ValueError, match=r"\|"):
        cursors.encode("a|b")


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_a_cell_that_a_spreadsheet_would_run_is_neutralised(start: str) -> None:
    assert csv_export.safe_cell(f"{start}HYPERLINK(1)") == f"'{start}HYPERLINK(1)"


def test_stream_writes_header_rows_and_chunks() -> None:
    rows = [(i, f"=cmd{i}") for i in range(5)]
    chunks = list(csv_export.stream(["n", "text"], rows, [csv_export.plain_cell, csv_export.safe_cell], chunk_rows=2))
    assert len(chunks) == 3  # 2 + 2 + (1, and the tail)
    parsed = list(csv.reader(io.StringIO(b"".join(chunks).decode("utf-8"))))
    assert parsed[0] == ["n", "text"]
    assert parsed[1:] == [[str(i), f"'=cmd{i}"] for i in range(5)]
    assert csv_export.safe_cell(None) == "" and csv_export.plain_cell(None) == ""

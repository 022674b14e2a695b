"""Exports of the verdict history and proof bundles (issue 6 §4).

**History exports** stream the filtered history (``selectors_history.history_queryset``, the same filters and order
as the history page) as CSV or JSON Lines, in constant memory: the rows come from the database through
``QuerySet.iterator(chunk_size=…)`` (a server-side cursor on PostgreSQL, ``fetchmany`` on SQLite) and leave as
encoded chunks, so nothing holds more than one chunk of rows. The permission is checked when the export is asked for,
before the first byte, not lazily inside the stream.

**A proof bundle** is ``{"proof": …, "jwks": …}``: a verification's chain as ``GET /v1/verifications/{id}/proof``
serves it, and for convenience the portal's published key set. It is never trusted by our own tools: ``manage.py
verify_proof --bundle`` and the README's script accept it only with the caller's pinned fingerprint and a head the
caller got from ``GET …/proof`` or their own log (SPEC §7, §12: a key obtained from the issuer proves nothing).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, Final

from verification import csv_export
from verification.errors import PermissionRefused
from verification.records.selectors_export import EXPORT_COLUMNS, export_rows
from verification.runs.models import Verification
from verification.trust.selectors import jwks_document, proof_for

HISTORY_PERMISSION: Final = "reviewportal.view_history"
#: Rows fetched from the database per round trip, and rows per chunk of output.
CHUNK_ROWS: Final = 2000


def _require_reader(user: Any) -> None:
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        raise PermissionRefused("only a signed-in user may export the history")
    if not user.has_perm(HISTORY_PERMISSION):
        raise PermissionRefused(f"{user.get_username()} may not read the history")


def _plain(value: Any) -> Any:
    """A JSON-ready value: times as ISO 8601, ids as strings."""
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _flag(value: Any) -> str:
    return "" if value is None else ("true" if value else "false")


def _time(value: Any) -> str:
    return "" if value is None else value.isoformat()


#: Free text a person or a client typed (a subject's title, a reason, a name, a rationale): ``csv_export.safe_cell``.
_FREE_TEXT: Final = frozenset({"subject", "flag_reason", "decided_by", "reason", "rationale"})
_FLAGS: Final = frozenset({"pending_expired", "flagged", "human_decided"})


def _converter(name: str) -> Callable[[Any], str]:
    if name in _FREE_TEXT:
        return csv_export.safe_cell
    if name in _FLAGS:
        return _flag
    return _time if name == "created_at" else csv_export.plain_cell


#: One converter per export column (the columns' types are fixed), so each cell costs one call.
_CSV_CELLS: Final = tuple(_converter(name) for name in EXPORT_COLUMNS)


def _rows(filters: Mapping[str, str], now: datetime) -> Iterator[tuple[Any, ...]]:
    return export_rows(filters=filters, now=now).iterator(chunk_size=CHUNK_ROWS)


def history_csv(*, user: Any, filters: Mapping[str, str], now: datetime) -> Iterator[bytes]:
    """The filtered history as CSV (UTF-8, a header row, ``EXPORT_COLUMNS``), streamed in chunks.

    Refusals (raised here, before streaming): ``permission-denied``; ``invalid-request`` for a bad filter.
    """
    _require_reader(user)
    rows = _rows(filters, now)  # builds (and so validates) the query now; runs it when the stream is read
    return csv_export.stream(EXPORT_COLUMNS, rows, _CSV_CELLS, chunk_rows=CHUNK_ROWS)


def history_jsonl(*, user: Any, filters: Mapping[str, str], now: datetime) -> Iterator[bytes]:
    """The filtered history as JSON Lines (one object per verification, keys ``EXPORT_COLUMNS``), streamed."""
    _require_reader(user)
    rows = _rows(filters, now)

    def stream() -> Iterator[bytes]:
        lines: list[str] = []
        for row in rows:
            lines.append(json.dumps(dict(zip(EXPORT_COLUMNS, map(_plain, row), strict=True)), ensure_ascii=False))
            if len(lines) >= CHUNK_ROWS:
                yield ("\n".join(lines) + "\n").encode("utf-8")
                lines = []
        if lines:
            yield ("\n".join(lines) + "\n").encode("utf-8")

    return stream()


def proof_bundle(*, user: Any, verification: Verification) -> dict[str, Any] | None:
    """``{"proof", "jwks"}`` for ``verification``; None while its chain is empty. See the module docstring: the
    JWKS is a convenience, never a trust root."""
    _require_reader(user)
    proof = proof_for(verification)
    if proof is None:
        return None
    return {"proof": proof, "jwks": jwks_document()}

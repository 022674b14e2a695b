"""CSV exports, one helper for every export (issue 12: the history export and the security log shared two copies).

Every cell a person typed (a title, a reason, a name, free detail) goes through ``safe_cell``: a spreadsheet runs a
cell that starts with ``= + - @``, a tab or a carriage return as a formula (OWASP "CSV injection"), so such text is
written with a leading ``'``. ``stream`` writes a header and rows in chunks of bytes, for a streaming response.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final

#: A spreadsheet runs a cell that starts with one of these as a formula.
FORMULA_START: Final = ("=", "+", "-", "@", "\t", "\r")
#: Rows per chunk of output.
CHUNK_ROWS: Final = 2000


def safe_cell(value: Any) -> str:
    """Free text as a cell a spreadsheet will not run: ``None`` as empty, a formula start behind a ``'``."""
    if value is None:
        return ""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def plain_cell(value: Any) -> str:
    """Ids, hashes, enums and numbers (never free text): ``None`` as empty."""
    return "" if value is None else str(value)


def stream(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    cells: Sequence[Callable[[Any], str]] | None = None,
    *,
    chunk_rows: int = CHUNK_ROWS,
) -> Iterator[bytes]:
    """UTF-8 CSV (CRLF lines): ``header``, then each row with ``cells[i]`` applied to column ``i`` (``safe_cell``
    for every column when ``cells`` is None), yielded every ``chunk_rows`` rows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    pending = 0
    for row in rows:
        if cells is None:
            writer.writerow([safe_cell(v) for v in row])
        else:
            writer.writerow([convert(v) for convert, v in zip(cells, row, strict=True)])
        pending += 1
        if pending >= chunk_rows:
            yield buffer.getvalue().encode("utf-8")
            buffer.seek(0)
            buffer.truncate()
            pending = 0
    yield buffer.getvalue().encode("utf-8")

"""One line of an append-only log kept outside the database: strict JSON, an object with exactly its fields.

The pin journal (``journal.py``) and the audit's checkpoint log (``checkpoint.py``) both read their lines here, so a
line either log accepts is parsed the one way (duplicate keys, non-canonical numbers, extra or missing fields refused).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from verification.kernel.canonical import loads_strict
from verification.kernel.errors import KernelError


def parse_fields_line(
    text: str, fields: Sequence[str], *, where: str, refuse: Callable[[str], KernelError]
) -> dict[str, Any]:
    """``text`` as a JSON object with exactly ``fields`` (in any order); ``refuse(detail)`` is raised otherwise.

    ``where`` names the line in the detail (e.g. ``"line 3"``). The values' forms are the caller's to check."""
    try:
        doc = loads_strict(text)
    except KernelError as exc:
        raise refuse(f"{where}: not strict JSON ({exc.reason.value})") from None
    if not isinstance(doc, dict) or sorted(doc) != sorted(fields):
        raise refuse(f"{where}: expected exactly the fields {tuple(fields)}")
    return doc

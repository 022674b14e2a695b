"""Web words on the web (issue 14): a page's filter or form problems in plain words, all of them at once, each beside
its field. The API keeps its codes and its one-refusal answers; the pages reuse the same checks (the selectors'),
run once per field, so every problem is found and none is defined twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verification.kernel.errors import KernelError


def field_problems(check: Callable[[Mapping[str, str]], Any], filters: Mapping[str, str]) -> dict[str, str]:
    """Run ``check`` (a selector that raises on the first bad filter) on each filter alone; ``{name: words}`` for
    every filter it refuses, in the order given."""
    problems: dict[str, str] = {}
    for name, value in filters.items():
        try:
            check({name: value})
        except KernelError as exc:
            problems[name] = _sentence(exc.detail or "this value is not accepted")
    return problems


def _sentence(detail: str) -> str:
    text = detail.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?", "!")) else ".")

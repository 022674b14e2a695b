"""The browser tests wait through locators: ``wait_for_function`` polls with ``eval``, which the portal's CSP blocks."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent


def test_no_browser_test_waits_with_an_evaluated_expression() -> None:
    uses = [
        f"{path.name}:{number}"
        for path in sorted(HERE.glob("*.py"))
        if path.name != Path(__file__).name
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"\.wait_for_function\(", line)
    ]
    assert uses == [], f"use tests.browser.conftest.expect on a locator instead: {uses}"

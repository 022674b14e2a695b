"""Real-browser tests (issue 5 §4): pytest-playwright driving Debian's Chromium against ``live_server``.

Chromium is the system's (``/usr/bin/chromium``, ``apt-get install chromium``; ``.ci/run`` installs it), launched
headless with the flags below; ``playwright install`` is never used. Every test here is marked ``browser`` (skipped
without Chromium and Playwright, a failure under REVIEWPORTAL_REQUIRE_SERVICES=1) and runs against a transactional
database: the live server's threads see what the test commits (the append-only guards let the flush between tests
clear receipts under ``settings.TESTING``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.portal.conftest import (  # noqa: F401 - fixtures shared with the portal tests
    PASSWORD,
    Queue,
    admin_user,
    ensure_roles,
    make_user,
    manager,
    queue,
    reviewer,
    reviewer2,
)
from tests.verification.conftest import signing_key, var_dir  # noqa: F401 - fixtures shared with the receipts tests

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"  # git-ignored


def expect(target: Any) -> Any:
    """Playwright's web-first assertion (it retries until the timeout), imported when used.

    Waits go through locators, never ``page.wait_for_function``: that one re-evaluates its expression with ``eval``
    on every poll after the first, which the portal's enforced CSP (``script-src 'self'``) blocks, so a condition not
    already true at the first check fails with an EvalError instead of waiting (CI, 2026-12-02).
    tests/browser/test_waits.py keeps it out.
    """
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Debian's Chromium, headless, never a downloaded browser."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "headless": True, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session", autouse=True)
def _orm_beside_playwright() -> Iterator[None]:
    """Playwright's sync API leaves an asyncio loop running in the main thread from the first browser test to the end
    of the session, so Django would take every later ORM call (the tests', the flush after each) for one made from
    async code. They are all synchronous: say so for the rest of the session, then restore the variable."""
    before = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    yield
    if before is None:
        os.environ.pop(ASYNC_UNSAFE, None)
    else:
        os.environ[ASYNC_UNSAFE] = before


@dataclass
class Console:
    """Console errors and uncaught page errors seen by the pages it watches."""

    errors: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> Any:
        page.on("console", lambda message: self.errors.append(f"console: {message.text}")
                if message.type == "error" else None)
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        return page


@pytest.fixture
def console() -> Iterator[Console]:
    """Every test that uses it ends with no console error (issue 5 §4)."""
    seen = Console()
    yield seen
    assert seen.errors == [], seen.errors


@pytest.fixture
def sign_in(live_server: Any) -> Callable[[Any, Any], Any]:
    def sign_in(page: Any, user: Any) -> Any:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("#id_username", user.get_username())
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/$"))
        return page

    return sign_in


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS

"""Smaller items of issue 11: the SQLite database file is private (0600) and ``make run`` warns about an open var
directory; ``/csp-report/`` escapes control characters before logging and is throttled per client address."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client

from tests.conftest import DATABASE_VARIABLES, REPO_ROOT

#: What a subprocess must not inherit from this run (the CI pass sets them).
_INHERITED_NOT = (*DATABASE_VARIABLES, "SECRET_KEY")


def _bootstrap(var: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED_NOT}
    env.update(REVIEWPORTAL_VAR_DIR=str(var), **extra)
    return subprocess.run(
        [sys.executable, "-m", "reviewportal.bootstrap"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        check=True, timeout=60,
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_bootstrap_creates_the_sqlite_database_file_private(tmp_path: Path) -> None:
    var = tmp_path / "var"
    result = _bootstrap(var)
    database = var / "reviewportal.sqlite3"
    assert _mode(database) == 0o600 and database.stat().st_size == 0
    assert f"created {database} (mode 0600)" in result.stdout
    assert "WARNING" not in result.stderr
    assert _mode(var) == 0o700


def test_bootstrap_narrows_an_existing_database_and_keeps_a_private_one(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir(mode=0o700)
    database = var / "reviewportal.sqlite3"
    database.write_bytes(b"")
    os.chmod(database, 0o644)
    assert "narrowed" in _bootstrap(var).stdout
    assert _mode(database) == 0o600
    assert "reviewportal.sqlite3" not in _bootstrap(var).stdout  # kept as it is: nothing to say


def test_bootstrap_creates_a_sqlite_url_file_private_and_leaves_postgres_alone(tmp_path: Path) -> None:
    var = tmp_path / "var"
    elsewhere = tmp_path / "db.sqlite3"
    _bootstrap(var, DATABASE_URL=f"sqlite:///{elsewhere}")
    assert _mode(elsewhere) == 0o600
    _bootstrap(tmp_path / "var2", DATABASE_URL="postgres://someone@127.0.0.1:5432/x")
    assert not (tmp_path / "var2" / "reviewportal.sqlite3").exists()


def test_bootstrap_warns_when_var_is_open_to_group_or_others(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir()
    os.chmod(var, 0o755)  # noqa: S103 - the open directory this test is about
    result = _bootstrap(var)
    assert f"WARNING: {var} has mode 0o755" in result.stderr
    assert f"chmod 700 {var}" in result.stderr


# --- /csp-report/ -------------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def _report(**fields: str) -> bytes:
    return json.dumps({"csp-report": fields}).encode()


def test_control_characters_in_a_report_are_escaped_before_logging(
    caplog: pytest.LogCaptureFixture, fresh_cache: None
) -> None:
    forged = "https://x/\n2026-01-01 00:00:00 WARNING reviewportal.auth: admin signed in\x1b[2J\u2028\x00"
    with caplog.at_level(logging.WARNING, logger="reviewportal.csp"):
        response = Client().post(
            "/csp-report/", _report(**{"document-uri": forged, "violated-directive": "img-src\r"}),
            content_type="application/csp-report",
        )
    assert response.status_code == 204
    [record] = [r for r in caplog.records if r.name == "reviewportal.csp"]
    line = record.getMessage()
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line and "\x00" not in line
    assert "img-src\\x0d blocked ? on https://x/\\x0a2026-01-01 00:00:00 WARNING" in line
    assert line.endswith("\\x1b[2J\\u2028\\x00")


def test_reports_beyond_the_per_address_rate_are_refused_429_and_not_logged(
    caplog: pytest.LogCaptureFixture, settings: object, fresh_cache: None
) -> None:
    settings.REVIEWPORTAL_CSP_REPORTS_PER_MINUTE = 3  # type: ignore[attr-defined]
    client = Client(REMOTE_ADDR="203.0.113.9")
    with caplog.at_level(logging.WARNING, logger="reviewportal.csp"):
        answers = [
            client.post("/csp-report/", _report(**{"blocked-uri": f"n{i}"}), content_type="application/csp-report")
            for i in range(5)
        ]
    assert [a.status_code for a in answers] == [204, 204, 204, 429, 429]
    assert answers[3]["Retry-After"] == "60"
    logged = [r.getMessage() for r in caplog.records if r.name == "reviewportal.csp"]
    assert [m.split(" blocked ")[1].split(" ")[0] for m in logged] == ["n0", "n1", "n2"]
    other = Client(REMOTE_ADDR="203.0.113.10").post("/csp-report/", _report(), content_type="application/csp-report")
    assert other.status_code == 204  # another address has its own allowance

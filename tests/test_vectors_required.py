"""Under CI a missing vectors folder (or SPEC.md) fails the vector tests; elsewhere they skip with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

VECTOR_TESTS = ("tests/kernel/test_merkle.py", "tests/kernel/test_registry.py")


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"CI", "REVIEWPORTAL_REQUIRE_SERVICES"}}
    clean.update(env, REVIEWPORTAL_VECTORS=str(tmp_path / "no-such-folder" / "vectors"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *VECTOR_TESTS],
        cwd=REPO_ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_missing_vectors_fail_under_ci(tmp_path: Path) -> None:
    result = _run(tmp_path, CI="true")
    assert result.returncode == 1, result.stdout[-2000:]
    assert "a missing folder is a failure" in result.stdout
    assert " skipped" not in result.stdout.splitlines()[-1]


def test_missing_vectors_skip_with_the_reason_elsewhere(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "public test vectors not found" in result.stdout
    assert " skipped" in result.stdout.splitlines()[-1]

"""The structural gate (SPEC §9): it passes on the real tree, and it can fail.

Each gate run builds the import graph once (well under a second); the copies live in tmp_path.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GATE = REPO_ROOT / "scripts" / "structural_gate.py"
FLOOR_FILE = REPO_ROOT / "scripts" / "structural_gate_floor.txt"
HARD_GATE = "hard-gate decision path cannot reach the semantic scorer"
FRAMEWORK_FREE = "kernel is framework-free"

pytestmark = pytest.mark.slow


def run_gate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GATE), *args], capture_output=True, text=True, timeout=120, check=False)


def analysed(output: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith("Analyzed "))
    return int(line.split()[1])


@pytest.fixture(scope="module")
def real_run() -> subprocess.CompletedProcess[str]:
    return run_gate()


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """A scratch copy of both root packages (import-linter needs every root package present)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("verification", "reviewportal"):
        shutil.copytree(REPO_ROOT / package, tmp_path / package, ignore=ignore)
    return tmp_path


def test_gate_passes_on_the_real_tree(real_run: subprocess.CompletedProcess[str]) -> None:
    assert real_run.returncode == 0, real_run.stdout + real_run.stderr
    assert f"{FRAMEWORK_FREE} KEPT" in real_run.stdout
    assert f"{HARD_GATE} KEPT" in real_run.stdout
    assert "structural gate: ok" in real_run.stdout


def test_analysed_count_is_at_least_the_recorded_floor(real_run: subprocess.CompletedProcess[str]) -> None:
    floor = int(FLOOR_FILE.read_text().strip())
    assert floor > 0
    assert analysed(real_run.stdout) >= floor


def test_planted_semantic_import_is_refused(tree_copy: Path) -> None:
    kernel = tree_copy / "verification" / "kernel"
    semantic = kernel / "semantic.py"
    if not semantic.exists():
        semantic.write_text('"""Stand-in for the semantic scorer."""\n')
    verdicts = kernel / "verdicts.py"
    verdicts.write_text(verdicts.read_text() + "\nimport verification.kernel.semantic  # planted by the gate test\n")

    proc = run_gate("--root", str(tree_copy))

    assert proc.returncode == 1, proc.stdout
    assert f"{HARD_GATE} BROKEN" in proc.stdout
    assert f"structural gate: REFUSED: contract broken: {HARD_GATE}" in proc.stdout
    assert "verification.kernel.verdicts -> verification.kernel.semantic" in proc.stdout


def test_planted_django_import_is_refused(tree_copy: Path) -> None:
    digests = tree_copy / "verification" / "kernel" / "digests.py"
    digests.write_text(digests.read_text() + "\nimport django.db  # planted by the gate test\n")

    proc = run_gate("--root", str(tree_copy))

    assert proc.returncode == 1, proc.stdout
    assert f"{FRAMEWORK_FREE} BROKEN" in proc.stdout
    assert f"contract broken: {FRAMEWORK_FREE}" in proc.stdout


def test_a_shrunken_tree_is_refused_by_the_floor(
    tree_copy: Path, tmp_path: Path, real_run: subprocess.CompletedProcess[str]
) -> None:
    floor = tmp_path / "floor.txt"
    floor.write_text(f"{analysed(real_run.stdout)}\n")  # the real tree's count: the copy starts exactly at the floor
    assert run_gate("--root", str(tree_copy), "--floor", str(floor)).returncode == 0

    kernel = tree_copy / "verification" / "kernel"
    keep = {"__init__.py", "verdicts.py", "reasons.py", "errors.py"}
    removed = [path for path in kernel.glob("*.py") if path.name not in keep]
    assert removed, "nothing to remove: the kernel has only its core modules"
    for path in removed:
        path.unlink()

    proc = run_gate("--root", str(tree_copy), "--floor", str(floor))

    assert proc.returncode == 1, proc.stdout
    assert "below the recorded floor" in proc.stdout
    assert "contract broken" not in proc.stdout  # refused for the count alone


def test_write_floor_never_lowers_it(tree_copy: Path, tmp_path: Path) -> None:
    floor = tmp_path / "floor.txt"
    floor.write_text("100000\n")
    proc = run_gate("--root", str(tree_copy), "--floor", str(floor), "--write-floor")
    assert proc.returncode == 1
    assert floor.read_text() == "100000\n"

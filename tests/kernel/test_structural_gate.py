"""The structural gate (SPEC §9): it passes on the real tree, and it can fail.

Each gate run builds the import graph once (well under a second); the copies live in tmp_path.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GATE = REPO_ROOT / "scripts" / "structural_gate.py"
FLOOR_FILE = REPO_ROOT / "scripts" / "structural_gate_floor.txt"
HARD_GATE = "hard-gate decision path cannot reach the semantic scorer"
FRAMEWORK_FREE = "kernel is framework-free"

pytestmark = pytest.mark.slow

#: Every contract in pyproject.toml, id -> name.
CONTRACTS = {
    contract["id"]: contract["name"]
    for contract in tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
}
STATE = re.compile(r"^(?P<name>.+?) (?P<state>KEPT|BROKEN)(?: \(\d+ ignored imports?\))?$", re.MULTILINE)


def states(output: str) -> dict[str, str]:
    return {match["name"]: match["state"] for match in STATE.finditer(output)}


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
    assert states(real_run.stdout) == dict.fromkeys(CONTRACTS.values(), "KEPT")
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


def _plant_module(tree: Path, dotted: str, source: str) -> None:
    """A new module in the copy (robust to the splitting of existing ones) holding one forbidden import."""
    path = tree.joinpath(*dotted.split(".")).with_suffix(".py")
    assert path.parent.joinpath("__init__.py").is_file(), f"{dotted}: no such package in the copy"
    path.write_text(f'"""Planted by the gate test."""\n\n{source}  # planted by the gate test\n')


def _append(tree: Path, dotted: str, source: str) -> None:
    """Append one forbidden import to an existing module (or package ``__init__``) of the copy."""
    path = tree.joinpath(*dotted.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    path.write_text(path.read_text() + f"\n{source}  # planted by the gate test\n")


#: contract id -> (plant, module, the forbidden import): each breaks that contract and no other.
PLANTS = {
    "layers": (_plant_module, "verification.records.gate_probe", "import verification.api"),
    "models-no-services": (_append, "verification.trust.models", "import verification.trust.services"),
    "feature-actors": (_plant_module, "verification.actors.gate_probe", "import verification.runs.models"),
    "feature-runs": (_plant_module, "verification.runs.gate_probe", "import verification.records"),
    "feature-evidence": (_plant_module, "verification.evidence.gate_probe", "import verification.reviews"),
    "feature-trust": (_plant_module, "verification.trust.gate_probe", "import verification.reviews.models"),
    "feature-reviews": (_plant_module, "verification.reviews.gate_probe", "import verification.records"),
}


def test_every_contract_has_a_planted_failure() -> None:
    assert set(CONTRACTS) - set(PLANTS) == {"kernel-framework-free", "hard-gate-no-semantic"}  # tested above


@pytest.mark.parametrize("contract_id", sorted(PLANTS))
def test_planted_forbidden_import_breaks_its_contract(contract_id: str, tree_copy: Path) -> None:
    plant, module, source = PLANTS[contract_id]
    plant(tree_copy, module, source)

    proc = run_gate("--root", str(tree_copy))

    name = CONTRACTS[contract_id]
    assert proc.returncode == 1, proc.stdout
    assert {n for n, state in states(proc.stdout).items() if state == "BROKEN"} == {name}, proc.stdout
    assert f"structural gate: REFUSED: contract broken: {name}" in proc.stdout
    assert module in proc.stdout


def test_the_layers_refuse_shared_infrastructure_importing_a_feature(tree_copy: Path) -> None:
    _append(tree_copy, "verification.cursors", "import verification.runs")

    proc = run_gate("--root", str(tree_copy))

    assert proc.returncode == 1, proc.stdout
    assert states(proc.stdout)[CONTRACTS["layers"]] == "BROKEN"
    assert "verification.cursors -> verification.runs" in proc.stdout


def _gate_module():
    spec = importlib.util.spec_from_file_location("structural_gate", GATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_wildcard_module_expressions_exist_when_they_match(tree_copy: Path) -> None:
    gate = _gate_module()
    assert gate.module_exists(tree_copy, "verification.*.models")
    assert gate.module_exists(tree_copy, "verification.**.services")
    assert not gate.module_exists(tree_copy, "verification.*.no_such_module")
    assert gate.module_exists(tree_copy, "verification.*")
    config = {
        "root_packages": ["verification", "reviewportal"],
        "contracts": [
            {
                "id": "nothing",
                "name": "matches nothing",
                "type": "forbidden",
                "source_modules": ["verification.*.no_such_module"],
                "forbidden_modules": ["verification.api"],
            }
        ],
    }
    _, warnings, problems = gate.effective_config(config, tree_copy)
    assert warnings == [
        "matches nothing: verification.*.no_such_module (source_modules) does not exist yet; not checked"
    ]
    assert problems == ["matches nothing: none of its source modules exist, so it would check nothing"]

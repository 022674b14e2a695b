#!/usr/bin/env python
"""The structural gate (SPEC §9): import-linter's contracts, plus a floor on how much it analysed.

Reads ``[tool.importlinter]`` from pyproject.toml, drops the internal modules a forbidden contract names that do not
exist yet (with a warning: import-linter refuses unknown modules), runs ``lint-imports`` over the package tree, and
refuses (exit 1) when a contract is broken or when the number of files analysed is below the floor recorded in
``scripts/structural_gate_floor.txt``: a gate that silently analyses less is no gate. Raise the floor as modules are
added (``--write-floor`` records the current count; it never lowers it).

Usage: structural_gate.py [--root DIR] [--config FILE] [--floor FILE] [--write-floor]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FLOOR = Path(__file__).resolve().with_name("structural_gate_floor.txt")

ANALYSED = re.compile(r"Analyzed (\d+) files, (\d+) dependencies")
#: "name KEPT", "name BROKEN", or with the ignore count lint-imports appends: "name KEPT (2 ignored imports)".
CONTRACT_LINE = re.compile(r"^(?P<name>.+?) (?P<state>KEPT|BROKEN)(?: \(\d+ ignored imports?\))?\s*$")


@dataclass
class GateResult:
    ok: bool
    analysed: int | None
    broken: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    output: str = ""


def module_exists(root: Path, dotted: str) -> bool:
    """Whether ``dotted`` names a module or package under ``root``; a wildcard expression (``*`` one name, ``**``
    one or more) exists when it matches at least one."""
    if "*" in dotted:
        pattern = re.compile(
            r"\.".join(
                r"[^.]+(?:\.[^.]+)*" if part == "**" else re.escape(part).replace(r"\*", "[^.]+")
                for part in dotted.split(".")
            )
        )
        return any(pattern.fullmatch(name) for name in _module_names(root, dotted.split(".", 1)[0]))
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _module_names(root: Path, package: str) -> Iterable[str]:
    for path in (root / package).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_internal(dotted: str, root_packages: Iterable[str]) -> bool:
    return any(dotted == pkg or dotted.startswith(pkg + ".") for pkg in root_packages)


def _ini_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list | tuple):
        return "".join(f"\n    {item}" for item in value)
    return str(value)


def effective_config(config: dict[str, object], root: Path) -> tuple[str, list[str], list[str]]:
    """The INI text lint-imports will run, with warnings (modules dropped) and problems (contracts left empty)."""
    options = dict(config)
    contracts = options.pop("contracts", [])
    root_packages = options.get("root_packages") or [options.get("root_package")]
    if not isinstance(contracts, list) or not isinstance(root_packages, list) or not all(root_packages):
        raise SystemExit("structural gate: [tool.importlinter] needs root_packages and a list of contracts")
    warnings: list[str] = []
    problems: list[str] = []
    sections = ["[importlinter]", *(f"{key} = {_ini_value(value)}" for key, value in options.items()), ""]
    for index, contract in enumerate(contracts):
        contract = dict(contract)
        contract_id = str(contract.pop("id", f"contract-{index}"))
        name = str(contract.get("name", contract_id))
        if contract.get("type") == "forbidden":
            for key in ("source_modules", "forbidden_modules"):
                present = []
                for module in contract.get(key, []):
                    if _is_internal(module, root_packages) and not module_exists(root, module):
                        warnings.append(f"{name}: {module} ({key}) does not exist yet; not checked")
                    else:
                        present.append(module)
                contract[key] = present
            if not contract["source_modules"]:
                problems.append(f"{name}: none of its source modules exist, so it would check nothing")
                continue
            if not contract["forbidden_modules"]:
                warnings.append(f"{name}: none of its forbidden modules exist yet; nothing to forbid")
                continue
        sections.append(f"[importlinter:contract:{contract_id}]")
        sections.extend(f"{key} = {_ini_value(value)}" for key, value in contract.items())
        sections.append("")
    return "\n".join(sections), warnings, problems


def lint_imports_command() -> list[str]:
    beside = Path(sys.executable).with_name("lint-imports")
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    if found is None:
        raise SystemExit("structural gate: lint-imports not found (pip install -r requirements-dev.txt)")
    return [found]


def run_gate(root: Path, config_file: Path, floor: int | None) -> GateResult:
    with config_file.open("rb") as handle:
        config = tomllib.load(handle).get("tool", {}).get("importlinter")
    if not config:
        return GateResult(ok=False, analysed=None, problems=[f"no [tool.importlinter] section in {config_file}"])
    ini, warnings, problems = effective_config(config, root)
    with tempfile.TemporaryDirectory(prefix="structural-gate-") as tmp:
        ini_path = Path(tmp) / "importlinter.ini"
        ini_path.write_text(ini, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200", "NO_COLOR": "1"}
        proc = subprocess.run(
            [*lint_imports_command(), "--no-cache", "--no-logo", str(ini_path)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    output = proc.stdout + proc.stderr
    match = ANALYSED.search(output)
    analysed = int(match.group(1)) if match else None
    kept, broken = [], []
    for line in output.splitlines():
        contract = CONTRACT_LINE.match(line.strip())
        if contract:
            (kept if contract.group("state") == "KEPT" else broken).append(contract.group("name"))
    if proc.returncode != 0 and not broken:
        problems.append(f"lint-imports failed (exit {proc.returncode})")
    checked = ini.count("[importlinter:contract:")
    if proc.returncode == 0 and len(kept) + len(broken) != checked:
        problems.append(f"read {len(kept) + len(broken)} contract results, expected {checked}")
    if analysed is None:
        problems.append("could not read how many files lint-imports analysed")
    elif floor is not None and analysed < floor:
        problems.append(f"analysed {analysed} files, below the recorded floor of {floor}")
    ok = proc.returncode == 0 and not broken and not problems
    return GateResult(ok, analysed, broken, kept, warnings, problems, output)


def read_floor(path: Path) -> int:
    text = path.read_text(encoding="utf-8").strip()
    if not text.isdigit():
        raise SystemExit(f"structural gate: {path} must hold one number, not {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="directory holding the packages to check")
    parser.add_argument("--config", type=Path, default=REPO_ROOT / "pyproject.toml", help="pyproject.toml to read")
    parser.add_argument("--floor", type=Path, default=DEFAULT_FLOOR, help="file holding the minimum file count")
    parser.add_argument("--write-floor", action="store_true", help="record the current count as the floor (raise only)")
    args = parser.parse_args(argv)

    root = args.root.resolve()
    floor = read_floor(args.floor) if args.floor.exists() else None
    result = run_gate(root, args.config.resolve(), None if args.write_floor else floor)
    print(result.output.rstrip())
    for warning in result.warnings:
        print(f"structural gate: warning: {warning}")

    if args.write_floor and result.analysed is not None and not result.broken and not result.problems:
        if floor is not None and result.analysed < floor:
            print(f"structural gate: refused to lower the floor from {floor} to {result.analysed}; edit it by hand")
            return 1
        args.floor.write_text(f"{result.analysed}\n", encoding="utf-8")
        print(f"structural gate: floor recorded in {args.floor}: {result.analysed} (was {floor})")
        return 0

    if floor is None and not args.write_floor:
        result.problems.append(f"no floor recorded at {args.floor} (run with --write-floor)")
        result.ok = False
    if result.ok:
        kept = len(result.kept)
        print(f"structural gate: ok: {kept} contracts kept, {result.analysed} files analysed (floor {floor})")
        return 0
    reasons = [f"contract broken: {name}" for name in result.broken] + result.problems
    print("structural gate: REFUSED: " + "; ".join(reasons))
    return 1


if __name__ == "__main__":
    sys.exit(main())

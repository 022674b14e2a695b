"""The kernel is pure: it imports without any framework, and it never reads the clock (SPEC §1, STYLE.md 1-2)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNEL_DIR = REPO_ROOT / "verification" / "kernel"

BLOCKED = ("django", "psycopg", "psycopg2", "celery", "kombu", "rest_framework", "redis")

# A fresh interpreter whose import system refuses the frameworks, then imports every kernel module.
_IMPORT_ALL = textwrap.dedent(
    """
    import importlib, importlib.abc, pkgutil, sys

    BLOCKED = {blocked!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"kernel purity test: {{name}} is not allowed here")
            return None

    sys.meta_path.insert(0, Refuse())
    import verification.kernel as kernel
    names = sorted(m.name for m in pkgutil.walk_packages(kernel.__path__, "verification.kernel."))
    for name in names:
        importlib.import_module(name)
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not leaked, leaked
    print(len(names), "modules:", " ".join(names))
    """
).format(blocked=BLOCKED)


@pytest.mark.slow
def test_every_kernel_module_imports_without_frameworks() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    count = int(proc.stdout.split()[0])
    on_disk = {p.stem for p in KERNEL_DIR.glob("*.py") if p.stem != "__init__"}
    assert count >= len(on_disk)
    for stem in on_disk:
        assert f"verification.kernel.{stem}" in proc.stdout


def test_the_blocker_really_blocks() -> None:
    code = _IMPORT_ALL.split("import verification.kernel")[0] + "import django\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "django is not allowed here" in proc.stderr


# --- the clock is an argument ---------------------------------------------------------------------------------------

CLOCK_READS = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
    }
)


def clock_reads(source: str) -> list[tuple[int, str]]:
    """(line, qualified name) of every reference to a clock-reading function, through any import alias."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:  # import a.b as c: c is a.b
                    aliases[alias.asname] = alias.name
                else:  # import a.b: binds a
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def qualified(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = qualified(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute):
            name = qualified(node)
            if name in CLOCK_READS:
                found.append((node.lineno, name))
    return sorted(set(found))


def test_no_kernel_module_reads_the_clock() -> None:
    offenders = {
        path.name: reads for path in sorted(KERNEL_DIR.rglob("*.py")) if (reads := clock_reads(path.read_text()))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import datetime\ndatetime.datetime.now()", "datetime.datetime.now"),
        ("from datetime import datetime\ndatetime.now(tz=None)", "datetime.datetime.now"),
        ("from datetime import datetime as dt\nx = dt.utcnow", "datetime.datetime.utcnow"),
        ("from datetime import date\ndate.today()", "datetime.date.today"),
        ("import time\ntime.time()", "time.time"),
        ("import time as t\nt.monotonic()", "time.monotonic"),
        ("from time import perf_counter\nperf_counter()", "time.perf_counter"),
        (
            "from dataclasses import field\nfrom datetime import datetime\nf = field(default_factory=datetime.now)",
            "datetime.datetime.now",
        ),
    ],
)
def test_the_clock_scan_catches_each_spelling(source: str, expected: str) -> None:
    assert [name for _, name in clock_reads(source)] == [expected]


def test_the_clock_scan_allows_clock_free_time_handling() -> None:
    source = (
        "from datetime import datetime, timedelta, timezone\n"
        "def expired(deadline: datetime, now: datetime) -> bool:\n"
        "    return now >= deadline + timedelta(seconds=1)\n"
        "EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)\n"
        "datetime.fromisoformat('2026-01-01T00:00:00+00:00')\n"
    )
    assert clock_reads(source) == []

#!/usr/bin/env python
"""Run every ``bench/bench_*.py`` module's ``main()`` and print what it returns (``make bench``).

Each module runs in its own interpreter: a benchmark configures Django (settings, a scratch database) for itself,
and one process can hold only one configuration. ``python bench/run.py api receipts`` runs the named ones only.
A module that needs a service it cannot reach returns a "skipped: ..." line; only a crash fails the run.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent


def run_one(path: Path) -> int:
    """Load ``path`` and print what its ``main()`` returns (in the child interpreter)."""
    sys.path.insert(0, str(REPO_ROOT))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        print(f"bench: {path.name}: cannot be loaded")
        return 1
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    entry = getattr(module, "main", None)
    if entry is None:
        print(f"bench: {path.name}: has no main()")
        return 1
    result = entry()
    if result is not None:
        print(result)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"] and len(argv) == 2:
        return run_one(Path(argv[1]))
    modules = sorted(BENCH_DIR.glob("bench_*.py"))
    if argv:
        wanted = {name.removeprefix("bench_").removesuffix(".py") for name in argv}
        modules = [m for m in modules if m.stem.removeprefix("bench_") in wanted]
    if not modules:
        print("bench: no benchmarks yet (add bench/bench_<topic>.py with a main())")
        return 0
    failed = []
    for path in modules:
        print(f"== {path.name} ==", flush=True)
        started = time.perf_counter()
        argv = [sys.executable, __file__, "--one", str(path)]
        code = subprocess.run(argv, cwd=REPO_ROOT, check=False).returncode  # noqa: S603 - our own script
        if code != 0:
            print(f"bench: {path.name} failed (exit {code})")
            failed.append(path.name)
        print(f"({time.perf_counter() - started:.2f} s)", flush=True)
    if failed:
        print(f"bench: failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

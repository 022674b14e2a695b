#!/usr/bin/env python
"""Run every ``bench/bench_*.py`` module's ``main()`` and print what it returns (``make bench``)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))


def main() -> int:
    modules = sorted(BENCH_DIR.glob("bench_*.py"))
    if not modules:
        print("bench: no benchmarks yet (add bench/bench_<topic>.py with a main())")
        return 0
    failed = 0
    for path in modules:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            print(f"bench: {path.name}: cannot be loaded")
            failed += 1
            continue
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        entry = getattr(module, "main", None)
        if entry is None:
            print(f"bench: {path.name}: has no main()")
            failed += 1
            continue
        print(f"== {path.name} ==")
        started = time.perf_counter()
        result = entry()
        if result is not None:
            print(result)
        print(f"({time.perf_counter() - started:.2f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

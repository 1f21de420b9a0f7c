"""`stateward bench NAME [--quick] [--json]`: run one of the benchmarks in `bench/`.

The benchmarks live beside the package in a source checkout (they compare against
third-party baselines that are dev dependencies), so this looks for `bench/NAME.py`
from the current directory upwards and runs it with the same interpreter.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def find_bench(name: str, start: Path | None = None) -> Path | None:
    """The path of `bench/<name>.py` in the current directory or a parent, or None."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "bench" / f"{name}.py"
        if candidate.is_file():
            return candidate
    return None


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as a child process and return its exit code."""
    script = find_bench(args.name)
    if script is None:
        print(f"bench/{args.name}.py not found (run from a source checkout)", file=sys.stderr)
        return 2
    flags = [f for f, on in (("--quick", args.quick), ("--json", args.json)) if on]
    return subprocess.call([sys.executable, str(script), *flags])

"""Fixtures for the observability tests: the real API stack of tests/api/graph_stack.py
(`open_stack`) is importable from here."""

from __future__ import annotations

import sys
from pathlib import Path

_API = Path(__file__).resolve().parent.parent / "api"
if str(_API) not in sys.path:
    sys.path.insert(0, str(_API))

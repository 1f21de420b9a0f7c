"""The counter workflow the large-data tests share: one open state, a `tick` that
increments `n` (the rest of the data untouched), and whatever other actions a test adds."""

from __future__ import annotations

from typing import Any


def counter_workflow(path: str, **actions: dict[str, Any]) -> dict[str, Any]:
    """A DSL v2 counter at `path` with `tick` plus `actions`."""
    return {
        "$version": "2.0",
        "$path": path,
        "initial": "open",
        "states": {"open": {"label": "Open"}, "done": {"label": "Done", "terminal": True}},
        "actions": {
            "tick": {"label": "Tick", "from": "open", "mutate": {"$increment": {"n": 1}}},
            **actions,
        },
    }

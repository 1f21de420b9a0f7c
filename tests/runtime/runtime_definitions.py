"""Workflow definitions shared by the runtime tests (imported by name, not via conftest)."""

from __future__ import annotations

from typing import Any

REVIEW: dict[str, Any] = {
    "$version": "2.0",
    "$path": "case/review/kyc-review",
    "initial": "open",
    "states": {
        "open": {"label": "Open"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {"close": {"from": "open", "to": "done"}},
}

ONBOARDING: dict[str, Any] = {
    "$version": "2.0",
    "$path": "customer/retail/retail-customer",
    "$description": "Retail customer onboarding",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "review": {"label": "Review", "assign": "analyst", "sla_seconds": 86400},
        "approved": {"label": "Approved", "terminal": True},
        "rejected": {"label": "Rejected", "terminal": True},
    },
    "actions": {
        "create": {
            "role": "admin,analyst",
            "from": "intake",
            "to": "review",
            "mutate": {"$set": {"name": "input.name"}},
        },
        "note": {"from": "review", "mutate": {"$increment": {"notes": 1}}},
        "approve": {
            "role": "admin,manager",
            "from": "review",
            "to": "approved",
            "spawn": [{"workflow": "case/review/kyc-review", "as": "reviews"}],
        },
        "reject": {"role": "admin", "from": "review", "to": "rejected"},
    },
}


async def allow_onboarding_spawns(rt: object, operator: object) -> None:
    """The `allow_spawn` event with which `case/review` lets `customer/retail` (where
    ONBOARDING lives) spawn its reviews: cross-namespace spawns are granted, not assumed."""
    from stateward.runtime.access.references import allow_spawn

    await allow_spawn(rt, operator, "case/review", "customer/retail")  # type: ignore[arg-type]

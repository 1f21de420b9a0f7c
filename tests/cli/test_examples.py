"""The example workflows (examples/<$path>.json) use every DSL v2 feature between them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stateward.domain.actions import ACTION_KEYS
from stateward.domain.branching import OPS
from stateward.domain.definition import load_definition
from stateward.domain.forms import FIELD_TYPES
from stateward.domain.model import AUDIENCES, MODES
from stateward.domain.states import STATE_KEYS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REQUIRED = {
    "customer/retail/retail-customer",
    "case/review/kyc-review",
    "support/desk/ticket",
    "intake/public/contact-form",
}


def sources() -> dict[str, dict[str, Any]]:
    found = {}
    for file in sorted(EXAMPLES.rglob("*.json")):
        source = json.loads(file.read_text("utf-8"))
        assert file.relative_to(EXAMPLES).with_suffix("").as_posix() == source["$path"]
        found[source["$path"]] = source
    return found


def used(examples: dict[str, dict[str, Any]]) -> dict[str, set[Any]]:
    """Every feature the examples use, by kind."""
    seen: dict[str, set[Any]] = {
        k: set()
        for k in (
            "state",
            "action",
            "audience",
            "mode",
            "form",
            "op",
            "target",
            "mutate",
            "item",
            "expr",
            "from",
            "hook",
        )
    }
    for source in examples.values():
        for state in source["states"].values():
            seen["state"] |= set(state)
            seen["audience"].add(state.get("audience", "team"))
            seen["mode"].add(state.get("mode"))
            seen["hook"].add("qualified" if "/" in state.get("hook", "") else "bare")
            for spec in state.get("form", {}).get("fields", {}).values():
                seen["form"] |= {spec["type"], *spec}
            for rule in state.get("branch_rules", []):
                seen["op"].add(rule.get("op", "*"))
                target = rule.get("target", rule.get("target_stage"))
                seen["target"].add(
                    "ordinal"
                    if isinstance(target, int)
                    else "folded"
                    if target not in source["states"]
                    else "exact"
                )
        for action in source["actions"].values():
            seen["action"] |= set(action)
            seen["from"].add(type(action.get("from")).__name__)
            seen["mutate"] |= set(action.get("mutate", {}))
            for kind in ("spawn", "schedule", "unschedule"):
                for item in action.get(kind, []) + action.get("mutate", {}).get("$" + kind, []):
                    seen["item"] |= {f"{kind}.{key}" for key in item}
            for text in (action.get("when"), action.get("then")):
                seen["expr"] |= {t for t in EXPRESSION_TOKENS if text and t in text}
    return seen


EXPRESSION_TOKENS = {
    "=",
    "!=",
    ">=",
    "<=",
    " > ",
    " < ",
    " IN (",
    "IS NULL",
    "IS NOT NULL",
    " ? ",
    "AND",
    "OR",
    "NOT",
    "-1",
    "input.",
    "actor.",
    "'",
}


def test_the_four_reference_workflows_are_there_and_load() -> None:
    examples = sources()
    assert set(examples) >= REQUIRED
    deployed = list(examples)
    for source in examples.values():
        load_definition(source, deployed=deployed)


def test_the_examples_cover_every_dsl_feature() -> None:
    seen = used(sources())
    assert seen["state"] == set(STATE_KEYS)
    assert seen["action"] == set(ACTION_KEYS)
    assert seen["audience"] == set(AUDIENCES)
    assert seen["mode"] >= set(MODES)
    assert seen["form"] >= set(FIELD_TYPES) | {
        "required",
        "min",
        "max",
        "min_length",
        "max_length",
        "pattern",
        "options",
        "label",
        "help",
    }
    assert seen["op"] >= set(OPS) | {"*"}
    assert seen["target"] == {"ordinal", "folded", "exact"}
    assert seen["from"] == {"str", "list", "NoneType"}
    assert seen["mutate"] == {
        "$set",
        "$merge",
        "$append",
        "$increment",
        "$remove",
        "$spawn",
        "$schedule",
        "$unschedule",
    }
    assert seen["item"] >= {
        "spawn.workflow",
        "spawn.to",
        "spawn.data",
        "spawn.as",
        "spawn.from",
        "schedule.action",
        "schedule.after",
        "schedule.at",
        "schedule.key",
        "unschedule.key",
        "unschedule.action",
    }
    assert seen["expr"] == EXPRESSION_TOKENS
    assert seen["hook"] == {"bare", "qualified"}


def test_every_hook_module_is_a_star_file_beside_the_workflows() -> None:
    for path, source in sources().items():
        namespace = path.rsplit("/", 1)[0]
        for state in source["states"].values():
            if "hook" in state:
                module, function = state["hook"].split(":")
                module_path = module if "/" in module else f"{namespace}/{module}"
                star = EXAMPLES / f"{module_path}.star"
                assert f"def {function}(ctx):" in star.read_text("utf-8"), star

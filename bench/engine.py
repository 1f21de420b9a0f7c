"""Engine throughput: actions per second around a 10-state cycle, beside two libraries.

The same machine three ways, measured in one run: states s0..s9, action `a<i>` moves
s<i> -> s<i+1> (s9 -> s0), each guarded by `n >= 0` and incrementing `n`.
- stateward: `engine.perform` on an immutable `ProcessSnapshot` (a new snapshot per step,
  as the runtime does), guard compiled from the expression, mutation `$increment`;
- `transitions`: a `Machine` with a condition callback and an `after` callback;
- `python-statemachine`: a `StateMachine` with `cond=` and `on=` callbacks.
Usage: `python bench/engine.py [--quick] [--json]`; `--json` prints one JSON object last.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

STATES = 10


def stateward_runner() -> Callable[[int], int]:
    """A loop of `perform` calls around the cycle; returns the final counter."""
    from stateward.domain import engine
    from stateward.domain.definition import load_definition
    from stateward.domain.model import Actor, ProcessSnapshot

    states: dict[str, Any] = {f"s{i}": {"label": f"S{i}"} for i in range(STATES)}
    actions = {
        f"a{i}": {
            "label": f"A{i}",
            "from": f"s{i}",
            "to": f"s{(i + 1) % STATES}",
            "when": "n >= 0",
            "mutate": {"$increment": {"n": 1}},
        }
        for i in range(STATES)
    }
    definition = load_definition(
        {
            "$version": "2.0",
            "$path": "bench/engine/cycle",
            "initial": "s0",
            "states": states,
            "actions": actions,
        }
    )
    actor = Actor(id="bench", roles=frozenset({"bench"}))
    names = [f"a{i}" for i in range(STATES)]
    ts = "2026-01-01T00:00:00.000Z"
    empty: dict[str, Any] = {}
    perform = engine.perform

    def run(n: int) -> int:
        process = ProcessSnapshot(
            id="p", workflow="bench/engine/cycle", version=1, state="s0", status="active",
            data={"state": "s0", "n": 0},
        )  # fmt: skip
        for i in range(n):
            out = perform(definition, process, names[i % STATES], empty, actor, ts, "e")
            process = ProcessSnapshot(
                process.id, process.workflow, process.version, out.state, out.status, out.data
            )
        return int(process.data["n"])

    return run


def transitions_runner() -> Callable[[int], int]:
    """The same cycle with `transitions.Machine` (condition + after callbacks)."""
    from transitions import Machine

    class Model:
        def __init__(self) -> None:
            self.data = {"n": 0}

        def guard(self) -> bool:
            return self.data["n"] >= 0

        def bump(self) -> None:
            self.data = {**self.data, "n": self.data["n"] + 1}

    names = [f"a{i}" for i in range(STATES)]

    def run(n: int) -> int:
        model = Model()
        Machine(
            model=model,
            states=[f"s{i}" for i in range(STATES)],
            transitions=[
                {
                    "trigger": names[i],
                    "source": f"s{i}",
                    "dest": f"s{(i + 1) % STATES}",
                    "conditions": "guard",
                    "after": "bump",
                }
                for i in range(STATES)
            ],
            initial="s0",
            auto_transitions=False,
        )
        triggers = [getattr(model, name) for name in names]
        for i in range(n):
            triggers[i % STATES]()
        return model.data["n"]

    return run


def statemachine_runner() -> Callable[[int], int]:
    """The same cycle with `python-statemachine` (`cond=` and `on=` callbacks)."""
    from statemachine import State, StateMachine

    attrs: dict[str, Any] = {}
    states = [State(f"S{i}", initial=(i == 0)) for i in range(STATES)]
    for i, state in enumerate(states):
        attrs[f"s{i}"] = state

    def guard(self: Any) -> bool:
        return bool(self.data["n"] >= 0)

    def bump(self: Any) -> None:
        self.data = {**self.data, "n": self.data["n"] + 1}

    for i in range(STATES):
        attrs[f"a{i}"] = states[i].to(states[(i + 1) % STATES], cond="guard", on="bump")
    attrs["guard"] = guard
    attrs["bump"] = bump
    attrs["data"] = None
    Cycle = type("Cycle", (StateMachine,), attrs)
    names = [f"a{i}" for i in range(STATES)]

    def run(n: int) -> int:
        machine = Cycle()
        machine.data = {"n": 0}
        for i in range(n):
            machine.send(names[i % STATES])
        return int(machine.data["n"])

    return run


def measure(run: Callable[[int], int], n: int, repeats: int) -> float:
    """Best actions/second over `repeats` runs of `n` actions (checks the work was done)."""
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        done = run(n)
        elapsed = time.perf_counter() - started
        if done != n:
            raise SystemExit(f"benchmark did {done} actions instead of {n}")
        best = max(best, n / elapsed)
    return best


def main(argv: list[str] | None = None) -> int:
    """Measure the three, print a table (and a JSON line with `--json`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer actions (< 30 s)")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    args = parser.parse_args(argv)
    n, repeats = (20_000, 3) if args.quick else (200_000, 5)
    ours = measure(stateward_runner(), n, repeats)
    theirs = measure(transitions_runner(), n, repeats)
    psm = measure(statemachine_runner(), n, repeats)
    print(f"{'engine':<22}{'actions/s':>14}")
    for label, rate in (("stateward", ours), ("transitions", theirs), ("python-statemachine", psm)):
        print(f"{label:<22}{rate:>14,.0f}")
    print(f"ratio vs transitions: {ours / theirs:.2f}x; "
          f"vs python-statemachine: {ours / psm:.2f}x")  # fmt: skip
    if args.json:
        print(json.dumps({
            "actions_per_s": round(ours),
            "transitions_actions_per_s": round(theirs),
            "python_statemachine_actions_per_s": round(psm),
            "ratio_vs_transitions": round(ours / theirs, 3),
            "ratio_vs_python_statemachine": round(ours / psm, 3),
        }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

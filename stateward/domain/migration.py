"""Instance migration (issue 15): move an instance to another version of its workflow.

`migrate(source, target, process, input, ts)` is the pure half of a `$migrate` event: the
input `{fromVersion, toVersion, stateMap?, mutate?}` names the version the instance runs
and the one it moves to; `stateMap` maps old state keys to new ones (identity by default)
and `mutate` is an optional DSL data mutation (`$set $merge $append $increment $remove`)
applied in the same event. The outcome keeps the status, moves the instance to the mapped
state and carries one `workflow.migrated` domain event. Everything that depends on rows
(open assignments, timers, SLA deadlines) is the runtime's (`runtime/operate`).

`migration_problems` lists every reason a migration is refused, each a `MIGRATION_INVALID`
problem with an RFC 6901 pointer into the input (`/stateMap/review`, `/toVersion`,
`/mutate/$set`) or into the data that would fail the target state's form (`/data/amount`).
`verify` replays a `$migrate` event with this same function: the same snapshot and input
always give the same outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stateward.domain import events as ev
from stateward.domain.errors import (
    INACTIVE_PROCESS,
    INVALID_INPUT,
    DomainError,
    Problem,
)
from stateward.domain.forms import field_problem
from stateward.domain.model import (
    ACTIVE,
    ERROR,
    STALE,
    Definition,
    DomainEvent,
    Outcome,
    ProcessSnapshot,
    StateDef,
)
from stateward.domain.mutations import (
    EFFECT_OPERATORS,
    apply_mutation,
    pointer_join,
    validate_mutation,
)

MIGRATE = "$migrate"
MIGRATION_INVALID = "MIGRATION_INVALID"
#: Statuses an instance may be migrated in: live, or stopped by an error (an incident).
MIGRATABLE = (ACTIVE, STALE, ERROR)
INPUT_KEYS = frozenset({"fromVersion", "toVersion", "stateMap", "mutate"})


@dataclass(frozen=True)
class MigrationInput:
    """The parsed input of a `$migrate` event."""

    from_version: int
    to_version: int
    state_map: Mapping[str, str]
    mutate: Mapping[str, Any] | None


def parse_input(input: Mapping[str, Any]) -> MigrationInput:
    """The input's fields; INVALID_INPUT (with a pointer) when one is malformed."""
    unknown = sorted(set(input) - INPUT_KEYS)
    if unknown:
        raise DomainError(
            INVALID_INPUT, f"$migrate input has no field {unknown[0]!r}", pointer=f"/{unknown[0]}"
        )
    versions = []
    for key in ("fromVersion", "toVersion"):
        value = input.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise DomainError(
                INVALID_INPUT, f"$migrate needs {key} (a version number)", pointer=f"/{key}"
            )
        versions.append(value)
    state_map = input.get("stateMap") or {}
    if not isinstance(state_map, Mapping):
        raise DomainError(
            INVALID_INPUT, 'stateMap must be an object {"old": "new"}', pointer="/stateMap"
        )
    for old, new in state_map.items():
        if not isinstance(new, str):
            raise DomainError(
                INVALID_INPUT,
                f"stateMap maps state keys to state keys: {old!r} maps to a {type(new).__name__}",
                pointer=pointer_join("/stateMap", old),
            )
    mutate = input.get("mutate")
    if mutate is not None and not isinstance(mutate, Mapping):
        raise DomainError(INVALID_INPUT, "mutate must be an object", pointer="/mutate")
    return MigrationInput(versions[0], versions[1], dict(state_map), mutate)


def target_state_key(current: str, state_map: Mapping[str, str]) -> str:
    """The state an instance in `current` moves to (identity unless mapped)."""
    return state_map.get(current, current)


def migration_problems(
    source: Definition,
    target: Definition,
    process: ProcessSnapshot,
    input: Mapping[str, Any],
    ts: str,
) -> tuple[Outcome | None, list[Problem]]:
    """(the outcome, []) when the migration is valid, else (None or the outcome, problems).

    The problems are every `MIGRATION_INVALID` reason: another path, the same version, a
    `stateMap` key that is no state of the source or value no state of the target, the
    current state without a target (or mapped to a terminal state), a mutation that is
    malformed or fails on the data, data that fails the target state's form.
    """
    parsed = parse_input(input)
    if process.status not in MIGRATABLE:
        raise DomainError(
            INACTIVE_PROCESS,
            f"process {process.id} is {process.status}: only active, stale or error "
            "instances are migrated",
            details={"status": process.status},
        )
    problems: list[Problem] = []

    def refuse(message: str, pointer: str) -> None:
        problems.append(Problem(MIGRATION_INVALID, message, pointer))

    if target.path != source.path:
        refuse(f"version {parsed.to_version} is of {target.path}, not {source.path}", "/toVersion")
    if parsed.to_version == parsed.from_version:
        refuse(f"the instance already runs version {parsed.from_version}", "/toVersion")
    for old, new in parsed.state_map.items():
        at = pointer_join("/stateMap", old)
        if old not in source.states:
            refuse(f"{old!r} is not a state of version {parsed.from_version}", at)
        elif new not in target.states:
            refuse(f"{new!r} is not a state of version {parsed.to_version}", at)
    current = process.state
    to_key = target_state_key(current, parsed.state_map)
    at_current = pointer_join("/stateMap", current)
    to_state = target.states.get(to_key)
    if to_state is None:
        if current not in parsed.state_map:
            refuse(
                f"the current state {current!r} has no target in version {parsed.to_version}: "
                "map it in stateMap",
                at_current,
            )
        return None, problems
    if to_state.terminal:
        refuse(f"the current state {current!r} would move to the terminal state {to_key!r}",
               at_current)  # fmt: skip
    data = dict(process.data)
    if parsed.mutate is not None:
        data_or_none = _mutated(data, parsed.mutate, ts, refuse)
        if data_or_none is None:
            return None, problems
        data = data_or_none
    data["state"] = to_key
    problems.extend(form_problems(to_state, data))
    details = {"fromVersion": parsed.from_version, "toVersion": parsed.to_version}
    event = DomainEvent(ev.WORKFLOW_MIGRATED, current, to_key, None, details)
    outcome = Outcome(MIGRATE, current, to_key, process.status, data, events=(event,))
    return outcome, problems


def _mutated(
    data: dict[str, Any], mutate: Mapping[str, Any], ts: str, refuse: Any
) -> dict[str, Any] | None:
    found = validate_mutation(mutate, "/mutate")
    for op in mutate:
        if op in EFFECT_OPERATORS:
            refuse(f"a migration mutates data only: {op} is not allowed",
                   pointer_join("/mutate", op))  # fmt: skip
    for problem in found:
        refuse(problem.message, problem.pointer)
    if found or any(op in EFFECT_OPERATORS for op in mutate):
        return None
    try:
        return apply_mutation(data, mutate, {}, ts)
    except DomainError as exc:
        refuse(f"mutate fails on the instance's data: {exc.message}", "/mutate")
        return None


def form_problems(state: StateDef, data: Mapping[str, Any]) -> list[Problem]:
    """Data values that a field of `state`'s form would refuse (type, range, length,
    pattern, options), at `/data/<field>`. A field the data does not hold is not checked:
    forms are filled when an action leaves the state."""
    if state.form is None:
        return []
    problems = []
    for field in state.form.fields:
        value = data.get(field.name)
        if value is None:
            continue
        message = field_problem(field, value)
        if message:
            problems.append(
                Problem(
                    MIGRATION_INVALID,
                    f"data {field.name!r} would fail the form of {state.key!r}: {message}",
                    pointer_join("/data", field.name),
                )
            )
    return problems


def migrate(
    source: Definition,
    target: Definition,
    process: ProcessSnapshot,
    input: Mapping[str, Any],
    ts: str,
) -> Outcome:
    """The outcome of a `$migrate` event; MIGRATION_INVALID (every problem attached, the
    first one's pointer) when it is refused."""
    outcome, problems = migration_problems(source, target, process, input, ts)
    if problems or outcome is None:
        first = problems[0]
        raise DomainError(
            MIGRATION_INVALID,
            f"{len(problems)} reason(s); first: {first.message}",
            pointer=first.pointer,
            problems=problems,
        )
    return outcome

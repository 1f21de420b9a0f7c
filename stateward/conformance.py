"""Run the conformance vectors: `python -m stateward.conformance [FILE | DIR]...`.

Each file is `{"format": "stateward.conformance.<kind>/1", "cases": [...]}` with kind
`expressions`, `validation` or `engine` (conformance/README.md), or the project's `tasks`
(a state's `assign` task fields evaluated at entry: `run_tasks_case`). A directory stands for
every `*.json` under it (sorted, recursively). With no argument it runs the default set:
the shared vectors (`STATEWARD_CONFORMANCE_DIR`, else `../shared/conformance` next to the
project, `v2.1/` included) and the project's own DSL 2.1 vectors (`tests/domain/vectors/`).
Prints one line per failing case (`file: case name: expected X, got Y`), then exactly
`N passed, M failed`; exits 1 when any case fails (2 on a file it cannot read).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from stateward.domain import engine
from stateward.domain.definition import load_definition, validate_definition
from stateward.domain.errors import DomainError
from stateward.domain.expressions import compile_expression
from stateward.domain.model import ACTIVE, Actor, Definition, Outcome, ProcessSnapshot
from stateward.domain.tasks import parse_task, task_fields
from stateward.domain.value_expressions import parse_timestamp

DEFAULT_TS = "2026-01-01T00:00:00.000Z"
PROJECT_ROOT = Path(__file__).resolve().parents[1]
#: The project's own vectors (DSL 2.1 constructs), relative to the project root.
PROJECT_VECTORS = Path("tests") / "domain" / "vectors"
DEFAULT_ACTOR_ID = "tester"
DEFAULT_ACTOR: dict[str, Any] = {"id": DEFAULT_ACTOR_ID, "roles": []}
FORMATS = ("expressions", "validation", "engine", "tasks")


class CaseFailure(AssertionError):
    """A case did not behave as its vector says (message: `expected X, got Y`)."""


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers compare numerically, but booleans are never numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _expect(what: str, expected: Any, got: Any) -> None:
    if not json_equal(expected, got):
        raise CaseFailure(f"{what}: expected {json.dumps(expected)}, got {json.dumps(got)}")


# --- expressions ---------------------------------------------------------------------------


def run_expression_case(case: Mapping[str, Any]) -> None:
    """Compile `expr` and evaluate it; `expect` is true/false or an error code."""
    expected = case["expect"]
    try:
        predicate = compile_expression(case["expr"])
        got: Any = predicate(
            case.get("data", {}), case.get("input", {}), case.get("actor", DEFAULT_ACTOR)
        )
    except DomainError as exc:
        got = exc.code
    _expect("result", expected, got)


# --- validation ----------------------------------------------------------------------------


def run_validation_case(case: Mapping[str, Any]) -> None:
    """Validate `definition` (serialized) or raw `text`; every listed code must be reported."""
    source = case["text"] if "text" in case else json.dumps(case["definition"])
    report = validate_definition(
        source, deployed=case.get("deployed", []), target=case.get("target")
    )
    errors = sorted({p.code for p in report.errors})
    expected = case.get("errors", [])
    if not expected and errors:
        raise CaseFailure(f"errors: expected none, got {errors}")
    missing = [code for code in expected if code not in errors]
    if missing:
        raise CaseFailure(f"errors: expected {expected}, got {errors}")
    warnings = sorted({p.code for p in report.warnings})
    absent = [code for code in case.get("warnings", []) if code not in warnings]
    if absent:
        raise CaseFailure(f"warnings: expected {case['warnings']}, got {warnings}")


# --- engine --------------------------------------------------------------------------------


def _actor(raw: Mapping[str, Any]) -> Actor:
    return Actor(
        id=raw["id"],
        roles=frozenset(r.lower() for r in raw.get("roles", ())),
        visitor=bool(raw.get("visitor", False)),
    )


def _event_id(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _snapshot(process: ProcessSnapshot | None, outcome: Outcome, pid: str) -> ProcessSnapshot:
    return ProcessSnapshot(
        id=pid, workflow=process.workflow if process else "", version=1, state=outcome.state,
        status=outcome.status, data=outcome.data,
        started_by=process.started_by if process else DEFAULT_ACTOR_ID,
        parent_data=process.parent_data if process else None,
    )  # fmt: skip


def _start(
    definition: Definition,
    data: Mapping[str, Any],
    pid: str,
    parent: Mapping[str, Any] | None = None,
) -> ProcessSnapshot:
    event = engine.EngineEvent(
        action=engine.START, actor=_actor(DEFAULT_ACTOR), ts=DEFAULT_TS,
        event_id=_event_id(pid, "start"), input={"data": data}, process_id=pid,
    )  # fmt: skip
    begun = _snapshot(None, engine.apply(None, event, definition), pid)
    return replace(begun, parent_data=parent) if parent is not None else begun


def _start_as(definition: Definition, begin: Mapping[str, Any]) -> ProcessSnapshot | None:
    """`start.actor` starts the process (`start.error`: it must fail with that code).
    None when the case ends here (the expected start error)."""
    actor = _actor(begin.get("actor", DEFAULT_ACTOR))
    event = engine.EngineEvent(
        action=engine.START, actor=actor, ts=DEFAULT_TS, event_id=_event_id("start"),
        input={"data": begin.get("data", {})}, process_id="process-1",
    )  # fmt: skip
    try:
        outcome = engine.apply(None, event, definition)
    except DomainError as exc:
        if "error" not in begin:
            raise CaseFailure(f"start: expected success, got {exc.code} ({exc.message})") from None
        _expect("start error", begin["error"], exc.code)
        return None
    if "error" in begin:
        raise CaseFailure(f"start: expected {begin['error']}, got state {outcome.state!r}")
    return _snapshot(None, outcome, "process-1")


def _check_outcome(expect: Mapping[str, Any], outcome: Outcome) -> None:
    if "state" in expect:
        _expect("state", expect["state"], outcome.state)
    if "status" in expect:
        _expect("status", expect["status"], outcome.status)
    for key, value in expect.get("data", {}).items():
        _expect(f"data.{key}", value, outcome.data.get(key))
    for key in expect.get("absent", ()):
        if key in outcome.data:
            raise CaseFailure(f"data.{key}: expected absent, got {json.dumps(outcome.data[key])}")
    effects = expect.get("effects", {})
    spawned = [
        {"workflow": s.workflow, "state": s.state, "data": dict(s.data)}
        for s in outcome.effects.spawns
    ]
    for item in effects.get("spawn", ()):
        if not any(all(json_equal(v, s.get(k)) for k, v in item.items()) for s in spawned):
            raise CaseFailure(f"spawn: expected {json.dumps(item)}, got {json.dumps(spawned)}")
    scheduled = [
        {"action": s.action, "after": s.after, "at": s.at, "key": s.key}
        for s in outcome.effects.schedules
    ]
    for item in effects.get("schedule", ()):
        if not any(all(json_equal(v, s.get(k)) for k, v in item.items()) for s in scheduled):
            raise CaseFailure(f"schedule: expected {json.dumps(item)}, got {json.dumps(scheduled)}")
    _check_more_effects(effects, outcome)


def _check_more_effects(effects: Mapping[str, Any], outcome: Outcome) -> None:
    """The effect expectations the project's DSL 2.1 vectors add: `unschedule` items,
    `assignee`, `sla` deadlines and `no_schedule` (keys that must not be armed)."""
    dropped = [{"key": u.key, "action": u.action} for u in outcome.effects.unschedules]
    for item in effects.get("unschedule", ()):
        if not any(all(json_equal(v, u.get(k)) for k, v in item.items()) for u in dropped):
            raise CaseFailure(f"unschedule: expected {json.dumps(item)}, got {json.dumps(dropped)}")
    armed = [s.key for s in outcome.effects.schedules]
    for key in effects.get("no_schedule", ()):
        if key in armed:
            raise CaseFailure(f"schedule: expected no timer {key!r}, got {json.dumps(armed)}")
    if "assignee" in effects:
        _expect("assignee", effects["assignee"], outcome.effects.assignee)
    if "sla" in effects:
        sla = outcome.effects.sla
        got = {"warn_at": sla.warn_at, "due_at": sla.due_at} if sla is not None else None
        _expect("sla", effects["sla"], got)


def _run_step(
    definition: Definition, process: ProcessSnapshot, step: Mapping[str, Any], n: int
) -> ProcessSnapshot:
    actor = _actor(step["actor"])
    name = engine.ADVANCE if step.get("advance") else step["action"]
    event = engine.EngineEvent(
        action=name, actor=actor, ts=step.get("ts", DEFAULT_TS),
        event_id=_event_id(process.id, n), input=step.get("input", {}), process_id=process.id,
    )  # fmt: skip
    expect = step["expect"]
    before = copy.deepcopy(dict(process.data))
    try:
        outcome = engine.apply(process, event, definition)
    except DomainError as exc:
        if "error" not in expect:
            raise CaseFailure(
                f"step {n}: expected success, got {exc.code} ({exc.message})"
            ) from None
        _expect(f"step {n} error", expect["error"], exc.code)
        _expect(f"step {n} data after the error", before, dict(process.data))
        return process
    if "error" in expect:
        raise CaseFailure(f"step {n}: expected {expect['error']}, got state {outcome.state!r}")
    try:
        _check_outcome(expect, outcome)
    except CaseFailure as exc:
        raise CaseFailure(f"step {n} {exc}") from None
    return _snapshot(process, outcome, process.id)


def run_engine_case(case: Mapping[str, Any]) -> None:
    """Start a process and run its steps (or, with `cases`, advance once per start data)."""
    deployed = [d["$path"] for d in case.get("deployed", ())]
    definition = load_definition(case["definition"], deployed=deployed)
    if "cases" in case:
        for n, sub in enumerate(case["cases"]):
            pid = f"case-{n}"
            process = _start(definition, sub.get("data", {}), pid)
            event = engine.EngineEvent(
                action=engine.ADVANCE, actor=Actor(id="tester"), ts=DEFAULT_TS,
                event_id=_event_id(pid, 0), input={}, process_id=pid,
            )  # fmt: skip
            try:
                state = engine.apply(process, event, definition).state
            except DomainError as exc:
                state = exc.code
            _expect(f"case {n} state", sub["expect_state"], state)
        return
    begin = case.get("start", {})
    if "error" in begin or "actor" in begin:
        started = _start_as(definition, begin)
        if started is None:
            return
        process = started
    else:
        process = _start(definition, begin.get("data", {}), "process-1", begin.get("parent"))
    if process.status != ACTIVE:
        raise CaseFailure(f"start: expected active, got {process.status}")
    for n, step in enumerate(case.get("steps", ())):
        process = _run_step(definition, process, step, n)


# --- tasks ---------------------------------------------------------------------------------


def run_tasks_case(case: Mapping[str, Any]) -> None:
    """Parse `assign` (pointers under `/assign`); with `errors` (`[{code, pointer}]`) each
    must be reported, else evaluate it against `data` entered at `entered` and compare
    `expect` (`priority`, `dueAt`, `followUpAt`: an integer / a timestamp, or null)."""
    _, spec, problems = parse_task(case["assign"], "/assign")
    got_problems = sorted({(p.code, p.pointer) for p in problems})
    wanted = case.get("errors", [])
    if wanted or got_problems:
        expected = sorted({(e["code"], e["pointer"]) for e in wanted})
        if expected != got_problems:
            raise CaseFailure(f"errors: expected {expected}, got {got_problems}")
        return
    entered = parse_timestamp(case.get("entered", DEFAULT_TS.replace("Z", "+00:00")))
    if entered is None:
        raise CaseFailure("entered: not a timestamp with an offset")
    got = task_fields(spec, case.get("data", {}), entered)
    expect = case.get("expect", {})
    if "priority" in expect:
        _expect("priority", expect["priority"], got.priority)
    for key, value in (("dueAt", got.due_at), ("followUpAt", got.follow_up_at)):
        if key in expect:
            want = expect[key]
            if (None if want is None else parse_timestamp(want)) != value:
                shown = None if value is None else value.isoformat()
                raise CaseFailure(f"{key}: expected {json.dumps(want)}, got {json.dumps(shown)}")


RUNNERS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "expressions": run_expression_case,
    "validation": run_validation_case,
    "engine": run_engine_case,
    "tasks": run_tasks_case,
}


def kind_of(document: Mapping[str, Any]) -> str:
    """`expressions`, `validation`, `engine` or `tasks`, from the document's `format` key."""
    fmt = str(document.get("format", ""))
    for kind in FORMATS:
        if fmt.startswith(f"stateward.conformance.{kind}/"):
            return kind
    raise ValueError(f"unknown conformance format {fmt!r}")


def case_label(case: Mapping[str, Any], index: int) -> str:
    """A readable name for a case (its `name`, else its expression, else its index)."""
    return str(case.get("name") or case.get("expr") or f"case {index}")


def run_case(kind: str, case: Mapping[str, Any]) -> str | None:
    """Run one case; None when it passes, else the failure text (unexpected errors included)."""
    try:
        RUNNERS[kind](case)
    except CaseFailure as exc:
        return str(exc)
    except Exception as exc:  # a crash is a failing case, reported like one
        return f"expected no crash, got {type(exc).__name__}: {exc}"
    return None


def run_file(path: Path) -> tuple[int, list[str]]:
    """(passed count, failure lines) of one vector file."""
    document = json.loads(path.read_text(encoding="utf-8"))
    kind = kind_of(document)
    passed, failures = 0, []
    for index, case in enumerate(document["cases"]):
        problem = run_case(kind, case)
        if problem is None:
            passed += 1
        else:
            failures.append(f"{path.name}: {case_label(case, index)}: {problem}")
    return passed, failures


def shared_dir() -> Path:
    """The shared vector directory: `STATEWARD_CONFORMANCE_DIR`, else `../shared/conformance`."""
    configured = os.environ.get("STATEWARD_CONFORMANCE_DIR")
    return Path(configured) if configured else PROJECT_ROOT.parent / "shared" / "conformance"


def default_sources() -> list[Path]:
    """What a bare `python -m stateward.conformance` runs (the directories that exist)."""
    return [d for d in (shared_dir(), PROJECT_ROOT / PROJECT_VECTORS) if d.is_dir()]


def expand(sources: Sequence[str | Path]) -> Iterator[Path]:
    """Files as given; a directory becomes its `*.json` files (sorted, recursively)."""
    for source in sources:
        path = Path(source)
        if path.is_dir():
            yield from sorted(path.rglob("*.json"))
        else:
            yield path


def main(argv: Sequence[str] | None = None) -> int:
    """Run every file named on the command line (default: `default_sources()`); 0 when
    every case passes."""
    given = list(sys.argv[1:] if argv is None else argv)
    sources: list[str | Path] = list(given) if given else list(default_sources())
    files = list(expand(sources))
    if not files:
        print(
            "usage: python -m stateward.conformance [FILE | DIR]... "
            "(no vectors found: set STATEWARD_CONFORMANCE_DIR)",
            file=sys.stderr,
        )
        return 2
    passed = failed = 0
    for name in files:
        try:
            ok, failures = run_file(Path(name))
        except (OSError, ValueError, KeyError) as exc:
            print(f"{name}: cannot run: {exc}", file=sys.stderr)
            return 2
        passed += ok
        failed += len(failures)
        for line in failures:
            print(line)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

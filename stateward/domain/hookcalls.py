"""What a hook did through the Starlark `workflow` module (seed §10, issue 13), as the
engine applies it.

A hook may read and write only its own instance and that instance's children. The
runtime records the module's calls in the hook's `$automate` event, under `workflow`:

    {"reads": [{"id", "seq"}], "writes": [{"id", "data"}], "advances": [id]}

- writes to the hook's own instance are merged by `$automate` itself (before the hook's
  result, which wins on a shared key): the same event, no second path;
- writes to and advances of a child become one `$hook_write` system event on that child,
  `{by, at, after, data?, advance?}` (`by`/`at`: the parent and the seq of its `$automate`;
  `after`: the child's seq the hook read), which `hook_write` applies: merge `data`, then,
  when asked, advance as the system (branch rules, ordinal + 1, completion).

Both replay from the log alone: neither the reads nor Starlark are needed again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from stateward.domain import events as ev
from stateward.domain.errors import INACTIVE_PROCESS, INVALID_INPUT, DomainError
from stateward.domain.model import (
    ACTIVE,
    STALE,
    SYSTEM_ACTOR,
    Actor,
    Definition,
    DomainEvent,
    Outcome,
    ProcessSnapshot,
)
from stateward.domain.transition import advance

HOOK_WRITE = "$hook_write"
#: The key of a `$automate` input that holds the record of the module's calls.
WORKFLOW_KEY = "workflow"
SYSTEM = Actor(id=SYSTEM_ACTOR)


def writes_for(record: Any, process_id: str) -> dict[str, Any]:
    """The data the record's `writes` merge into `process_id` (empty when none).

    INVALID_INPUT when the record is not of the documented shape."""
    if record is None:
        return {}
    writes = record.get("writes") if isinstance(record, Mapping) else None
    if not isinstance(writes, list):
        raise DomainError(INVALID_INPUT, "workflow record needs a writes list",
                          pointer=f"/{WORKFLOW_KEY}/writes")  # fmt: skip
    merged: dict[str, Any] = {}
    for i, write in enumerate(writes):
        data = write.get("data") if isinstance(write, Mapping) else None
        if not isinstance(data, Mapping) or not isinstance(write.get("id"), str):
            raise DomainError(INVALID_INPUT, "a write is {id, data}",
                              pointer=f"/{WORKFLOW_KEY}/writes/{i}")  # fmt: skip
        if write["id"] == process_id:
            merged.update(data)
    return merged


def hook_write(
    definition: Definition,
    process: ProcessSnapshot,
    payload: Mapping[str, Any],
    *,
    ts: str,
    event_id: str,
) -> Outcome:
    """`$hook_write {by, at, after, data?, advance?}` (system): a parent's hook wrote this
    child: merge `data` (shallow), then advance when `advance` is true. A DomainError
    (nothing changes) when the child is not live or no action applies."""
    if process.status not in (ACTIVE, STALE):
        raise DomainError(INACTIVE_PROCESS, f"process {process.id} is {process.status}")
    data = payload.get("data", {})
    if not isinstance(data, Mapping):
        raise DomainError(INVALID_INPUT, "$hook_write data must be an object", pointer="/data")
    if any(not isinstance(k, str) or k.startswith("$") or k == "state" for k in data):
        raise DomainError(INVALID_INPUT, "$hook_write data has a reserved key", pointer="/data")
    merged = {**process.data, **data}
    if payload.get("advance") is True:
        return advance(
            definition, replace(process, data=merged), {}, SYSTEM, ts, event_id, authorize=False
        )
    updated = DomainEvent(ev.WORKFLOW_UPDATED, process.state, process.state)
    return Outcome(HOOK_WRITE, process.state, process.state, process.status, merged,
                   events=(updated,))  # fmt: skip

"""Message correlation (issue 15): which messages an instance waits for, pure.

An action may declare `message: "<name>"` and the workflow a correlation per message,
`correlation: {"<name>": "data.<path>"}`. An instance *waits* for message M with key K
while its current state has an action declaring M (the action lists the state in `from`,
or has no `from` and the state is not terminal) and its data holds K at the correlation
path. The runtime keeps one row per wait (re-derived whenever the state or the data
changes), so a publish finds its instances by an index, never by reading instance data.

`$message {delivery, message, name, key, action, input}` is the kernel operation a
delivery appends (by `system`, server-attested): it performs `action` with the message's
payload as input, after checking that the action does declare message `name`. A workflow
whose `start` names a message (`start: {"message": "<name>"}`) is started by it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stateward.domain import errors
from stateward.domain.errors import INVALID_INPUT, DomainError, Problem
from stateward.domain.model import ActionDef, Definition

MESSAGE_OP = "$message"
#: A message name: letters, digits, `_ . : -`, starting with a letter or digit, ≤ 128.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
DATA_PREFIX = "data."
#: The longest correlation key kept (a longer value never correlates).
MAX_KEY = 512


@dataclass(frozen=True)
class Wait:
    """An instance waits for message `name` with correlation `key`, to perform `action`."""

    name: str
    key: str
    action: str


def valid_name(name: Any) -> bool:
    """True for a usable message name."""
    return isinstance(name, str) and NAME.fullmatch(name) is not None


def parse_message(raw: Any, at: str, found: list[Problem]) -> str | None:
    """An action's `message` field (problems into `found`)."""
    if raw is None:
        return None
    if not valid_name(raw):
        found.append(
            Problem(
                errors.INVALID_FIELD,
                "'message' must be a message name (letters, digits, '_ . : -', at most 128)",
                at,
            )
        )
        return None
    return str(raw)


def parse_correlation(raw: Any, found: list[Problem]) -> dict[str, tuple[str, ...]]:
    """The workflow's `correlation` map: message name -> data path segments."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        found.append(
            Problem(
                errors.INVALID_FIELD,
                '\'correlation\' must be an object {"<message>": "data.<path>"}',
                "/correlation",
            )
        )
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for name, path in raw.items():
        at = "/correlation/" + name.replace("~", "~0").replace("/", "~1")
        if not valid_name(name):
            found.append(Problem(errors.INVALID_FIELD, f"{name!r} is not a message name", at))
            continue
        segments = _path(path)
        if segments is None:
            found.append(
                Problem(
                    errors.INVALID_FIELD,
                    f"the correlation of {name!r} must be 'data.<path>' (dot-separated keys)",
                    at,
                )
            )
            continue
        out[name] = segments
    return out


def _path(text: Any) -> tuple[str, ...] | None:
    if not isinstance(text, str) or not text.startswith(DATA_PREFIX):
        return None
    segments = tuple(text[len(DATA_PREFIX) :].split("."))
    return segments if all(segments) else None


def check_messages(
    actions: Mapping[str, ActionDef],
    correlation: Mapping[str, tuple[str, ...]],
    start_message: str | None,
    found: list[Problem],
) -> None:
    """Every message an action waits for needs a correlation (else it could never be
    told apart): INVALID_FIELD at the action's `message`."""
    del start_message  # a start message needs no correlation: it starts a new instance
    for action in actions.values():
        if action.message is not None and action.message not in correlation:
            found.append(
                Problem(
                    errors.INVALID_FIELD,
                    f"action {action.key!r} waits for message {action.message!r}, which has "
                    'no \'correlation\' entry ("correlation": {"<message>": "data.<path>"})',
                    f"/actions/{action.key.replace('~', '~0').replace('/', '~1')}/message",
                )
            )


def correlation_key(value: Any) -> str | None:
    """The key a data value correlates as: a string as is, an integer or a boolean as its
    JSON text; anything else (null, objects, lists, fractions) never correlates."""
    if isinstance(value, str):
        return value if 0 < len(value) <= MAX_KEY else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return None


def _lookup(data: Mapping[str, Any], segments: tuple[str, ...]) -> Any:
    value: Any = data
    for segment in segments:
        if not isinstance(value, Mapping) or segment not in value:
            return None
        value = value[segment]
    return value


def waits(
    definition: Definition, state: str, status_live: bool, data: Mapping[str, Any]
) -> tuple[Wait, ...]:
    """The messages an instance in `state` with `data` waits for (none unless live)."""
    if not status_live or not definition.correlation:
        return ()
    current = definition.states.get(state)
    if current is None or current.terminal:
        return ()
    out: list[Wait] = []
    seen: set[str] = set()
    for action in definition.actions.values():
        name = action.message
        if name is None or name in seen:  # two actions for one message: the first waits
            continue
        if action.from_states is not None and state not in action.from_states:
            continue
        segments = definition.correlation.get(name)
        key = correlation_key(_lookup(data, segments)) if segments else None
        if key is not None:
            seen.add(name)
            out.append(Wait(name, key, action.key))
    return tuple(out)


def message_action(
    definition: Definition, payload: Mapping[str, Any]
) -> tuple[str, Mapping[str, Any]]:
    """(action, input) of a `$message` event, checked against the definition: the action
    must exist and declare the message the event names."""
    action, name = payload.get("action"), payload.get("name")
    if not isinstance(action, str) or not isinstance(name, str):
        raise DomainError(INVALID_INPUT, "$message needs 'action' and 'name'", pointer="/action")
    declared = definition.actions.get(action)
    if declared is None or declared.message != name:
        raise DomainError(
            INVALID_INPUT,
            f"action {action!r} of {definition.path} does not wait for message {name!r}",
            pointer="/action",
        )
    action_input = payload.get("input")
    if action_input is None:
        action_input = {}
    if not isinstance(action_input, Mapping):
        raise DomainError(INVALID_INPUT, "a message payload must be an object", pointer="/input")
    return action, action_input

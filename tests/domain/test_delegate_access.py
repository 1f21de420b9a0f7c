"""The delegate actor (issue 13): the worker of a delegated stage acts there and nowhere
else; entering a delegated state emits `workflow.delegated`."""

from __future__ import annotations

import pytest

from stateward.domain import events as ev
from stateward.domain.access import check_state_access, holds_role, may_read
from stateward.domain.effects import entry_effects
from stateward.domain.errors import DomainError
from stateward.domain.model import ActionDef, Actor, DomainEvent, StateDef
from stateward.governance.envelope import is_valid_actor

TASK = "0b6f5c1e-8a52-4f5e-9a43-2f0e3c1d9b7a"
DELEGATE = Actor(id=f"delegate:{TASK}:0123456789abcdef")
DELEGATED = StateDef(key="ocr", ordinal=1, mode="delegated", surface="acme-ocr")
TEAM = StateDef(key="review", ordinal=2, assign="clerk")
SYSTEM = StateDef(key="score", ordinal=3, audience="system", hook="m:f")


def test_a_delegate_acts_only_in_a_delegated_state() -> None:
    check_state_access(DELEGATED, DELEGATE, claimed_by=None)
    for state in (TEAM, SYSTEM):
        with pytest.raises(DomainError) as caught:
            check_state_access(state, DELEGATE, claimed_by=None)
        assert caught.value.code == "FORBIDDEN"


def test_a_delegate_passes_the_role_lists_of_its_stage() -> None:
    action = ActionDef(key="finish", roles=("clerk",))
    assert holds_role(action, DELEGATE)
    assert may_read(DELEGATE)


def test_only_well_formed_delegate_ids_are_actors() -> None:
    assert is_valid_actor(DELEGATE.id)
    assert not is_valid_actor(f"delegate:{TASK}")
    assert not is_valid_actor("delegate:../x:0123456789abcdef")


def test_entering_a_delegated_state_emits_workflow_delegated() -> None:
    events: list[DomainEvent] = []
    entry_effects(DELEGATED, "2026-11-30T10:00:00.000Z", events)
    assert [e.type for e in events] == [ev.WORKFLOW_DELEGATED]
    assert events[0].details == {ev.D_SURFACE: "acme-ocr"}
    events.clear()
    entry_effects(TEAM, "2026-11-30T10:00:00.000Z", events)
    assert ev.WORKFLOW_DELEGATED not in [e.type for e in events]

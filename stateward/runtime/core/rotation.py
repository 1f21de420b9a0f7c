"""`stage_config.auto_assign: "round_robin"` (issue 13): each new assignment of a state
goes to the next member of its team, in turn.

The team's members are the actors holding the team role in the instance's namespace (or
above, `system` included), sorted by actor id — so members without the role are never
picked. The turn is the number of assignments the workflow's instances already opened
for that team in that state: assignment `n` goes to member `n mod len(members)`. The
assignment opens `claimed` by that member; the choice is written in the event's
transaction and carried by its `workflow.assigned` bus message (`details.assignee`, `details.turn`,
`details.members`). A team with no member leaves the assignment `unassigned`.
"""

from __future__ import annotations

from stateward.domain import events as ev
from stateward.domain.model import ROUND_ROBIN
from stateward.records import ProcessRecord
from stateward.runtime.core.kernel import ActContext


async def next_member(ctx: ActContext, record: ProcessRecord, state: str, team: str) -> str | None:
    """The member the new assignment of `team` in `state` goes to, or None (no rotation)."""
    definition = ctx.definition.states.get(state)
    if definition is None or definition.auto_assign != ROUND_ROBIN:
        return None
    members = await ctx.uow.grants.holders(team, record.namespace)
    if not members:
        return None
    turn = await ctx.uow.assignments.count_rotation(record.workflow, state, team)
    member = members[turn % len(members)]
    ctx.payload_overrides[ev.WORKFLOW_ASSIGNED] = {
        ev.F_DETAILS: {"assignee": member, "turn": turn, "members": len(members)},
    }
    return member

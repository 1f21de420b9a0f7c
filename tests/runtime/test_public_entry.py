"""Public entry: tokens, the visitor view of DESIGN §7 and nothing more, rate limits."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from kernel_fixtures import TICKET, Desk

from stateward.domain.errors import DomainError
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.verify import verify
from stateward.runtime.public import entry as public
from stateward.runtime.public.entry import (
    advance_public,
    issue_entry_token,
    public_view,
    start_public,
    visitor_id,
)
from stateward.settings import Settings

APPLY: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/apply",
    "branding": {"title": "Apply with us", "accent_color": "#0b7285"},
    "initial": "form",
    "states": {
        "form": {
            "label": "Your details",
            "audience": "public",
            "visible": ["name", "ref"],
            "form": {"fields": {"name": {"type": "string", "required": True}}},
        },
        "review": {"label": "Review", "assign": "analyst", "visible": ["name"]},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "save": {
            "role": "public",
            "from": "form",
            "mutate": {"$set": {"name": "input.fields.name"}},
        },
        "submit": {"role": "public", "from": "form", "to": "review"},
        "approve": {"role": "analyst,admin", "from": "review", "to": "done"},
    },
}
IP = "203.0.113.7"


async def _code(coro) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(DomainError) as info:
        await coro
    return info.value.code


@pytest.fixture
async def desk(admin_rt, operator) -> Desk:
    return await Desk(admin_rt, operator).setup(TICKET, APPLY)


async def test_start_public_returns_a_token_whose_hash_alone_is_stored(desk):
    entry = await start_public(desk.rt, APPLY["$path"], {"name": "Al"}, IP)
    assert len(entry.token) == 43  # 32 bytes, base64url without padding
    view = entry.view
    assert (view.state.key, view.state.label, view.state.ordinal, view.state.total) == (
        "form", "Your details", 0, 3,
    )  # fmt: skip
    assert view.data == {"name": "Al"}
    assert view.form == APPLY["states"]["form"]["form"]
    assert (view.status, view.active) == ("active", True)
    assert view.branding == APPLY["branding"]
    async with desk.rt.uow(readonly=True) as uow:
        digest = hashlib.sha256(entry.token.encode()).hexdigest()
        record = await uow.processes.by_entry_token(digest)
        assert record is not None and record.started_by == visitor_id(entry.token)
        events = await uow.events.for_process(record.id)
    assert entry.token not in str([e.envelope for e in events])
    assert [e.action for e in events] == ["$start", "$entry_token"]


async def test_a_visitor_acts_in_public_states_and_only_sees_visible_keys(desk):
    pid = (
        await start_instance(desk.rt, desk.admin, APPLY["$path"], {"ref": "R1", "s": 1})
    ).record.id
    token = await issue_entry_token(desk.rt, desk.admin, pid)
    entry = public.PublicEntry(token, await public_view(desk.rt, token, IP))
    view = await advance_public(desk.rt, entry.token, "save", {"fields": {"name": "Ann"}}, IP)
    assert view.data == {"ref": "R1", "name": "Ann"}  # `s` is not in `visible`
    bad = advance_public(desk.rt, entry.token, "submit", {"fields": {"nope": 1}}, IP)
    assert await _code(bad) == "INVALID_INPUT"
    after = await advance_public(desk.rt, entry.token, "submit", {"fields": {"name": "Ann"}}, IP)
    # frozen on the last public step: never the team state's key or label
    assert (after.state.key, after.state.label, after.status) == (
        "form",
        "Your details",
        "processing",
    )
    assert (after.active, after.data, after.form) == (False, {}, None)


async def test_a_token_cannot_act_on_team_states_or_team_actions(desk):
    entry = await start_public(desk.rt, APPLY["$path"], {}, IP)
    with pytest.raises(DomainError) as early:  # a team action from the public step
        await advance_public(desk.rt, entry.token, "approve", {}, IP)
    assert "review" not in str(early.value).lower() and "Review" not in str(early.value.problems)
    await advance_public(desk.rt, entry.token, "submit", {"fields": {"name": "Ann"}}, IP)
    assert await _code(advance_public(desk.rt, entry.token, "approve", {}, IP)) == "FORBIDDEN"
    assert await _code(advance_public(desk.rt, entry.token, None, {}, IP)) == "FORBIDDEN"
    assert await _code(advance_public(desk.rt, entry.token, "$cancel", {}, IP)) == "INVALID_INPUT"


async def test_a_token_reads_and_acts_on_its_own_instance_only(desk):
    mine = await start_public(desk.rt, APPLY["$path"], {"name": "mine"}, IP)
    theirs = await start_public(desk.rt, APPLY["$path"], {"name": "theirs"}, IP)
    await advance_public(desk.rt, mine.token, "save", {"fields": {"name": "Me"}}, IP)
    assert (await public_view(desk.rt, theirs.token, IP)).data == {"name": "theirs"}
    assert (await public_view(desk.rt, mine.token, IP)).data == {"name": "Me"}
    forged = public.new_token()
    assert await _code(public_view(desk.rt, forged, IP)) == "NOT_FOUND"
    assert await _code(public_view(desk.rt, "../../etc", IP)) == "NOT_FOUND"


async def test_issue_entry_token_for_a_started_instance_replaces_the_old_one(desk):
    pid = (await start_instance(desk.rt, desk.admin, APPLY["$path"], {"ref": "A"})).record.id
    assert await _code(issue_entry_token(desk.rt, desk.member, pid)) == "FORBIDDEN"
    assert await _code(issue_entry_token(desk.rt, desk.outsider, pid)) == "NOT_FOUND"
    first = await issue_entry_token(desk.rt, desk.admin, pid)
    assert (await public_view(desk.rt, first, IP)).data == {"ref": "A"}
    second = await issue_entry_token(desk.rt, desk.admin, pid)
    assert await _code(public_view(desk.rt, first, IP)) == "NOT_FOUND"
    assert (await public_view(desk.rt, second, IP)).active
    assert (await verify(desk.rt, pid)).valid


async def test_no_entry_token_for_a_workflow_without_a_public_state(desk):
    pid = await desk.ticket_in_review(secret="s")
    assert await _code(issue_entry_token(desk.rt, desk.admin, pid)) == "FORBIDDEN"


async def test_a_token_on_an_instance_in_a_team_state_shows_a_frozen_view(desk):
    entry = await start_public(desk.rt, APPLY["$path"], {"name": "Zed"}, IP)
    token = entry.token
    await advance_public(desk.rt, token, "submit", {"fields": {"name": "Zed"}}, IP)
    pid = await _pid(desk, token)
    view = await public_view(desk.rt, token, IP)
    assert (view.state.key, view.state.ordinal, view.status) == ("form", 0, "processing")
    assert (view.data, view.form, view.active) == ({}, None, False)
    with pytest.raises(DomainError) as refused:
        await advance_public(desk.rt, token, "approve", {}, IP)
    assert refused.value.code == "FORBIDDEN" and "review" not in refused.value.message.lower()
    await perform_action(desk.rt, desk.admin, pid, "approve", {})
    done = await public_view(desk.rt, token, IP)  # ended in a team state: still frozen
    assert (done.state.key, done.status) == ("form", "completed")


async def _pid(desk: Desk, token: str) -> str:
    async with desk.rt.uow(readonly=True) as uow:
        record = await uow.processes.by_entry_token(hashlib.sha256(token.encode()).hexdigest())
    assert record is not None
    return record.id


async def test_start_public_takes_only_the_fields_of_the_public_form(desk):
    for data, pointer in [
        ({"secret": "x"}, "/data/secret"),
        ({"name": "Al", "role": "admin"}, "/data/role"),
        ({"name": 5}, "/data/name"),
        ({"state": "done"}, "/data/state"),
    ]:
        with pytest.raises(DomainError) as info:
            await start_public(desk.rt, APPLY["$path"], data, IP)
        assert (info.value.code, info.value.pointer) == ("INVALID_INPUT", pointer)
    assert (await start_public(desk.rt, APPLY["$path"], {"name": None}, IP)).view.active


async def test_start_public_needs_a_public_initial_state(desk):
    # Without a public entry a workflow is, to the public, one that does not exist.
    assert await _code(start_public(desk.rt, TICKET["$path"], {}, IP)) == "NOT_FOUND"
    assert await _code(start_public(desk.rt, "ops/desk/missing", {}, IP)) == "NOT_FOUND"


async def test_public_calls_are_rate_limited_per_ip(db_url, clock, operator):
    from stateward.governance.keys import generate_keypair
    from stateward.runtime.access.genesis import init

    rt = await Runtime.open(
        Settings(database_url=db_url, public_rate_limit=3), clock=clock, node_key=generate_keypair()
    )
    try:
        await init(rt, operator)
        await Desk(rt, operator).setup(APPLY)
        entry = await start_public(rt, APPLY["$path"], {}, IP)
        await public_view(rt, entry.token, IP)
        await public_view(rt, entry.token, IP)
        assert await _code(public_view(rt, entry.token, IP)) == "RATE_LIMITED"
        await public_view(rt, entry.token, "198.51.100.1")  # another client is not affected
        clock.advance(20)  # 3 per minute: one request back every 20 s
        await public_view(rt, entry.token, IP)
        assert await _code(public_view(rt, entry.token, IP)) == "RATE_LIMITED"
    finally:
        await rt.close()


async def test_a_visitor_error_never_shows_the_instance_id_or_says_process(desk):
    entry = await start_public(desk.rt, APPLY["$path"], {}, IP)
    await advance_public(desk.rt, entry.token, "submit", {"fields": {"name": "Ann"}}, IP)
    digest = hashlib.sha256(entry.token.encode()).hexdigest()
    async with desk.rt.uow(readonly=True) as uow:
        record = await uow.processes.by_entry_token(digest)
    assert record is not None
    pid = record.id
    await perform_action(desk.rt, desk.admin, pid, "approve", {})
    with pytest.raises(DomainError) as done:
        await advance_public(desk.rt, entry.token, "save", {"fields": {"name": "Bo"}}, IP)
    error = done.value
    assert error.code == "INACTIVE_PROCESS"
    assert pid not in error.message and "process" not in error.message.lower()
    assert "this form" in error.message

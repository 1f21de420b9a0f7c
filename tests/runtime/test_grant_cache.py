"""Key statuses and roles cached across transactions (`runtime/core/grantcache.py`).

The cache saves the key-status and role reads of every transaction after the first, and
is checked by the grants generation read inside each transaction, so a revocation, a
rotation or a removed role committed by ANY runtime on the database is refused by the
very next event of every other runtime — no bus involved (the runtimes here share none).
Both databases; two runtimes on one database stand for two nodes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event

from stateward.domain.errors import DomainError
from stateward.governance.keys import KeyPair, generate_keypair
from stateward.persistence.access import grant_generation
from stateward.runtime.access.registry import (
    deploy_workflow,
    grant_role,
    revoke_key,
    revoke_role,
    rotate_key,
)
from stateward.runtime.core.act import act
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.commands import sign_as, start_instance
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

PATH = "customer/cache/counter"
COUNTER: dict[str, Any] = {
    "$version": "2.0",
    "$path": PATH,
    "initial": "open",
    "states": {"open": {"label": "Open"}, "closed": {"label": "Closed", "terminal": True}},
    "actions": {
        "bump": {
            "label": "Bump",
            "role": "analyst",
            "from": "open",
            "mutate": {"$increment": {"n": 1}},
        },
    },
}


@pytest.fixture
async def other_rt(db_url: str, clock: ManualClock) -> AsyncIterator[Runtime]:
    """A second runtime on the same database: another node (no shared bus, no shared
    memory; only the database between them)."""
    rt = await Runtime.open(Settings(database_url=db_url), clock=clock, node_key=generate_keypair())
    yield rt
    await rt.close()


async def _setup(rt: Runtime, operator: KeyPair) -> tuple[KeyPair, str]:
    """A member with `analyst` in `customer` and a counter instance it may bump."""
    await deploy_workflow(rt, operator, COUNTER)
    member = generate_keypair()
    await grant_role(rt, operator, "customer", member.public, ["analyst"])
    pid = (await start_instance(rt, operator.public, PATH, {})).record.id
    return member, pid


async def _bump(rt: Runtime, key: KeyPair, pid: str) -> None:
    await act(rt, sign_as(rt, key, pid, "bump", PATH, {}), attested=False)


class Statements:
    """The SQL a runtime's engine sends (every statement, as text)."""

    def __init__(self, rt: Runtime) -> None:
        self.sql: list[str] = []
        event.listen(rt.engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        self.sql.append(statement)

    def reading(self, table: str) -> list[str]:
        """The SELECTs of `table` seen so far."""
        return [s for s in self.sql if s.lstrip().upper().startswith("SELECT") and table in s]


async def test_later_transactions_take_statuses_and_roles_from_the_cache(admin_rt, operator):
    member, pid = await _setup(admin_rt, operator)
    await _bump(admin_rt, member, pid)  # fills the cache
    seen = Statements(admin_rt)
    cache = admin_rt.grant_cache
    hits = cache.hits
    for _ in range(3):
        await _bump(admin_rt, member, pid)
    assert seen.reading("key_status") == []
    assert seen.reading("role_grants") == []
    assert len(seen.reading("FROM meta ")) == 3  # the generation, once per transaction
    assert cache.hits >= hits + 6  # two keys' statuses (signer = actor: one) and the roles


async def test_every_grant_or_key_write_raises_the_generation(admin_rt, operator):
    async def generation() -> int:
        async with admin_rt.uow(readonly=True) as uow:
            return await grant_generation(uow.session)

    before = await generation()
    member = generate_keypair()
    await grant_role(admin_rt, operator, "customer", member.public, ["analyst"])
    granted = await generation()
    assert granted > before
    await revoke_role(admin_rt, operator, "customer", member.public, ["analyst"])
    revoked = await generation()
    assert revoked > granted
    await revoke_key(admin_rt, operator, member.public)
    assert await generation() > revoked


async def test_a_key_revoked_on_one_node_is_refused_by_the_next_event_on_another(
    admin_rt, other_rt, operator
):
    member, pid = await _setup(admin_rt, operator)
    await _bump(other_rt, member, pid)
    await _bump(other_rt, member, pid)  # the other node's cache holds the member's status
    assert other_rt.grant_cache.hits > 0
    await revoke_key(admin_rt, operator, member.public)
    with pytest.raises(DomainError) as info:
        await _bump(other_rt, member, pid)
    assert info.value.details["reason"] == "revoked"


async def test_a_key_rotated_on_one_node_is_refused_by_the_next_event_on_another(
    admin_rt, other_rt, operator
):
    member, pid = await _setup(admin_rt, operator)
    await _bump(other_rt, member, pid)
    await _bump(other_rt, member, pid)
    successor = generate_keypair()
    admin_rt.clock.advance(1)  # type: ignore[attr-defined]
    await rotate_key(admin_rt, member, successor.public)
    admin_rt.clock.advance(1)  # type: ignore[attr-defined]
    with pytest.raises(DomainError) as info:
        await _bump(other_rt, member, pid)
    assert info.value.details["reason"] == "revoked"
    await _bump(other_rt, successor, pid)  # the grants moved with the rotation


async def test_a_role_removed_on_one_node_stops_the_next_event_on_another(
    admin_rt, other_rt, operator
):
    member, pid = await _setup(admin_rt, operator)
    await _bump(other_rt, member, pid)
    await _bump(other_rt, member, pid)
    await revoke_role(admin_rt, operator, "customer", member.public, ["analyst"])
    with pytest.raises(DomainError):
        await _bump(other_rt, member, pid)
    # and granted again there: the other node sees it at once too
    await grant_role(admin_rt, operator, "customer", member.public, ["analyst"])
    await _bump(other_rt, member, pid)


async def test_a_batch_that_grants_and_then_acts_keeps_nothing_uncommitted(admin_rt, operator):
    """The grant and the event using it are in one group-commit batch; the transaction's
    reads after its own grant write never reach the runtime's cache."""
    from stateward.domain.bootstrap import bootstrap_path
    from stateward.domain.paths import registry_id
    from stateward.runtime.core.group import act_many

    member, pid = await _setup(admin_rt, operator)
    await revoke_role(admin_rt, operator, "customer", member.public, ["analyst"])
    other = generate_keypair()
    grant = sign_as(
        admin_rt, operator, registry_id("customer"), "grant_role", bootstrap_path("customer"),
        {"actor": other.public, "roles": ["analyst"]},
    )  # fmt: skip
    bump = sign_as(admin_rt, other, pid, "bump", PATH, {})
    results = await act_many(admin_rt, [grant, bump])
    assert not isinstance(results[0], BaseException), results[0]
    assert not isinstance(results[1], BaseException), results[1]
    # the member's removed role is not back from a cached read of before
    with pytest.raises(DomainError):
        await _bump(admin_rt, member, pid)
    cache = admin_rt.grant_cache
    async with admin_rt.uow(readonly=True) as uow:
        current = cache.generation == await grant_generation(uow.session)
        for (actor, namespace), roles in cache.roles.items():  # what it holds is true
            assert not current or roles == await uow.grants.roles_of(actor, namespace)


async def test_concurrent_grants_on_two_nodes_each_raise_the_generation(
    admin_rt, other_rt, operator
):
    """Registry events of two runtimes at once (different namespaces, so different
    registry rows): the generation row is taken after the registry rows, so they queue
    on it and never deadlock; every grant raises it, none is lost."""
    import asyncio

    async def generation() -> int:
        async with admin_rt.uow(readonly=True) as uow:
            return await grant_generation(uow.session)

    before = await generation()
    members = [generate_keypair().public for _ in range(6)]
    await asyncio.gather(
        *(
            grant_role(rt, operator, namespace, member, ["analyst"])
            for n, member in enumerate(members)
            for rt, namespace in [((admin_rt, other_rt)[n % 2], ("north", "south")[n % 2])]
        )
    )
    assert await generation() == before + len(members)
    async with other_rt.uow(readonly=True) as uow:
        for n, member in enumerate(members):
            assert await uow.grants.roles_of(member, ("north", "south")[n % 2]) == {"analyst"}

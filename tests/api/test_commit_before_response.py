"""Responses leave only after commit (issue 18): a `performAction` answer is never sent
before the transaction holding its event committed, and a transaction that fails at its
commit answers an error and stores nothing. The commit is held, or made to fail, at the
database step itself (`UnitOfWork.commit`'s sequencer step + COMMIT) through the real
HTTP stack, group commit on, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from graph_stack import Api, loan

from stateward.persistence import uow as uow_module

DEPLOY = "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }"
START = "mutation($w: String!) { startInstance(workflow: $w) { instanceId } }"
PERFORM = """mutation($i: ID!, $a: String!, $in: JSON) {
  performAction(instance: $i, action: $a, input: $in) { event { seq action } } }"""


async def _instance(api: Api) -> str:
    await api.ok(DEPLOY, {"d": loan()})
    pid = (await api.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["instanceId"]
    await api.ok(PERFORM, {"i": pid, "a": "submit", "in": {"fields": {"amount": 5}}})
    await api.ok('mutation($a:String!){grantRole(namespace:"acme",actor:$a,roles:["analyst"])'
                 "{namespace}}", {"a": api.admin.public})  # fmt: skip
    return str(pid)


async def _seq(api: Api, pid: str) -> int:
    async with api.runtime.uow(readonly=True) as uow:
        process = await uow.processes.get(pid)
    assert process is not None
    return process.seq


def _gate(monkeypatch: pytest.MonkeyPatch, step: Any) -> None:
    """Run `step(original, uow)` in place of the commit step of every unit of work
    (SQLite's one-round-trip tail, its multi-trip path, PostgreSQL's one request)."""
    for name in ("sequence_and_commit", "sequence_and_commit_pg", "sequence_and_commit_sqlite"):
        original = getattr(uow_module, name)

        async def gated(uow: Any, original: Any = original) -> Any:
            return await step(original, uow)

        monkeypatch.setattr(uow_module, name, gated)


async def test_the_answer_waits_for_the_commit(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = await _instance(api)
    before = await _seq(api, pid)
    entered, release = asyncio.Event(), asyncio.Event()

    async def held(original: Any, uow: Any) -> Any:
        if uow.sequencer.events:  # a writing transaction of an event
            entered.set()
            await release.wait()
        return await original(uow)

    _gate(monkeypatch, held)
    call = asyncio.create_task(api.ok(PERFORM, {"i": pid, "a": "note", "in": {"text": "x"}}))
    waiting = asyncio.create_task(entered.wait())
    await asyncio.wait({call, waiting}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    assert entered.is_set(), call.result() if call.done() else "no commit reached"
    await asyncio.sleep(0.3)
    assert not call.done(), "answered before its transaction committed"
    assert await _seq(api, pid) == before  # nothing visible yet
    release.set()
    answer = (await asyncio.wait_for(call, 30))["performAction"]
    assert answer["event"]["seq"] == before + 1 == await _seq(api, pid)


async def test_a_commit_that_fails_answers_an_error_and_stores_nothing(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = await _instance(api)
    before = await _seq(api, pid)

    async def crashes(original: Any, uow: Any) -> Any:
        if uow.sequencer.events:
            raise RuntimeError("injected: the database went away before COMMIT")
        return await original(uow)

    _gate(monkeypatch, crashes)
    body = await api.gql(PERFORM, {"i": pid, "a": "note", "in": {"text": "lost"}})
    assert body.get("errors"), body
    assert not (body.get("data") or {}).get("performAction")
    monkeypatch.undo()
    assert await _seq(api, pid) == before
    again = await api.ok(PERFORM, {"i": pid, "a": "note", "in": {"text": "kept"}})
    assert again["performAction"]["event"]["seq"] == before + 1

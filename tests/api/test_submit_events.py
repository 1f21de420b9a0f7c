"""`submitEvents`: many client-signed envelopes in one request, each all-or-nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from graph_stack import Api, loan
from sqlalchemy import event

from stateward.persistence import uow as uow_module
from stateward.runtime.core.commands import sign_as
from stateward.runtime.core.group import committer_of
from stateward.runtime.insight.verify import verify

DEPLOY = "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }"
START = 'mutation { startInstance(workflow: "acme/loans/loan") { instanceId } }'
MANY = """mutation($l: [SignedEventInput!]!) { submitEvents(events: $l) {
  index duplicate error { code pointer } result { event { seq action }
  instance { instanceId state { key } data } } } }"""
READ = "query($i: ID!) { instance(id: $i) { state { key } data } }"


async def _started(api: Api, count: int) -> list[str]:
    await api.ok(DEPLOY, {"d": loan()})
    await api.ok('mutation($a:String!){grantRole(namespace:"acme",actor:$a,roles:["manager"])'
                 "{members{actor}}}", {"a": api.admin.public})  # fmt: skip
    return [(await api.ok(START))["startInstance"]["instanceId"] for _ in range(count)]


def _signed(api: Api, instance: str, action: str, data: dict[str, Any]) -> dict[str, Any]:
    return sign_as(api.runtime, api.admin, instance, action, "acme/loans/loan", data).to_json()


async def test_a_refused_event_in_a_batch_rolls_back_nothing_else(api: Api) -> None:
    a, b, c = await _started(api, 3)
    forged = _signed(api, b, "submit", {"fields": {"amount": 7}})
    forged["signature"] = _signed(api, b, "submit", {"fields": {"amount": 8}})["signature"]
    items = [
        _signed(api, a, "submit", {"fields": {"amount": 1}}),
        forged,  # refused before the writer: a bad signature
        _signed(api, c, "approve", {}),  # refused by the engine (not from intake)
        _signed(api, b, "submit", {"fields": {"amount": 2}}),
        {"event": {"v": 1}, "signature": "x", "signer": "y"},  # refused when parsed
    ]
    results = (await api.ok(MANY, {"l": items}, token=None))["submitEvents"]
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4]
    assert results[0]["result"]["instance"]["state"]["key"] == "review"
    assert results[3]["result"]["instance"]["data"]["amount"] == 2
    assert results[1]["error"]["code"] == "BAD_SIGNATURE" and results[1]["result"] is None
    assert results[1]["error"]["pointer"].startswith("/events/1")
    assert results[2]["error"]["code"] not in (None, "INTERNAL_ERROR")
    assert results[2]["error"]["pointer"].startswith("/events/2")
    assert results[4]["error"]["code"] == "INVALID_INPUT"
    assert results[4]["error"]["pointer"].startswith("/events/4/")
    states = [(await api.ok(READ, {"i": i}))["instance"]["state"]["key"] for i in (a, b, c)]
    assert states == ["review", "review", "intake"]  # c unchanged, a and b applied


async def test_events_of_one_instance_apply_in_order_in_one_batch(api: Api) -> None:
    [a] = await _started(api, 1)
    committer = committer_of(api.runtime)
    batches = committer.batches
    items = [_signed(api, a, "submit", {"fields": {"amount": 5}})]
    items += [_signed(api, a, "note", {"text": f"n{i}"}) for i in range(70)]  # > MAX_BATCH
    results = (await api.ok(MANY, {"l": items}, token=None))["submitEvents"]
    assert [r["error"] for r in results] == [None] * 71
    assert [r["result"]["event"]["seq"] for r in results] == list(range(2, 73))
    assert results[-1]["result"]["instance"]["data"]["notes"] == [f"n{i}" for i in range(70)]
    assert committer.batches == batches + 1  # one group-commit batch for the request


async def test_verify_is_clean_after_a_submit_events_run_and_resending_is_duplicate(
    api: Api,
) -> None:
    ids = await _started(api, 4)
    items = [_signed(api, i, "submit", {"fields": {"amount": n}}) for n, i in enumerate(ids)]
    items += [_signed(api, i, "note", {"text": "x"}) for i in ids]
    first = (await api.ok(MANY, {"l": items}, token=None))["submitEvents"]
    again = (await api.ok(MANY, {"l": items}, token=None))["submitEvents"]
    assert [r["duplicate"] for r in first] == [False] * 8
    assert [r["duplicate"] for r in again] == [True] * 8
    report = await verify(api.runtime)
    assert report.valid, report.problems


async def test_a_batch_is_bounded_and_an_empty_one_is_empty(api: Api) -> None:
    assert (await api.ok(MANY, {"l": []}, token=None))["submitEvents"] == []
    junk = {"event": {}, "signature": "", "signer": ""}
    body = await api.gql(MANY, {"l": [junk] * 1001}, token=None)
    assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    assert body["errors"][0]["extensions"]["pointer"] == "/events"


async def test_an_unreadable_result_is_not_found_for_that_item_only(api: Api) -> None:
    [a] = await _started(api, 1)
    stranger, token = await api.user()  # no role anywhere: may not act nor read
    own = sign_as(api.runtime, stranger, a, "submit", "acme/loans/loan",
                  {"fields": {"amount": 1}}).to_json()  # fmt: skip
    results = (await api.ok(MANY, {"l": [own]}, token=token))["submitEvents"]
    assert results[0]["result"] is None
    assert results[0]["error"]["code"] in ("FORBIDDEN", "NOT_FOUND")
    assert (await api.ok(READ, {"i": a}))["instance"]["state"]["key"] == "intake"


async def test_the_answers_read_each_signers_grants_once_after_the_commits(api: Api) -> None:
    """Each answer passes the read rule of its signer (roles read after the commit); a
    request of many items by one signer reads them at most once — the batch's own read,
    kept by the runtime's grant cache — not once per item."""
    ids = await _started(api, 4)
    items = [_signed(api, i, "submit", {"fields": {"amount": 1}}) for i in ids]
    items += [_signed(api, i, "note", {"text": str(n)}) for n in range(9) for i in ids]
    reads: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FROM role_grants" in statement:
            reads.append(statement)

    target = api.runtime.engine.sync_engine
    event.listen(target, "before_cursor_execute", record)
    try:
        results = (await api.ok(MANY, {"l": items}, token=None))["submitEvents"]
    finally:
        event.remove(target, "before_cursor_execute", record)
    assert [r["error"] for r in results] == [None] * 40
    assert all(r["result"]["instance"] is not None for r in results)
    assert len(reads) <= 1


async def test_the_answers_take_the_signers_roles_from_the_batch_at_its_commit(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read rule of a client-signed answer takes its actor's roles as the batch's own
    transaction saw them after its last write (`ActResult.actor_roles`): no transaction
    of its own after the commit, for `submitEvents` and `submitEvent`; an item refused
    gets no roles and is answered with its error as before."""
    from stateward.resolvers import writes

    ids = await _started(api, 3)
    reads: list[tuple[str, str]] = []
    read = writes.current_roles

    async def counted(rt: Any, actor: str, namespace: str) -> Any:
        reads.append((actor, namespace))
        return await read(rt, actor, namespace)

    monkeypatch.setattr(writes, "current_roles", counted)
    items = [_signed(api, i, "submit", {"fields": {"amount": 1}}) for i in ids]
    items.append(_signed(api, ids[0], "submit", {"fields": {"amount": 2}}))  # WRONG_STATE
    results = (await api.ok(MANY, {"l": items}, token=None))["submitEvents"]
    assert [r["error"] for r in results[:3]] == [None] * 3
    assert results[3]["error"]["code"] not in (None, "NOT_FOUND")
    assert all(
        r["result"]["instance"]["instanceId"] == i for r, i in zip(results[:3], ids, strict=True)
    )
    one = _signed(api, ids[1], "note", {"text": "x"})
    query = """mutation($e:JSON!,$s:String!,$g:String!){submitEvent(event:$e,signature:$s,
      signer:$g){instance{instanceId}}}"""
    answer = await api.ok(query, {"e": one["event"], "s": one["signature"], "g": one["signer"]},
                          token=None)  # fmt: skip
    assert answer["submitEvent"]["instance"]["instanceId"] == ids[1]
    assert reads == []


async def test_no_answer_leaves_before_the_batch_committed(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Responses leave only after commit: the request is held while its batch's COMMIT
    is, nothing is visible meanwhile, and every item is answered once it committed; its
    bus messages were published, in commit order, before the answer."""
    ids = await _started(api, 3)
    items = [_signed(api, i, "submit", {"fields": {"amount": n}}) for n, i in enumerate(ids)]
    entered, release = asyncio.Event(), asyncio.Event()
    for name in ("sequence_and_commit", "sequence_and_commit_pg", "sequence_and_commit_sqlite"):
        original = getattr(uow_module, name)

        async def held(uow: Any, original: Any = original) -> Any:
            if uow.sequencer.events:
                entered.set()
                await release.wait()
            return await original(uow)

        monkeypatch.setattr(uow_module, name, held)
    published: list[dict[str, Any]] = []

    async def seen(messages: Any) -> None:
        published.extend(messages)

    api.runtime.publishers.append(seen)
    call = asyncio.create_task(api.ok(MANY, {"l": items}, token=None))
    await asyncio.wait_for(entered.wait(), 30)
    await asyncio.sleep(0.3)
    assert not call.done(), "answered before its batch committed"
    states = [(await api.ok(READ, {"i": i}))["instance"]["state"]["key"] for i in ids]
    assert states == ["intake"] * 3  # nothing visible yet
    assert published == []
    release.set()
    results = (await asyncio.wait_for(call, 30))["submitEvents"]
    api.runtime.publishers.remove(seen)
    assert [r["error"] for r in results] == [None] * 3
    advanced = [m["instanceId"] for m in published if m["type"] == "workflow.advanced"]
    assert advanced == ids  # all published before the answer, in commit order
    assert [m["id"] for m in published] == sorted(m["id"] for m in published)


async def test_a_forged_signature_among_many_is_refused_alone(api: Api) -> None:
    """A forged signature in a larger batch is BAD_SIGNATURE for that item only; the
    others are applied."""
    ids = await _started(api, 10)
    items = [_signed(api, i, "submit", {"fields": {"amount": n}}) for n, i in enumerate(ids)]
    items[4]["signature"] = _signed(api, ids[4], "submit", {"fields": {"amount": 99}})["signature"]
    results = (await api.ok(MANY, {"l": items}, token=None))["submitEvents"]
    codes = [r["error"]["code"] if r["error"] else None for r in results]
    assert codes == [None] * 4 + ["BAD_SIGNATURE"] + [None] * 5


async def test_an_items_duplicate_is_a_plain_leaf_with_the_same_answer(api: Api) -> None:
    """`SubmittedEvent.duplicate` is a plain attribute (completed by `schema/leaves.py`,
    not one resolver call per item) and answers as before: false for a new event, true for
    the same envelope sent again, false for a refused item."""
    from stateward.schema import leaves

    schema = api.app.state.schema._schema
    kind = schema.get_type("SubmittedEvent")
    field = kind.fields["duplicate"]
    assert leaves._plain_leaf(field, []) is not None
    [a] = await _started(api, 1)
    item = _signed(api, a, "submit", {"fields": {"amount": 1}})
    bad = _signed(api, a, "submit", {"fields": {"amount": 2}})  # WRONG_STATE after the first
    first = (await api.ok(MANY, {"l": [item, bad]}))["submitEvents"]
    again = (await api.ok(MANY, {"l": [item]}))["submitEvents"]
    assert [r["duplicate"] for r in first + again] == [False, False, True]
    assert first[1]["error"] is not None and again[0]["error"] is None


async def test_a_client_catching_up_resends_some_and_gets_each_answer(api: Api) -> None:
    """A request mixing envelopes applied before with new ones (an offline client
    catching up after a lost answer): the resent ones answer duplicate with the stored
    event, one reusing a nonce under another envelope is REPLAYED at its own index, the
    new ones are applied, in request order, and the log verifies."""
    ids = await _started(api, 4)
    sent = [_signed(api, i, "submit", {"fields": {"amount": 1}}) for i in ids]
    sent += [_signed(api, i, "note", {"text": f"n{n}"}) for n, i in enumerate(ids * 2)]
    first = (await api.ok(MANY, {"l": sent}, token=None))["submitEvents"]
    assert [r["duplicate"] for r in first] == [False] * 12
    from stateward.governance.envelope import build_envelope
    from stateward.governance.verification import sign_envelope

    other = build_envelope(
        api.runtime.net, ids[0], "note", "acme/loans/loan", {"text": "other"},
        api.admin.public, api.runtime.clock.now(), nonce=sent[3]["event"]["nonce"],
    )  # fmt: skip
    new = [_signed(api, i, "note", {"text": "later"}) for i in ids]
    items = [new[0], sent[0], new[1], sent[5], sign_envelope(other, api.admin).to_json(),
             new[2], sent[11], new[3], sent[0]]  # fmt: skip
    results = (await api.ok(MANY, {"l": items}, token=None))["submitEvents"]
    assert [r["index"] for r in results] == list(range(9))
    assert [r["duplicate"] for r in results] == [
        False, True, False, True, False, False, True, False, True
    ]  # fmt: skip
    assert results[4]["error"]["code"] == "REPLAYED"
    assert results[4]["error"]["pointer"].startswith("/events/4")
    assert results[1]["result"]["event"] == first[0]["result"]["event"]
    assert results[6]["result"]["event"] == first[11]["result"]["event"]
    assert all(results[i]["error"] is None for i in (0, 1, 2, 3, 5, 6, 7, 8))
    report = await verify(api.runtime)
    assert report.valid, report.problems


async def test_results_are_built_only_when_selected_and_duplicates_answer_either_way(
    api: Api,
) -> None:
    """Without `result` in the selection the items' results are not built (a bulk load's
    `duplicate error{code}`), and `duplicate` answers the same; a fragment selecting it
    gets it."""
    from stateward.schema.types import results as results_module

    [a] = await _started(api, 1)
    item = _signed(api, a, "submit", {"fields": {"amount": 1}})
    lean = "mutation($l:[SignedEventInput!]!){submitEvents(events:$l){duplicate error{code}}}"
    built: list[object] = []
    original = results_module.ActionResult.from_domain.__func__  # type: ignore[attr-defined]

    def counting(cls, result):  # type: ignore[no-untyped-def]
        built.append(result)
        return original(cls, result)

    results_module.ActionResult.from_domain = classmethod(counting)  # type: ignore[method-assign,assignment]
    try:
        first = (await api.ok(lean, {"l": [item]}, token=None))["submitEvents"]
        again = (await api.ok(lean, {"l": [item]}, token=None))["submitEvents"]
        assert built == []
        framed = """mutation($l:[SignedEventInput!]!){submitEvents(events:$l){
          duplicate ...F }} fragment F on SubmittedEvent { result { event { seq } } }"""
        third = (await api.ok(framed, {"l": [item]}, token=None))["submitEvents"]
    finally:
        results_module.ActionResult.from_domain = classmethod(original)  # type: ignore[method-assign,assignment]
    assert first == [{"duplicate": False, "error": None}]
    assert again == [{"duplicate": True, "error": None}]
    assert third == [{"duplicate": True, "result": {"event": {"seq": 2}}}] and len(built) == 1

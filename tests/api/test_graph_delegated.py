"""Delegated stages (issue 13, seed §4 `delegated`): the kernel hands a stage to a surface.

Entering a `delegated` state emits `workflow.delegated` and posts the instance context with
a callback token to the surface's webhook; workers list, lock and complete tasks over
HTTP. The attacks: a token used on another instance or stage, after the stage moved on,
after it expired or after another worker locked the task; a worker locking a task another
holds; a worker of one tenant listing another's tasks.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from graph_stack import Api, open_stack
from test_graph_workflow_webhook import Catcher

from stateward.runtime import ticker
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.insight.verify import verify

DOC: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/docs/scan",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "ocr": {"label": "OCR", "mode": "delegated", "surface": "acme-ocr",
                "form": {"fields": {"result": {"type": "string"}}}},
        "check": {"label": "Check", "mode": "delegated", "surface": "acme-ocr"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {"role": "*", "from": "intake", "to": "ocr",
                   "mutate": {"$set": {"name": "input.name"}}},
        "progress": {"role": "clerk", "from": "ocr",
                     "mutate": {"$set": {"pct": "input.pct"}}},
        "finish": {"role": "clerk", "from": "ocr", "to": "done",
                   "mutate": {"$set": {"result": "input.result"}}},
        "recheck": {"role": "clerk", "from": "ocr", "to": "check"},
        "back": {"role": "clerk", "from": "check", "to": "ocr"},
    },
}  # fmt: skip

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
SET = """mutation($n:String!,$u:String,$s:String,$f:String){
  setWebhook(namespace:$n,url:$u,secret:$s,surface:$f){namespace}}"""
START = """mutation($w:String!,$m:JSON){startInstance(workflow:$w,metadata:$m){instanceId}}"""
SUBMIT = """mutation($i:ID!,$n:String!){performAction(instance:$i,action:"submit",
  input:{name:$n}){instance{status}}}"""
TASKS = """query($s:String,$n:String,$a:Boolean){delegatedTasks(surface:$s,namespace:$n,
  availableOnly:$a){totalCount nodes{id instanceId namespace state surface data form metadata
  lockedBy}}}"""
LOCK = """mutation($id:ID!,$s:Int){lockDelegatedTask(id:$id,seconds:$s){token lockedUntil
  task{id state}}}"""
COMPLETE = """mutation($t:String!,$a:String,$in:JSON){completeDelegatedTask(token:$t,action:$a,
  input:$in){instanceId action state status}}"""
DELIVERIES = """query($n:String!){webhookDeliveries(namespace:$n){edges{node{payload}}}}"""
INSTANCE = """query($i:ID!){instance(id:$i){state{key} status data}}"""
STATE = """query($p:String!){workflow(path:$p){states{key type autoTransition mode surface}}}"""


def scan(path: str = "acme/docs/scan") -> dict[str, Any]:
    value = copy.deepcopy(DOC)
    value["$path"] = path
    return value


def code(body: dict[str, Any]) -> str:
    assert body.get("errors"), body
    return str(body["errors"][0]["extensions"]["code"])


async def _instance(api: Api, name: str, path: str = "acme/docs/scan") -> str:
    pid = (await api.ok(START, {"w": path, "m": {"source": "mail"}}))["startInstance"]["instanceId"]
    await api.ok(SUBMIT, {"i": pid, "n": name})
    return str(pid)


@pytest.fixture
def catcher() -> Any:
    server = Catcher()
    yield server
    server.close()


async def _webhook_tokens(api: Api, catcher: Catcher) -> dict[str, dict[str, Any]]:
    """Deliver due webhooks; the posted bodies by instance id."""
    await ticker.tick(api.runtime)
    return {json.loads(b)["instanceId"]: json.loads(b) for _, _, b in catcher.posts}


async def test_entering_a_delegated_state_posts_the_context_and_a_scoped_token(
    api: Api, catcher: Catcher
) -> None:
    await api.ok(DEPLOY, {"d": scan()})
    await api.ok(SET, {"n": "acme", "u": f"{catcher.base}/ocr", "s": "s3cret", "f": "acme-ocr"})
    one = await _instance(api, "alpha")
    two = await _instance(api, "beta")
    posted = await _webhook_tokens(api, catcher)
    assert set(posted) == {one, two}
    body = posted[one]
    assert body["type"] == "workflow.delegated" and body["state"] == "ocr"
    assert body["data"]["name"] == "alpha" and body["metadata"] == {"source": "mail"}
    assert body["form"] == {"fields": {"result": {"type": "string"}}}
    token, other = body["callback"]["token"], posted[two]["callback"]["token"]
    # the token acts on that stage only: not an action of another state, not a `$` op
    assert code(await api.gql(COMPLETE, {"t": token, "a": "back"}, token=None)) in (
        "WRONG_STATE", "NO_APPLICABLE_ACTION", "FORBIDDEN")  # fmt: skip
    assert code(await api.gql(COMPLETE, {"t": token, "a": "$cancel"}, token=None)) == (
        "INVALID_INPUT"
    )
    # a self-action keeps the stage (and the token) open
    done = await api.ok(COMPLETE, {"t": token, "a": "progress", "in": {"pct": 50}}, token=None)
    assert done["completeDelegatedTask"]["state"] == "ocr"
    # the stage moves on: the token is over, though the instance comes back to that state
    moved = await api.ok(COMPLETE, {"t": token, "a": "recheck"}, token=None)
    assert moved["completeDelegatedTask"]["state"] == "check"
    assert code(await api.gql(COMPLETE, {"t": token, "a": "back"}, token=None)) == (
        "DELEGATION_CLOSED"
    )
    catcher.posts.clear()
    # the second task's token still opens only its own instance
    finished = await api.ok(COMPLETE, {"t": other, "a": "finish", "in": {"result": "B"}},
                            token=None)  # fmt: skip
    assert finished["completeDelegatedTask"] == {
        "instanceId": two, "action": "finish", "state": "done", "status": "COMPLETED"}  # fmt: skip
    assert (await api.ok(INSTANCE, {"i": one}))["instance"]["state"]["key"] == "check"
    assert code(await api.gql(COMPLETE, {"t": other}, token=None)) == "DELEGATION_CLOSED"
    assert code(await api.gql(COMPLETE, {"t": "x" * 43}, token=None)) == "NOT_FOUND"
    # the namespace's admins see the deliveries, never the token
    listed = await api.ok(DELIVERIES, {"n": "acme"})
    payloads = [e["node"]["payload"] for e in listed["webhookDeliveries"]["edges"]]
    assert len(payloads) == 3 and token not in json.dumps(payloads)  # ocr x2, check
    assert {p["callback"]["token"] for p in payloads} == {"[redacted]"}
    # the delegates' events replay in verify like any other
    report = await verify(api.runtime)
    assert report.valid, report.problems


async def test_a_callback_token_expires(api: Api, catcher: Catcher) -> None:
    clock = ManualClock(datetime.now(UTC))
    api.runtime.clock = clock
    await api.ok(DEPLOY, {"d": scan()})
    await api.ok(SET, {"n": "acme/docs", "u": f"{catcher.base}/ocr", "f": "acme-ocr"})
    pid = await _instance(api, "alpha")
    token = (await _webhook_tokens(api, catcher))[pid]["callback"]["token"]
    clock.advance(api.runtime.settings.delegation_token_ttl + 1)
    assert code(await api.gql(COMPLETE, {"t": token, "a": "finish"}, token=None)) == (
        "DELEGATION_EXPIRED"
    )


async def test_a_lock_is_exclusive_replaces_the_webhook_token_and_lapses(
    api: Api, catcher: Catcher
) -> None:
    clock = ManualClock(datetime.now(UTC))
    api.runtime.clock = clock
    await api.ok(DEPLOY, {"d": scan()})
    await api.ok(SET, {"n": "acme", "u": f"{catcher.base}/ocr", "f": "acme-ocr"})
    pid = await _instance(api, "alpha")
    hooked = (await _webhook_tokens(api, catcher))[pid]["callback"]["token"]
    _, first = await api.user("acme/docs", "worker")
    _, second = await api.user("acme", "worker")
    _, reader = await api.user("acme/docs", "clerk")
    listed = (await api.ok(TASKS, {"s": "acme-ocr"}, token=first))["delegatedTasks"]
    assert listed["totalCount"] >= 0
    [task] = listed["nodes"]
    assert task["instanceId"] == pid and task["data"]["name"] == "alpha"
    assert task["metadata"] == {"source": "mail"}
    # a reader without a work role sees no tasks and may not lock
    assert (await api.ok(TASKS, {"s": "acme-ocr"}, token=reader))["delegatedTasks"]["nodes"] == []
    assert code(await api.gql(LOCK, {"id": task["id"], "s": 60}, token=reader)) == "FORBIDDEN"
    lock = (await api.ok(LOCK, {"id": task["id"], "s": 60}, token=first))["lockDelegatedTask"]
    assert code(await api.gql(LOCK, {"id": task["id"], "s": 60}, token=second)) == (
        "ALREADY_CLAIMED"
    )
    # a held task is not offered to others
    available = await api.ok(TASKS, {"s": "acme-ocr", "a": True}, token=second)
    assert available["delegatedTasks"]["nodes"] == []
    # the webhook's token stopped working when the worker locked the task
    assert code(await api.gql(COMPLETE, {"t": hooked, "a": "finish"}, token=None)) == ("NOT_FOUND")
    # the lock lapses (a crashed worker): another worker takes it; the first token is dead
    clock.advance(61)
    again = (await api.ok(LOCK, {"id": task["id"], "s": 60}, token=second))["lockDelegatedTask"]
    assert code(await api.gql(COMPLETE, {"t": lock["token"], "a": "finish"}, token=None)) == (
        "NOT_FOUND"
    )
    done = await api.ok(COMPLETE, {"t": again["token"], "a": "finish", "in": {"result": "A"}},
                        token=None)  # fmt: skip
    assert done["completeDelegatedTask"]["status"] == "COMPLETED"
    assert code(await api.gql(LOCK, {"id": task["id"], "s": 60}, token=second)) == (
        "DELEGATION_CLOSED"
    )


async def test_workers_see_only_their_tenants_tasks(api: Api) -> None:
    await api.ok(DEPLOY, {"d": scan()})
    await api.ok(DEPLOY, {"d": scan("globex/docs/scan")})
    ours = await _instance(api, "alpha")
    theirs = await _instance(api, "omega", "globex/docs/scan")
    _, acme = await api.user("acme", "worker")
    _, globex = await api.user("globex", "worker")
    seen = (await api.ok(TASKS, {"s": "acme-ocr"}, token=acme))["delegatedTasks"]["nodes"]
    assert [t["instanceId"] for t in seen] == [ours]
    other = (await api.ok(TASKS, {"n": "acme"}, token=globex))["delegatedTasks"]["nodes"]
    assert other == []
    [their_task] = (await api.ok(TASKS, {}, token=globex))["delegatedTasks"]["nodes"]
    assert their_task["instanceId"] == theirs
    # locking another tenant's task is answered as if it did not exist
    assert code(await api.gql(LOCK, {"id": their_task["id"]}, token=acme)) == "NOT_FOUND"
    # and no webhook was registered: no token was issued, the task waits for a worker
    assert code(await api.gql(COMPLETE, {"t": "a" * 43}, token=None)) == "NOT_FOUND"


async def test_the_state_node_shows_type_and_auto_transition(api: Api) -> None:
    await api.ok(DEPLOY, {"d": scan()})
    states = (await api.ok(STATE, {"p": "acme/docs/scan"}))["workflow"]["states"]
    ocr = next(s for s in states if s["key"] == "ocr")
    assert ocr == {"key": "ocr", "type": "SIMPLE", "autoTransition": False,
                   "mode": "DELEGATED", "surface": "acme-ocr"}  # fmt: skip


@pytest.fixture
async def http_url(api: Api) -> AsyncIterator[str]:
    """The app served by a real uvicorn on a free port, in this test's event loop."""
    config = uvicorn.Config(api.app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/graphql"
    server.should_exit = True
    await task


async def test_two_worker_processes_complete_each_task_exactly_once(
    api: Api, http_url: str
) -> None:
    await api.ok(DEPLOY, {"d": scan()})
    pids = [await _instance(api, f"doc{n}") for n in range(4)]
    worker = Path(__file__).parent / "workers" / "delegated_worker.py"
    procs = []
    for name in ("w1", "w2"):  # two workers, each its own actor
        _, bearer = await api.user("acme", "worker")
        procs.append(
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(worker),
                http_url,
                bearer,
                "acme-ocr",
                "4",
                name,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        )

    async def all_done() -> None:
        while True:
            states = [(await api.ok(INSTANCE, {"i": p}))["instance"] for p in pids]
            if all(s["status"] == "COMPLETED" for s in states):
                return
            await asyncio.sleep(0.2)

    await asyncio.wait_for(all_done(), 60)
    lines: list[dict[str, Any]] = []
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
        out, _ = await proc.communicate()
        lines += [json.loads(x) for x in out.decode().splitlines() if x.strip()]
    completed = [line for line in lines if "task" in line]
    assert sorted(line["instanceId"] for line in completed) == sorted(pids)  # once each
    for line in lines:
        if "lost" in line:  # the other worker got there first
            assert line["code"] in ("ALREADY_CLAIMED", "DELEGATION_CLOSED")
    for pid in pids:
        data = (await api.ok(INSTANCE, {"i": pid}))["instance"]["data"]
        assert data["result"] == data["name"].upper()


async def test_a_log_with_delegates_verifies_offline_and_restores_without_reposting(
    api: Api, catcher: Catcher, sqlite_db_url: str
) -> None:
    from stateward.runtime.insight.logfile import export_lines, parse_lines
    from stateward.runtime.insight.logverify import verify_log
    from stateward.runtime.insight.restore import restore
    from stateward.settings import Settings

    await api.ok(DEPLOY, {"d": scan()})
    await api.ok(SET, {"n": "acme", "u": f"{catcher.base}/ocr", "f": "acme-ocr"})
    pid = await _instance(api, "alpha")
    token = (await _webhook_tokens(api, catcher))[pid]["callback"]["token"]
    await api.ok(COMPLETE, {"t": token, "a": "progress", "in": {"pct": 10}}, token=None)
    await api.ok(COMPLETE, {"t": token, "a": "finish", "in": {"result": "A"}}, token=None)
    lines = [json.dumps(x) async for x in export_lines(api.runtime)]
    log = parse_lines(lines)
    report = verify_log(log)
    assert report.valid, [p.line() for p in report.problems]
    rebuilt = await restore(Settings(database_url=sqlite_db_url), log)
    assert rebuilt.events == len(log.events)
    # history is not handed to the surface again: the rebuilt database queued no delivery
    from stateward.runtime.core.services import Runtime
    from stateward.runtime.sweeps.webhooks import list_deliveries

    again = await Runtime.open(Settings(database_url=sqlite_db_url), register_node=False)
    try:
        assert await list_deliveries(again) == []
    finally:
        await again.close()


async def test_the_write_path_itself_refuses_a_delegate_out_of_its_stay(api: Api) -> None:
    """What the service checks before `act` is checked again under the process lock: an
    event by a delegate (as if it raced past the service's check) is refused for another
    instance, with a replaced token, and once the stage moved on."""
    from stateward.domain.errors import DomainError
    from stateward.runtime.core.act import act
    from stateward.runtime.core.commands import attest
    from stateward.runtime.core.delegation import delegate_id, token_hash

    await api.ok(DEPLOY, {"d": scan()})
    one, two = await _instance(api, "alpha"), await _instance(api, "beta")
    _, worker = await api.user("acme", "worker")
    tasks = (await api.ok(TASKS, {"s": "acme-ocr"}, token=worker))["delegatedTasks"]["nodes"]
    task = next(t for t in tasks if t["instanceId"] == one)
    first = (await api.ok(LOCK, {"id": task["id"]}, token=worker))["lockDelegatedTask"]
    second = (await api.ok(LOCK, {"id": task["id"]}, token=worker))["lockDelegatedTask"]
    rt = api.runtime

    async def as_delegate(token: str, instance: str, action: str) -> str:
        actor = delegate_id(task["id"], token_hash(token))
        signed = attest(rt, actor, instance, action, "acme/docs/scan", {})
        try:
            await act(rt, signed, attested=True)
        except DomainError as error:
            return error.code
        return "ok"

    assert await as_delegate(second["token"], two, "recheck") == "DELEGATION_CLOSED"
    assert await as_delegate(first["token"], one, "recheck") == "DELEGATION_EXPIRED"
    assert await as_delegate(second["token"], one, "recheck") == "ok"
    assert await as_delegate(second["token"], one, "back") == "DELEGATION_CLOSED"
    state = (await api.ok(INSTANCE, {"i": two}))["instance"]["state"]["key"]
    assert state == "ocr"  # the other instance was never touched


async def test_a_migration_into_a_delegated_state_hands_it_over_afresh(
    api: Api, catcher: Catcher
) -> None:
    await api.ok(DEPLOY, {"d": scan()})
    await api.ok(SET, {"n": "acme", "u": f"{catcher.base}/ocr", "f": "acme-ocr"})
    pid = await _instance(api, "alpha")
    old = (await _webhook_tokens(api, catcher))[pid]["callback"]["token"]
    v2 = scan()
    v2["states"]["ocr"]["surface"] = "acme-ocr2"
    await api.ok("mutation($d:JSON!){updateWorkflow(definition:$d){id}}", {"d": v2})
    await api.ok(
        "mutation($i:ID!){migrateInstance(instance:$i,toVersion:2){plan{toState}}}", {"i": pid}
    )
    # the old surface's token is over; the task is the new surface's now
    assert code(await api.gql(COMPLETE, {"t": old, "a": "finish"}, token=None)) == (
        "DELEGATION_CLOSED"
    )
    _, worker = await api.user("acme", "worker")
    assert (await api.ok(TASKS, {"s": "acme-ocr"}, token=worker))["delegatedTasks"]["nodes"] == []
    [task] = (await api.ok(TASKS, {"s": "acme-ocr2"}, token=worker))["delegatedTasks"]["nodes"]
    assert task["instanceId"] == pid and task["state"] == "ocr"


async def test_guessing_callback_tokens_is_limited_per_client(
    db_url: str, catcher: Catcher
) -> None:
    """Each unknown token takes one of the client's failed lookups (3 a minute here); a
    client with none left is refused before the lookup, its good token included, while
    another client's good token works as often as it is used (successes take nothing)."""
    stack, close = await open_stack(db_url, callback_failure_limit=3,
                                    trusted_proxies=("127.0.0.1",))  # fmt: skip
    try:
        await stack.ok(DEPLOY, {"d": scan()})
        await stack.ok(SET, {"n": "acme", "u": f"{catcher.base}/ocr", "s": "s", "f": "acme-ocr"})
        pid = await _instance(stack, "alpha")
        token = (await _webhook_tokens(stack, catcher))[pid]["callback"]["token"]

        async def complete(client: str, guess: str, **variables: Any) -> str | None:
            response = await stack.client.post(
                "/graphql",
                json={"query": COMPLETE, "variables": {"t": guess, **variables}},
                headers={"X-Forwarded-For": client},
            )
            errors = response.json().get("errors")
            return str(errors[0]["extensions"]["code"]) if errors else None

        guesser, worker = "198.51.100.7", "198.51.100.8"
        guesses = ["A" * 43, "B" * 43, "not a token", "C" * 43]
        assert [await complete(guesser, g) for g in guesses] == ["NOT_FOUND"] * 3 + ["RATE_LIMITED"]
        assert await complete(guesser, token, a="progress", **{"in": {"pct": 1}}) == (
            "RATE_LIMITED"
        )
        for pct in range(6):  # more than the limit: successes are not counted
            assert await complete(worker, token, a="progress", **{"in": {"pct": pct}}) is None
        assert await complete(worker, "D" * 43) == "NOT_FOUND"
        state = (await stack.ok(INSTANCE, {"i": pid}))["instance"]
        assert state["data"]["pct"] == 5
    finally:
        await close()


async def test_a_forged_forwarded_for_does_not_buy_fresh_callback_lookups(
    db_url: str,
) -> None:
    """Without a trusted proxy the `X-Forwarded-For` header is ignored: every forged
    address is the same client, whose failed lookups run out."""
    stack, close = await open_stack(db_url, callback_failure_limit=2)
    try:
        codes = []
        for n in range(4):
            response = await stack.client.post(
                "/graphql",
                json={"query": COMPLETE, "variables": {"t": "Z" * 43}},
                headers={"X-Forwarded-For": f"203.0.113.{n}"},
            )
            codes.append(response.json()["errors"][0]["extensions"]["code"])
        assert codes == ["NOT_FOUND", "NOT_FOUND", "RATE_LIMITED", "RATE_LIMITED"]
    finally:
        await close()

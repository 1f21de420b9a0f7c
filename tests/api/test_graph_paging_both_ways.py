"""Every connection pages both ways (issue 16): for each connection that took only
`first/after` before, a forward walk (`first/after`) and a backward walk (`last/before`)
over a small list are mirror images, `totalCount` equals the items walked, and both
`first` and `last` (or a `last` beyond the limit) is the same INVALID_INPUT the other
two-way connections give. On SQLite and PostgreSQL (the `api` fixture)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from graph_stack import Api, loan

from stateward.records import IncidentRecord
from stateward.runtime.batches import bulk
from stateward.runtime.insight.checkpoints import checkpoint
from stateward.runtime.sweeps import webhooks

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){path}}"
UPDATE = "mutation($d:JSON!){updateWorkflow(definition:$d){path}}"
START = "mutation($w:String!,$d:JSON){startInstance(workflow:$w,data:$d){instanceId}}"
ACT = (
    "mutation($i:ID!,$a:String!,$in:JSON){performAction(instance:$i,action:$a,input:$in)"
    "{instance{instanceId}}}"
)
ARGS = "first:$first,after:$after,last:$last,before:$before"
VARS = "$first:Int,$after:String,$last:Int,$before:String"
PAGE_INFO = "pageInfo{hasNextPage hasPreviousPage startCursor endCursor}"
SELECTION = "{totalCount nodes{id} " + PAGE_INFO + "}"
SIZE = 5  # items in each list; pages of 2 -> 3 pages each way

TASK: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/task",
    "initial": "open",
    "start": {"spawn_only": True},
    "states": {"open": {"label": "Open"}, "done": {"label": "Done", "terminal": True}},
    "actions": {"finish": {"from": "open", "to": "done"}},
}
PARENT: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/order",
    "initial": "draft",
    "states": {
        "draft": {"label": "Draft"},
        "working": {"label": "Working"},
        "ready": {"label": "Ready", "terminal": True},
    },
    "actions": {
        "begin": {
            "from": "draft",
            "to": "working",
            "spawn": [{"workflow": "ops/desk/task", "each": {"$ref": "data.teams"}}],
        },
    },
}
DESK: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/desk",
    "initial": "left",
    "states": {
        "left": {"label": "Left", "assign": "analyst"},
        "right": {"label": "Right", "assign": "analyst"},
    },
    "actions": {
        "flip": {"from": "left", "to": "right"},
        "flop": {"from": "right", "to": "left"},
    },
}


async def _start(api: Api, workflow: str, data: dict[str, Any] | None = None) -> str:
    found = await api.ok(START, {"w": workflow, "d": data or {}})
    return str(found["startInstance"]["instanceId"])


async def _workflows(api: Api, root: bool) -> tuple[str, list[str]]:
    for n in range(SIZE):
        await api.ok(DEPLOY, {"d": loan(f"acme/loans/w{n}")})
    if root:
        return f'query({VARS}){{workflows(namespace:"acme/loans",{ARGS}){SELECTION}}}', [
            "workflows"
        ]
    return f'query({VARS}){{registry(namespace:"acme/loans"){{workflows({ARGS}){SELECTION}}}}}', [
        "registry",
        "workflows",
    ]


async def _query_workflows(api: Api) -> tuple[str, list[str]]:
    return await _workflows(api, True)


async def _registry_workflows(api: Api) -> tuple[str, list[str]]:
    return await _workflows(api, False)


async def _versions(api: Api) -> tuple[str, list[str]]:
    for n in range(SIZE):
        value = loan()
        value["$description"] = f"version {n}"
        await api.ok(UPDATE if n else DEPLOY, {"d": value})
    path = ["workflow", "versions"]
    return f'query({VARS}){{workflow(path:"acme/loans/loan"){{versions({ARGS}){SELECTION}}}}}', path


async def _workflow_instances(api: Api) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": loan()})
    for _ in range(SIZE):
        await _start(api, "acme/loans/loan")
    query = f'query({VARS}){{workflow(path:"acme/loans/loan"){{instances({ARGS}){SELECTION}}}}}'
    return query, ["workflow", "instances"]


async def _children(api: Api) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": TASK})
    await api.ok(DEPLOY, {"d": PARENT})
    pid = await _start(api, "ops/desk/order", {"teams": [f"t{n}" for n in range(SIZE)]})
    await api.ok(ACT, {"i": pid, "a": "begin", "in": {}})
    return f'query({VARS}){{instance(id:"{pid}"){{children({ARGS}){SELECTION}}}}}', [
        "instance",
        "children",
    ]


async def _instance_assignments(api: Api) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": DESK})
    pid = await _start(api, "ops/desk/desk")
    for n in range(SIZE - 1):  # one assignment per state entered: SIZE in all
        await api.ok(ACT, {"i": pid, "a": "flip" if n % 2 == 0 else "flop", "in": {}})
    return f'query({VARS}){{instance(id:"{pid}"){{assignments({ARGS}){SELECTION}}}}}', [
        "instance",
        "assignments",
    ]


async def _events(api: Api, root: bool) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": DESK})
    pid = await _start(api, "ops/desk/desk")  # the start is event 1
    for n in range(SIZE - 1):
        await api.ok(ACT, {"i": pid, "a": "flip" if n % 2 == 0 else "flop", "in": {}})
    if root:
        return f'query({VARS}){{events(process:"{pid}",{ARGS}){SELECTION}}}', ["events"]
    query = f'query({VARS}){{instance(id:"{pid}"){{events({ARGS}){SELECTION}}}}}'
    return query, ["instance", "events"]


async def _query_events(api: Api) -> tuple[str, list[str]]:
    return await _events(api, True)


async def _instance_events(api: Api) -> tuple[str, list[str]]:
    return await _events(api, False)


async def _checkpoints(api: Api) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": loan()})
    for _ in range(SIZE):  # each over a larger tree
        await _start(api, "acme/loans/loan")
        await checkpoint(api.runtime)
    return f"query({VARS}){{checkpoints({ARGS}){{totalCount nodes{{id:size}} {PAGE_INFO}}}}}", [
        "checkpoints"
    ]


async def _webhook_deliveries(api: Api) -> tuple[str, list[str]]:
    set_hook = 'mutation{setWebhook(namespace:"acme",url:"http://127.0.0.1:9/hook"){namespace}}'
    await api.ok(set_hook)
    async with api.runtime.uow() as uow:
        for n in range(SIZE):
            await webhooks.enqueue(uow, "acme", "test.event", {"n": n}, api.runtime.clock.now())
        await uow.commit()
    query = f'query({VARS}){{webhookDeliveries(namespace:"acme",{ARGS}){SELECTION}}}'
    return query, ["webhookDeliveries"]


async def _batch_operations(api: Api) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": loan()})
    await _start(api, "acme/loans/loan")
    for _ in range(SIZE):
        await api.ok('mutation{bulkCancel(filter:{workflow:"acme/loans/loan"}){id}}')
    return f"query({VARS}){{batchOperations({ARGS}){SELECTION}}}", ["batchOperations"]


async def _batch_errors(api: Api) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": loan()})
    for _ in range(SIZE):  # each already in review: `submit` fails on all of them
        pid = await _start(api, "acme/loans/loan")
        await api.ok(ACT, {"i": pid, "a": "submit", "in": {"fields": {"amount": 5}}})
    made = await api.ok(
        'mutation{bulkAction(filter:{workflow:"acme/loans/loan"},action:"submit",'
        "input:{fields:{amount:7}}){id}}"
    )
    await bulk.process_running(api.runtime)
    bid = made["bulkAction"]["id"]
    errors = f"errors({ARGS}){{totalCount nodes{{id:instanceId}} {PAGE_INFO}}}"
    return f'query({VARS}){{batchOperation(id:"{bid}"){{{errors}}}}}', [
        "batchOperation",
        "errors",
    ]


async def _incidents(api: Api) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": loan()})
    pids = [await _start(api, "acme/loans/loan") for _ in range(SIZE)]
    async with api.runtime.uow() as uow:
        for n, pid in enumerate(pids):
            record = IncidentRecord(
                id=str(uuid.uuid4()), process_id=pid, namespace="acme/loans",
                workflow="acme/loans/loan", kind="HOOK_FAILED", state="intake",
                message=f"failure {n}", attempts=1, opened_seq=1,
                created_at=api.runtime.clock.now(),
            )  # fmt: skip
            await uow.incidents.add(record)
        await uow.commit()
    return f"query({VARS}){{incidents({ARGS}){SELECTION}}}", ["incidents"]


SCAN: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/docs/scan",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "ocr": {"label": "OCR", "mode": "delegated", "surface": "acme-ocr"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {"role": "*", "from": "intake", "to": "ocr"},
        "finish": {"role": "clerk", "from": "ocr", "to": "done"},
    },
}


async def _delegated_tasks(api: Api) -> tuple[str, list[str]]:
    await api.ok(DEPLOY, {"d": SCAN})
    for _ in range(SIZE):  # each enters a delegated stage: one open task
        pid = await _start(api, "acme/docs/scan")
        await api.ok(ACT, {"i": pid, "a": "submit", "in": {}})
    return f"query({VARS}){{delegatedTasks({ARGS}){SELECTION}}}", ["delegatedTasks"]


CASES: dict[str, Callable[[Api], Awaitable[tuple[str, list[str]]]]] = {
    "Query.workflows": _query_workflows,
    "Registry.workflows": _registry_workflows,
    "Workflow.versions": _versions,
    "Workflow.instances": _workflow_instances,
    "Instance.children": _children,
    "Instance.assignments": _instance_assignments,
    "Query.events": _query_events,
    "Instance.events": _instance_events,
    "Query.checkpoints": _checkpoints,
    "Query.webhookDeliveries": _webhook_deliveries,
    "Query.batchOperations": _batch_operations,
    "BatchOperation.errors": _batch_errors,
    "Query.incidents": _incidents,
    "Query.delegatedTasks": _delegated_tasks,
}


def _dig(data: Any, path: list[str]) -> Any:
    for name in path:
        data = data[name]
    return data


@pytest.mark.parametrize("case", sorted(CASES))
async def test_forward_and_backward_walks_are_mirror_images(api: Api, case: str) -> None:
    query, path = await CASES[case](api)

    async def walk(backward: bool) -> tuple[list[str], int]:
        seen: list[str] = []
        pages, cursor = 0, None
        while True:
            paging = {"last": 2, "before": cursor} if backward else {"first": 2, "after": cursor}
            page = _dig(await api.ok(query, paging), path)
            pages += 1
            assert page["totalCount"] == SIZE
            found = [node["id"] for node in page["nodes"]]
            assert len(found) == (1 if pages == 3 else 2)
            seen += found[::-1] if backward else found
            info = page["pageInfo"]
            if not (info["hasPreviousPage"] if backward else info["hasNextPage"]):
                return seen, pages
            cursor = info["startCursor"] if backward else info["endCursor"]

    forward, pages = await walk(False)
    backward, back_pages = await walk(True)
    assert len(set(forward)) == SIZE and pages == back_pages == 3
    assert backward[::-1] == forward
    for bad in ({"first": 1, "last": 1}, {"last": 101}):
        body = await api.gql(query, bad)
        assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT", (case, body)

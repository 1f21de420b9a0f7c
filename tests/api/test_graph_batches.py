"""Bulk operations through GraphQL (issue 15): `bulkCancel` / `bulkAction` with an
`InstanceFilter`, `batchOperation(id)` with its errors, `batchOperations`, cancelling."""

from __future__ import annotations

from graph_stack import Api, loan
from test_graph_operations import code

from stateward.runtime.batches import bulk

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = 'mutation{startInstance(workflow:"acme/loans/loan"){instanceId}}'
SUBMIT = """mutation($i:ID!){performAction(instance:$i,action:"submit",
  input:{fields:{amount:5}}){duplicate}}"""
BATCH = """{id kind filter params status total succeeded failed createdBy createdAt finishedAt
  errors(first:10){totalCount edges{node{instanceId code message}}}}"""
CANCEL = 'mutation($r:String){bulkCancel(filter:{workflow:"acme/loans/loan"},reason:$r)%s}'
ACTION = ('mutation{bulkAction(filter:{workflow:"acme/loans/loan"},action:"submit",'
          "input:{fields:{amount:7}})%s}")  # fmt: skip
GET = "query($i:ID!){batchOperation(id:$i)%s}"


async def _instances(api: Api, n: int) -> list[str]:
    await api.ok(DEPLOY, {"d": loan()})
    return [(await api.ok(START))["startInstance"]["instanceId"] for _ in range(n)]


async def test_bulk_action_applies_per_instance_and_reports_failures(api: Api) -> None:
    ids = await _instances(api, 3)
    await api.ok(SUBMIT, {"i": ids[0]})  # already in review: `submit` fails there
    made = (await api.ok(ACTION % BATCH))["bulkAction"]
    assert (made["kind"], made["status"], made["total"]) == ("ACTION", "RUNNING", 3)
    assert made["filter"] == {"workflow": "acme/loans/loan"}
    assert made["params"] == {"action": "submit", "input": {"fields": {"amount": 7}}}
    assert made["createdBy"] == api.admin.public
    await bulk.process_running(api.runtime)
    done = (await api.ok(GET % BATCH, {"i": made["id"]}))["batchOperation"]
    assert (done["status"], done["succeeded"], done["failed"]) == ("COMPLETED", 2, 1)
    assert done["finishedAt"] is not None
    errors = done["errors"]
    assert errors["totalCount"] == 1
    assert [(e["node"]["instanceId"], e["node"]["code"]) for e in errors["edges"]] == [
        (ids[0], "WRONG_STATE")
    ]
    node = await api.ok("query($i:ID!){node(id:$i){... on BatchOperation{kind}}}",
                        {"i": made["id"]})  # fmt: skip
    assert node["node"] == {"kind": "ACTION"}


async def test_bulk_cancel_and_the_listing_newest_first(api: Api) -> None:
    await _instances(api, 2)
    first = (await api.ok(CANCEL % "{id total}", {"r": "one"}))["bulkCancel"]
    second = (await api.ok(CANCEL % "{id total}", {"r": "two"}))["bulkCancel"]
    listing = await api.ok("{batchOperations(first:1){edges{cursor node{id}}}}")
    edges = listing["batchOperations"]["edges"]
    assert [e["node"]["id"] for e in edges] == [second["id"]]
    after = await api.ok(
        "query($a:String!){batchOperations(first:5,after:$a){edges{node{id}}}}",
        {"a": edges[0]["cursor"]},
    )
    assert [e["node"]["id"] for e in after["batchOperations"]["edges"]] == [first["id"]]
    stopped = await api.ok("mutation($i:ID!){cancelBatchOperation(id:$i){status}}",
                           {"i": second["id"]})  # fmt: skip
    assert stopped["cancelBatchOperation"]["status"] == "CANCELLED"
    await bulk.process_running(api.runtime)
    one = (await api.ok(GET % "{status succeeded params}", {"i": first["id"]}))["batchOperation"]
    assert one == {"status": "COMPLETED", "succeeded": 2, "params": {"reason": "one"}}


async def test_who_may_start_and_see_a_batch(api: Api) -> None:
    await _instances(api, 1)
    assert code(await api.gql(CANCEL % "{id}", {}, token=None)) == "UNAUTHENTICATED"
    _, reader = await api.user("acme/loans", "analyst")
    assert code(await api.gql(CANCEL % "{id}", {}, token=reader)) == "FORBIDDEN"
    _, stranger = await api.user("globex", "admin")
    assert code(await api.gql(CANCEL % "{id}", {}, token=stranger)) == "NOT_FOUND"
    _, operator = await api.user("acme/loans", "operator")
    made = (await api.ok(CANCEL % "{id total}", {}, token=operator))["bulkCancel"]
    assert made["total"] == 1
    assert code(await api.gql(GET % "{id}", {"i": made["id"]}, token=reader)) == "NOT_FOUND"
    assert (await api.ok(GET % "{total}", {"i": made["id"]}, token=operator))["batchOperation"]
    bad = await api.gql('mutation{bulkAction(filter:{namespace:"acme/loans"},action:"$x"){id}}')
    assert code(bad) == "INVALID_INPUT"
    assert bad["errors"][0]["extensions"]["pointer"] == "/action"


async def test_a_forged_listing_cursor_is_invalid_input_either_way(api: Api) -> None:
    from stateward.resolvers.paging import encode_cursor

    forged = [
        encode_cursor(["not a date", "x"]),
        encode_cursor(["2026-01-01T00:00:00", "x"]),  # no zone: not one of ours
        encode_cursor([1, 2]),
    ]
    for cursor in forged:
        for arg in ("first:2,after", "last:2,before"):
            body = await api.gql(
                f"query($c:String!){{batchOperations({arg}:$c){{totalCount}}}}", {"c": cursor}
            )
            assert code(body) == "INVALID_INPUT", (arg, cursor, body)
            assert body["errors"][0]["extensions"].get("pointer") in ("/after", "/before")

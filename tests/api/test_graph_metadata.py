"""Instance metadata through the API: startInstance(metadata:) and Instance.metadata."""

from __future__ import annotations

from graph_stack import Api, loan

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = """mutation($m:JSON){startInstance(workflow:"acme/loans/loan", data:{amount:5},
  metadata:$m){instanceId data metadata}}"""
READ = "query($i:ID!){instance(id:$i){metadata data}}"


async def test_metadata_is_given_at_start_and_read_apart_from_the_data(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    meta = {"source": "crm", "ref": {"id": 7}}
    started = (await api.ok(START, {"m": meta}))["startInstance"]
    assert started["metadata"] == meta and "source" not in started["data"]
    again = (await api.ok(READ, {"i": started["instanceId"]}))["instance"]
    assert again["metadata"] == meta
    bare = (await api.ok(START, {"m": None}))["startInstance"]
    assert bare["metadata"] == {}


async def test_metadata_must_be_an_object(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    for bad in ([1, 2], "text", 3):
        body = await api.gql(START, {"m": bad})
        error = body["errors"][0]["extensions"]
        assert (error["code"], error["pointer"]) == ("INVALID_INPUT", "/metadata")


async def test_a_key_with_no_role_neither_starts_nor_reads_metadata(api: Api) -> None:
    await api.ok(DEPLOY, {"d": loan()})
    started = (await api.ok(START, {"m": {"secret": "s3"}}))["startInstance"]
    _, token = await api.user()
    body = await api.gql(START, {"m": {"x": 1}}, token=token)
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    read = await api.gql(READ, {"i": started["instanceId"]}, token=token)
    assert "s3" not in str(read)

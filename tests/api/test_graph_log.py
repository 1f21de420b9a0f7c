"""The deployment log through the API: checkpoints, event and consistency proofs."""

from __future__ import annotations

from graph_stack import Api, loan

from stateward.domain import merkle
from stateward.governance.checkpoint import parse_checkpoint, verify_checkpoint
from stateward.runtime.insight.checkpoints import checkpoint

DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = 'mutation{startInstance(workflow:"acme/loans/loan"){instanceId}}'
CHECKPOINT = "{checkpoint{net size root ts signer signature json}}"
CHECKPOINTS = """query($f:Int,$a:String){checkpoints(first:$f,after:$a){
  edges{cursor node{size root}} pageInfo{hasNextPage endCursor}}}"""
PROOF = """query($p:ID!,$s:Int!,$n:Int){eventProof(process:$p,seq:$s,size:$n){
  process seq index size leaf root path}}"""
CONSISTENCY = """query($a:Int!,$b:Int){consistencyProof(from:$a,to:$b){
  first second firstRoot secondRoot path}}"""


def _hex(values: list[str]) -> list[bytes]:
    return [bytes.fromhex(v) for v in values]


async def test_checkpoints_and_proofs_verify_with_the_rfc_algorithms(api: Api) -> None:
    assert (await api.ok(CHECKPOINT))["checkpoint"] is None
    first = await checkpoint(api.runtime)
    assert first is not None
    await api.ok(DEPLOY, {"d": loan()})
    pid = (await api.ok(START))["startInstance"]["instanceId"]
    await checkpoint(api.runtime)
    latest = (await api.ok(CHECKPOINT))["checkpoint"]
    signed = parse_checkpoint(latest["json"])
    verify_checkpoint(signed, net=api.runtime.net, trusted={api.runtime.node_public})
    assert (signed.size, signed.root) == (latest["size"], latest["root"])

    page = (await api.ok(CHECKPOINTS, {"f": 1}))["checkpoints"]
    assert page["pageInfo"]["hasNextPage"] is True
    rest = await api.ok(CHECKPOINTS, {"f": 5, "a": page["pageInfo"]["endCursor"]})
    sizes = [e["node"]["size"] for e in page["edges"] + rest["checkpoints"]["edges"]]
    assert sizes == [first.size, signed.size]

    proof = (await api.ok(PROOF, {"p": pid, "s": 1}))["eventProof"]
    assert proof["size"] == signed.size and proof["root"] == signed.root
    assert merkle.verify_inclusion(
        bytes.fromhex(proof["leaf"]), proof["index"], proof["size"], _hex(proof["path"]),
        bytes.fromhex(signed.root),
    )  # fmt: skip
    c = (await api.ok(CONSISTENCY, {"a": first.size, "b": signed.size}))["consistencyProof"]
    assert (c["firstRoot"], c["secondRoot"]) == (first.root, signed.root)
    assert merkle.verify_consistency(
        first.size, signed.size, bytes.fromhex(first.root), bytes.fromhex(signed.root),
        _hex(c["path"]),
    )  # fmt: skip


async def test_bad_proof_requests_get_stable_codes(api: Api) -> None:
    body = await api.gql(PROOF, {"p": "00000000-0000-0000-0000-000000000000", "s": 1})
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    body = await api.gql(CONSISTENCY, {"a": 1, "b": 10**6})
    assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
    body = await api.gql(CHECKPOINT, token=None)
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"

"""Envelopes and access, attacked through the real app (issue 9 item 2).

`submitEvent` answered a re-sent known envelope with `duplicate: true` and the instance's
*current* data before checking anything: a random signature, any `signer`, no token.
A duplicate is now answered only to a valid signature by the event's original signer,
and the instance in the answer passes the read rule (like `instance(id)`): otherwise
BAD_SIGNATURE / NOT_FOUND.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from stateward.app import create_app
from stateward.governance.keys import KeyPair, b64url_encode, generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.access.tokens import create_api_token
from stateward.runtime.container import Services
from stateward.runtime.core.act import act
from stateward.runtime.core.commands import attest, sign_as
from stateward.runtime.core.services import Runtime
from stateward.schema.root import create_schema
from stateward.settings import Settings

NOTES: dict[str, Any] = {
    "$version": "2.0",
    "$path": "acme/notes/note",
    "initial": "open",
    "states": {"open": {"label": "Open"}, "closed": {"label": "Closed", "terminal": True}},
    "actions": {"write": {"label": "Write", "mutate": {"$append": {"lines": "input.text"}}}},
}
SUBMIT = """mutation($e:JSON!,$s:String!,$g:String!){submitEvent(event:$e,signature:$s,
  signer:$g){duplicate instance{data}}}"""


@dataclass
class Stack:
    client: httpx.AsyncClient
    runtime: Runtime
    operator: KeyPair

    async def submit(self, body: dict[str, Any], token: str | None = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        variables = {"e": body["event"], "s": body["signature"], "g": body["signer"]}
        response = await self.client.post(
            "/graphql", json={"query": SUBMIT, "variables": variables}, headers=headers
        )
        return response.json()  # type: ignore[no-any-return]


@pytest.fixture
async def stack(db_url: str) -> AsyncIterator[Stack]:
    conf = Settings(database_url=db_url)
    runtime = await Runtime.open(conf, node_key=generate_keypair())
    operator = generate_keypair()
    await init(runtime, operator)
    services = Services(conf, runtime=runtime)
    app = create_app(conf, schema=create_schema(conf), services=services)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield Stack(client, runtime, operator)
    await runtime.close()


def _code(body: dict[str, Any]) -> str | None:
    errors = body.get("errors")
    return errors[0]["extensions"]["code"] if errors else None


async def _signed_write(stack: Stack, writer: KeyPair) -> dict[str, Any]:
    """A client-signed `write` on a new instance (the writer is a member of acme/notes)."""
    rt = stack.runtime
    await registry.deploy_workflow(rt, stack.operator, NOTES)
    await registry.grant_role(rt, stack.operator, "acme/notes", writer.public, ["writer"])
    start = sign_as(rt, writer, "11111111-2222-4333-8444-555555555555", "$start",
                    NOTES["$path"], {"data": {"secret": "s3cret"}})  # fmt: skip
    assert not (await stack.submit(start.to_json())).get("errors")
    write = sign_as(rt, writer, start.envelope.process, "write", NOTES["$path"], {"text": "a"})
    first = await stack.submit(write.to_json())
    assert first["data"]["submitEvent"]["duplicate"] is False, first
    return write.to_json()


async def test_a_duplicate_with_a_forged_signature_is_bad_signature(stack: Stack) -> None:
    body = await _signed_write(stack, generate_keypair())
    forged = b64url_encode(os.urandom(64))
    for signer in (body["signer"], generate_keypair().public, stack.runtime.node_key.public):
        answer = await stack.submit({**body, "signature": forged, "signer": signer})
        assert _code(answer) == "BAD_SIGNATURE", answer
        assert "s3cret" not in str(answer)


async def test_a_duplicate_signed_by_another_key_is_bad_signature(stack: Stack) -> None:
    body = await _signed_write(stack, generate_keypair())
    other = generate_keypair()
    signature = other.sign(b"anything")
    answer = await stack.submit({**body, "signature": signature, "signer": other.public})
    assert _code(answer) == "BAD_SIGNATURE"


async def test_the_original_signature_gets_the_duplicate_while_the_signer_may_read(
    stack: Stack,
) -> None:
    writer = generate_keypair()
    body = await _signed_write(stack, writer)
    again = await stack.submit(body)  # no token: the signature is the credential
    assert again["data"]["submitEvent"]["duplicate"] is True, again
    await registry.revoke_role(stack.runtime, stack.operator, "acme/notes", writer.public,
                               ["writer"])  # fmt: skip
    after = await stack.submit(body)
    assert _code(after) == "NOT_FOUND" and "s3cret" not in str(after)
    outsider = generate_keypair()
    token, _ = await create_api_token(stack.runtime, outsider.public, label="t")
    assert _code(await stack.submit(body, token=token)) == "NOT_FOUND"


async def test_a_server_attested_envelope_resent_anonymously_reads_nothing(stack: Stack) -> None:
    rt = stack.runtime
    await registry.deploy_workflow(rt, stack.operator, NOTES)
    start = attest(rt, stack.operator.public, "11111111-2222-4333-8444-666666666666", "$start",
                   NOTES["$path"], {"data": {"secret": "s3cret"}})  # fmt: skip
    await act(rt, start, attested=True)
    answer = await stack.submit(start.to_json())  # the node's valid signature, no token
    assert _code(answer) == "NOT_FOUND" and "s3cret" not in str(answer)

"""`stateward.client`: a typed asyncio client that signs its own envelopes.

```python
from stateward.client import Client

async with Client("http://127.0.0.1:8000/graphql", key="operator.json") as sw:
    started = await sw.start("customer/retail/retail-customer", {"source": "readme"})
    await sw.act(started.instance_id, "add_note", {"note": "hello"})
    async for event in sw.subscribe({"instance": started.instance_id}, after="0"):
        print(event.cursor, event.type, event.to_state)
```

`Client(url, key=…)` logs in with the key (challenge–response) and signs every event
envelope locally — RFC 8785 canonical JSON, Ed25519 — for the deployment's `net`, which it
fetches from the server; the server only verifies. `subscribe` resumes from the last cursor
it yielded after a dropped connection or a server restart, so a consumer sees every event
once, in order. This package imports nothing from the server side of stateward.
"""

from stateward.client.api import ActionResult, BusEvent, Client, StatewardError
from stateward.client.signing import Key, canonical, sign_envelope

__all__ = [
    "ActionResult",
    "BusEvent",
    "Client",
    "Key",
    "StatewardError",
    "canonical",
    "sign_envelope",
]

"""Wait for the first bus event of a type on one instance, print it and exit.

Usage: python watch_events.py TOKEN INSTANCE_ID EVENT_TYPE [URL]

It subscribes over the `graphql-transport-ws` protocol with `after: "0"`, so an event that
already happened is replayed from the outbox first, and one that has not yet happened is
printed the moment the server publishes it.
"""

import asyncio
import json
import sys

import websockets

SUBSCRIPTION = """
subscription ($types: [String!], $instance: ID) {
  events(filter: {types: $types, instance: $instance}, after: "0") {
    cursor type instanceId fromState toState team
  }
}
"""


async def first_event(token: str, instance: str, type_: str, url: str) -> dict:
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
        init = {"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        variables = {"types": [type_], "instance": instance}
        payload = {"query": SUBSCRIPTION, "variables": variables}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        async for message in ws:
            frame = json.loads(message)
            if frame["type"] == "next":
                return frame["payload"]["data"]["events"]
            if frame["type"] == "error":
                raise SystemExit(f"subscription refused: {frame['payload']}")
    raise SystemExit("the server closed the connection")


if __name__ == "__main__":
    token, instance, type_ = sys.argv[1:4]
    url = sys.argv[4] if len(sys.argv) > 4 else "ws://127.0.0.1:8765/graphql"
    event = asyncio.run(first_event(token, instance, type_, url))
    print(json.dumps(event, indent=2))

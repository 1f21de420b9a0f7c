"""Follow a workflow's events live, and resume after a disconnect without a gap.

Usage: python follow.py TOKEN WORKFLOW COUNT [URL]

Prints COUNT events of WORKFLOW, one line each, then disconnects. The cursor of the last
event printed is kept in `cursor.txt`; the next run subscribes with `after:` that cursor,
so it gets exactly the events it missed, then the live ones. It speaks the same
`graphql-transport-ws` protocol as the browser client of tutorial 3 (`graphql-ws`).
"""

import asyncio
import json
import sys
from pathlib import Path

import websockets

SUBSCRIPTION = """
subscription Follow($workflow: String!, $after: String) {
  events(filter: {workflow: $workflow}, after: $after) {
    cursor type instanceId fromState toState action
  }
}
"""
CURSOR = Path("cursor.txt")


async def follow(token: str, workflow: str, count: int, url: str) -> None:
    after = CURSOR.read_text().strip() if CURSOR.exists() else "0"
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
        init = {"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        variables = {"workflow": workflow, "after": after}
        payload = {"query": SUBSCRIPTION, "variables": variables}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        seen = 0
        async for message in ws:
            frame = json.loads(message)
            if frame["type"] == "error":
                raise SystemExit(f"subscription refused: {frame['payload']}")
            if frame["type"] != "next":
                continue
            event = frame["payload"]["data"]["events"]
            print(event["cursor"], event["type"], event["fromState"], "->", event["toState"])
            CURSOR.write_text(str(event["cursor"]))
            seen += 1
            if seen == count:
                return  # leaving the `async with` closes the socket: a disconnect


if __name__ == "__main__":
    token, workflow, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    url = sys.argv[4] if len(sys.argv) > 4 else "ws://127.0.0.1:8765/graphql"
    asyncio.run(follow(token, workflow, count, url))

"""A delegated-stage worker, run as its own process by the tests (issue 13).

Like a Camunda job worker: it polls `delegatedTasks(surface:)` over HTTP, locks each task
(`lockDelegatedTask`), does its "work" (uppercases `data.name`) and completes the stage
with the callback token (`completeDelegatedTask`). Arguments: the GraphQL URL, a bearer
token, the surface, how many tasks to complete, and a name for its output lines.
It prints one JSON line per task completed and per lock lost, and exits when done.
"""

from __future__ import annotations

import json
import sys
import time

import httpx

TASKS = """query($s:String!){delegatedTasks(surface:$s,availableOnly:true,first:10){
  nodes{id instanceId state data}}}"""
LOCK = """mutation($id:ID!){lockDelegatedTask(id:$id,seconds:30){token lockedUntil
  task{id data}}}"""
COMPLETE = """mutation($t:String!,$in:JSON){completeDelegatedTask(token:$t,action:"finish",
  input:$in){instanceId state status}}"""


def main() -> None:
    url, bearer, surface, wanted, name = sys.argv[1:6]
    headers = {"Authorization": f"Bearer {bearer}"}
    done = 0
    deadline = time.monotonic() + 60
    with httpx.Client(timeout=10) as http:

        def gql(query: str, variables: dict[str, object], auth: bool = True) -> dict[str, object]:
            response = http.post(
                url, json={"query": query, "variables": variables},
                headers=headers if auth else {},
            )  # fmt: skip
            return response.json()  # type: ignore[no-any-return]

        while done < int(wanted) and time.monotonic() < deadline:
            listed = gql(TASKS, {"s": surface})
            nodes = listed["data"]["delegatedTasks"]["nodes"]  # type: ignore[index]
            if not nodes:
                time.sleep(0.1)
                continue
            for node in nodes:
                locked = gql(LOCK, {"id": node["id"]})
                if locked.get("errors"):
                    code = locked["errors"][0]["extensions"]["code"]  # type: ignore[index]
                    print(json.dumps({"worker": name, "lost": node["id"], "code": code}))
                    continue
                grant = locked["data"]["lockDelegatedTask"]  # type: ignore[index]
                result = str(grant["task"]["data"].get("name", "")).upper()
                # completing needs the callback token only: no bearer token is sent
                completed = gql(COMPLETE, {"t": grant["token"], "in": {"result": result}},
                                auth=False)  # fmt: skip
                if completed.get("errors"):
                    code = completed["errors"][0]["extensions"]["code"]  # type: ignore[index]
                    print(json.dumps({"worker": name, "lost": node["id"], "code": code}))
                    continue
                after = completed["data"]["completeDelegatedTask"]  # type: ignore[index]
                print(json.dumps({"worker": name, "task": node["id"], **after}), flush=True)
                done += 1
                if done >= int(wanted):
                    break


if __name__ == "__main__":
    main()

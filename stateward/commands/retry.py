"""`stateward retry INCIDENT [--resolve ACTION [--input JSON]]` with `--db URL --key-file
KEY` (as the key's actor) or `--url URL --token TOKEN`.

Retries an open incident (a `$retry` event recording the hook module deployed now; admin
or operator of the namespace), or with `--resolve` resolves it instead (`$cancel`, or an
action of the instance's state with `--input`). Prints the incident after it as JSON.
With `--db` the hook re-runs on the server (its automation recovery picks the instance up);
with `--url` the server runs it right after answering (list the incident again to
see the outcome). Exit 0 done, 1 refused, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from stateward.commands.incidents import row
from stateward.commands.remote import json_arg, query, remote
from stateward.commands.runtime_args import cli_runtime
from stateward.domain.errors import DomainError
from stateward.governance.keys import read_key_file

FIELDS = """incident{incidentId kind instanceId namespace workflowPath state message attempts
  createdAt resolvedAt resolution resolved} instance{status}"""
RETRY = "mutation($i:ID!){retryIncident(id:$i){" + FIELDS + "}}"
RESOLVE = "mutation($i:ID!,$a:String!,$in:JSON){resolveIncident(id:$i,action:$a,input:$in){"
RESOLVE += FIELDS + "}}"


async def _local(args: argparse.Namespace, input: Any) -> dict[str, Any]:
    from stateward.runtime.operate.incidents import (
        get_incident,
        resolve_incident,
        retry_incident,
    )

    if args.key_file is None:
        raise ValueError("--db needs --key-file (the acting key)")
    actor = read_key_file(args.key_file).public
    async with cli_runtime(args) as runtime:
        if args.resolve is None:
            done = await retry_incident(runtime, actor, args.incident)
        else:
            done = await resolve_incident(runtime, actor, args.incident, args.resolve, input)
        found = await get_incident(runtime, actor, args.incident)
    assert found is not None
    return {**row(found), "instanceStatus": done.record.status}


async def _remote(args: argparse.Namespace, input: Any) -> dict[str, Any]:
    if args.resolve is None:
        data = (await query(args, RETRY, {"i": args.incident}))["retryIncident"]
    else:
        variables = {"i": args.incident, "a": args.resolve, "in": input}
        data = (await query(args, RESOLVE, variables))["resolveIncident"]
    return {**data["incident"], "instanceStatus": data["instance"]["status"]}


def run(args: argparse.Namespace) -> int:
    """Retry (or resolve); 0 done, 1 refused, 2 bad usage."""
    try:
        input = json_arg(args.input, "--input")
        if input is not None and args.resolve is None:
            raise ValueError("--input goes with --resolve")
        coroutine = _remote if remote(args) else _local
        done = asyncio.run(coroutine(args, input))
    except DomainError as exc:
        print(f"retry: {exc.code} {exc.pointer} {exc.message}".rstrip(), file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"retry: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(done, indent=2, sort_keys=True))
    what = "resolved" if done["resolved"] else "retried"
    print(f"retry: {what} {done['incidentId']} (attempts {done['attempts']})", file=sys.stderr)
    return 0

"""`stateward incidents [--namespace NS] [--workflow PATH] [--kind KIND]... [--open |
--resolved] [--instance ID] [--first N] [--json]` with `--db URL --key-file KEY` (as the
key's actor) or `--url URL --token TOKEN`.

Lists incidents (failures that stopped instances) newest first, in the namespaces where
the actor holds admin or operator (all for a system admin): one line each,
`ID KIND NAMESPACE INSTANCE STATE attempts=N open|RESOLUTION MESSAGE`, or a JSON array
with `--json`. Exit 0 listed, 1 refused, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from stateward.commands.remote import query, remote
from stateward.commands.runtime_args import cli_runtime
from stateward.domain.errors import DomainError
from stateward.governance.keys import read_key_file

LIST = """query($f:IncidentFilter,$n:Int){incidents(filter:$f,first:$n){edges{node{
  incidentId kind instanceId namespace workflowPath state message attempts createdAt
  resolvedAt resolution resolved}}}}"""


def row(record: Any) -> dict[str, Any]:
    """An `IncidentRecord` as the JSON the server answers (camelCase)."""
    return {
        "incidentId": record.id,
        "kind": record.kind,
        "instanceId": record.process_id,
        "namespace": record.namespace,
        "workflowPath": record.workflow,
        "state": record.state,
        "message": record.message,
        "attempts": record.attempts,
        "createdAt": record.created_at.isoformat().replace("+00:00", "Z"),
        "resolvedAt": record.resolved_at.isoformat().replace("+00:00", "Z")
        if record.resolved_at
        else None,
        "resolution": record.resolution,
        "resolved": record.resolved,
    }


def line(item: dict[str, Any]) -> str:
    """One incident as a line of text."""
    status = item["resolution"] if item["resolved"] else "open"
    message = " ".join(str(item["message"]).split())[:200]
    return (
        f"{item['incidentId']} {item['kind']} {item['namespace']} {item['instanceId']} "
        f"{item['state']} attempts={item['attempts']} {status} {message}"
    )


def _resolved(args: argparse.Namespace) -> bool | None:
    if args.open and args.resolved:
        raise ValueError("--open and --resolved exclude each other")
    return True if args.resolved else False if args.open else None


async def _local(args: argparse.Namespace) -> list[dict[str, Any]]:
    from stateward.runtime.operate.incidents import IncidentQuery, incidents_for

    if args.key_file is None:
        raise ValueError("--db needs --key-file (the acting key)")
    actor = read_key_file(args.key_file).public
    filters = IncidentQuery(
        namespace=args.namespace, workflow=args.workflow, kinds=tuple(args.kind or ()),
        resolved=_resolved(args), process_id=args.instance,
    )  # fmt: skip
    async with cli_runtime(args) as runtime:
        page = await incidents_for(runtime, actor, filters, args.first, None)
    return [row(r) for r in page.items]


async def _remote(args: argparse.Namespace) -> list[dict[str, Any]]:
    filters: dict[str, Any] = {"namespace": args.namespace, "workflow": args.workflow,
                               "kind": args.kind, "resolved": _resolved(args),
                               "instance": args.instance}  # fmt: skip
    data = await query(args, LIST, {"f": filters, "n": args.first})
    return [edge["node"] for edge in data["incidents"]["edges"]]


def run(args: argparse.Namespace) -> int:
    """List incidents; 0 listed, 1 refused, 2 bad usage."""
    try:
        if not 0 <= args.first <= 100:
            raise ValueError("--first must be 0..100")
        coroutine = _remote if remote(args) else _local
        items = asyncio.run(coroutine(args))
    except DomainError as exc:
        print(f"incidents: {exc.code} {exc.pointer} {exc.message}".rstrip(), file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"incidents: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(items, indent=2, sort_keys=True))
    else:
        for item in items:
            print(line(item))
    print(f"incidents: {len(items)} listed", file=sys.stderr)
    return 0

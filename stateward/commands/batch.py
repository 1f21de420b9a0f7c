"""`stateward batch` (issue 15): start, watch and stop bulk operations.

    stateward batch cancel --filter JSON [--reason R]
    stateward batch action --filter JSON --action NAME [--input JSON]
    stateward batch status ID
    stateward batch stop ID

with `--db URL --key-file KEYFILE` (on the database, as the key's actor; while it waits
the command itself works on the batch) or `--url URL --token TOKEN` (through a running
server's GraphQL API, whose nodes work on it). `--filter` is an `InstanceFilter` as JSON
(`{"workflow": "acme/loans/loan", "state": "review", "data": [{"path": "amount", "op":
"GT", "value": 1000}]}`). The command waits for the batch to end, with a progress bar on
a terminal (`--no-wait` returns at once), then prints the batch as one JSON object. Exit 0
when it ended with no failed instance, 1 when refused or when instances failed (their
errors are in `errors`), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from datetime import datetime
from typing import Any

from stateward.commands.remote import query
from stateward.commands.runtime_args import cli_runtime
from stateward.domain.canonical import loads_strict
from stateward.domain.errors import DomainError
from stateward.domain.search import InstanceSearch
from stateward.governance.keys import read_key_file
from stateward.observe.progress import progress
from stateward.records import BatchRecord
from stateward.runtime.batches import bulk
from stateward.runtime.core.services import Runtime
from stateward.schema.enums import DataOp, InstanceStatus
from stateward.schema.inputs import DataFilter, InstanceFilter

POLL = 0.5
TIMES = ("createdAfter", "createdBefore", "updatedAfter", "updatedBefore")
FIELDS = "id kind filter params status total succeeded failed createdBy createdAt finishedAt"
ERRORS = "errors(first:100){edges{node{instanceId code message}}}"


class Usage(Exception):
    """Bad usage (exit 2)."""


def _json(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return loads_strict(text)
    except DomainError as exc:
        raise Usage(f"{what} is not valid JSON: {exc.message}") from exc


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def search_of(value: Any) -> InstanceSearch:
    """The InstanceSearch of an `InstanceFilter` given as JSON (GraphQL field names)."""
    if not isinstance(value, dict):
        raise Usage("--filter must be a JSON object (an InstanceFilter)")
    known = set(InstanceFilter.__annotations__)
    kwargs: dict[str, Any] = {}
    for key, item in value.items():
        name = _snake(key)
        if name not in known:
            raise Usage(f"--filter has no field {key!r}")
        if key == "status":
            item = [InstanceStatus[str(s).upper()] for s in item]
        elif key == "data":
            item = [DataFilter(path=d["path"], op=DataOp[d["op"]], value=d.get("value"))
                    for d in item]  # fmt: skip
        elif key in TIMES:
            item = datetime.fromisoformat(str(item).replace("Z", "+00:00"))
        kwargs[name] = item
    return InstanceFilter(**kwargs).to_search()


def _params(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    if args.op == "cancel":
        return "cancel", ({"reason": args.reason} if args.reason else {})
    return "action", {"action": args.action, "input": _json(args.input, "--input") or {}}


def _as_dict(batch: BatchRecord, errors: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "id": batch.id, "kind": batch.kind, "filter": batch.filter, "params": batch.params,
        "status": batch.status, "total": batch.total, "succeeded": batch.succeeded,
        "failed": batch.failed, "createdBy": batch.created_by,
        "createdAt": batch.created_at.isoformat(),
        "finishedAt": batch.finished_at.isoformat() if batch.finished_at else None,
        "errors": errors,
    }  # fmt: skip


async def _work(runtime: Runtime, batch: BatchRecord) -> BatchRecord:
    """Work on the batch here until it ends, drawing its progress."""
    with progress(f"batch {batch.kind}", total=batch.total) as bar:
        while True:
            await bulk.process(runtime, batch.id, pages=1)
            current = await bulk.get(runtime, batch.id)
            assert current is not None
            bar.advance(current.succeeded + current.failed - bar.done)
            if current.status != bulk.RUNNING:
                return current


async def _on_db(args: argparse.Namespace) -> dict[str, Any]:
    if not args.key_file:
        raise Usage("--db needs --key-file (the operator)")
    actor = read_key_file(args.key_file).public
    async with cli_runtime(args) as runtime:
        if args.op in ("cancel", "action"):
            kind, params = _params(args)
            batch = await bulk.start(runtime, actor, kind, params,
                                     search_of(_json(args.filter, "--filter")))  # fmt: skip
        elif args.op == "stop":
            batch = await bulk.cancel(runtime, actor, args.id)
        else:
            batch = await bulk.visible(runtime, actor, args.id)
        if not args.no_wait and batch.status == bulk.RUNNING:
            batch = await _work(runtime, batch)
        errors = [
            {"instanceId": e.process_id, "code": e.code or "", "message": e.message or ""}
            for e in await bulk.errors(runtime, batch.id, -1, 100)
        ]
    return _as_dict(batch, errors)


def _gql(args: argparse.Namespace, document: str, variables: dict[str, Any]) -> dict[str, Any]:
    """One GraphQL operation on `--url` as `--token`, through the operation commands' one
    HTTP helper (`remote.query`: the server's code, pointer and problems on a refusal)."""
    url = args.url.rstrip("/")
    target = argparse.Namespace(**{**vars(args), "url": url if url.endswith("/graphql")
                                   else url + "/graphql"})  # fmt: skip
    return dict(asyncio.run(query(target, document, variables)))


def _over_http(args: argparse.Namespace) -> dict[str, Any]:
    if not args.token:
        raise Usage("--url needs --token (an API token)")
    fields = f"{FIELDS} {ERRORS}"
    if args.op == "cancel":
        query = (
            f"mutation($f:InstanceFilter!,$r:String){{bulkCancel(filter:$f,reason:$r){{{fields}}}}}"
        )
        variables = {"f": _json(args.filter, "--filter"), "r": args.reason}
        batch = _gql(args, query, variables)["bulkCancel"]
    elif args.op == "action":
        batch = _gql(args, f"mutation($f:InstanceFilter!,$a:String!,$i:JSON){{bulkAction("
                     f"filter:$f,action:$a,input:$i){{{fields}}}}}",
                     {"f": _json(args.filter, "--filter"), "a": args.action,
                      "i": _json(args.input, "--input")})["bulkAction"]  # fmt: skip
    elif args.op == "stop":
        batch = _gql(args, f"mutation($i:ID!){{cancelBatchOperation(id:$i){{{fields}}}}}",
                     {"i": args.id})["cancelBatchOperation"]  # fmt: skip
    else:
        batch = _poll(args, args.id)
    batch = _plain(batch)
    if not args.no_wait and batch["status"] == bulk.RUNNING:
        with progress(f"batch {batch['kind']}", total=batch["total"]) as bar:
            while batch["status"] == bulk.RUNNING:
                time.sleep(POLL)
                batch = _poll(args, batch["id"])
                bar.advance(batch["succeeded"] + batch["failed"] - bar.done)
    batch["errors"] = [e["node"] for e in batch.pop("errors")["edges"]]
    return batch


def _poll(args: argparse.Namespace, ident: str) -> dict[str, Any]:
    query = f"query($i:ID!){{batchOperation(id:$i){{{FIELDS} {ERRORS}}}}}"
    return _plain(dict(_gql(args, query, {"i": ident})["batchOperation"]))


def _plain(batch: dict[str, Any]) -> dict[str, Any]:
    """The batch as `--db` prints it: the schema's enum names (`RUNNING`, `CANCEL`) back to
    the stored values (`running`, `cancel`), so both ways print, and wait on, the same."""
    return {**batch, "status": batch["status"].lower(), "kind": batch["kind"].lower()}


def run(args: argparse.Namespace) -> int:
    """Run the batch subcommand; print the batch as JSON. 0, 1 refused/failed, 2 usage."""
    try:
        if (args.url is None) == (args.db is None and args.key_file is None):
            raise Usage("give either --db URL --key-file KEYFILE or --url URL --token TOKEN")
        if args.op in ("cancel", "action") and args.filter is None:
            raise Usage("--filter (an InstanceFilter as JSON) is required")
        if args.op == "action" and not args.action:
            raise Usage("--action is required")
        if args.op in ("status", "stop") and not args.id:
            raise Usage(f"batch {args.op} needs the batch id")
        answer = _over_http(args) if args.url is not None else asyncio.run(_on_db(args))
    except (Usage, OSError, ValueError, KeyError, TypeError) as exc:
        print(f"batch: {exc}", file=sys.stderr)
        return 2
    except DomainError as exc:
        print(f"batch: {exc.code} {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(answer, sort_keys=True, default=str))
    return 0 if answer["failed"] == 0 else 1

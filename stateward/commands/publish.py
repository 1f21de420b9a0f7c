"""`stateward publish NAME --namespace NS --key KEY [--payload JSON] [--ttl S]
[--message-id ID]` with `--db URL --key-file KEYFILE` (on the database, as the key's
actor) or `--url URL --token TOKEN` (through a running server's `POST /messages/{name}`).

Prints the publication as one JSON object on stdout (`messageId`, `duplicate`,
`expiresAt`, `delivered`, `started`). Exit 0 published, 1 refused (the error code and
message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from stateward.commands.runtime_args import cli_runtime
from stateward.domain.canonical import loads_strict
from stateward.domain.errors import DomainError
from stateward.governance.keys import read_key_file
from stateward.runtime.messages import correlate

TIMEOUT = 30.0


class Usage(Exception):
    """Bad usage (exit 2)."""


def _payload(text: str | None) -> Any:
    if text is None:
        return {}
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    try:
        return loads_strict(text)
    except DomainError as exc:
        raise Usage(f"--payload is not valid JSON: {exc.message}") from exc


async def _on_db(args: argparse.Namespace, payload: Any) -> dict[str, Any]:
    if not args.key_file:
        raise Usage("--db needs --key-file (the publishing actor)")
    actor = read_key_file(args.key_file).public
    async with cli_runtime(args) as runtime:
        result = await correlate.publish(
            runtime, actor, args.namespace, args.name, args.key, payload,
            ttl_seconds=args.ttl, message_id=args.message_id,
        )  # fmt: skip
    message = result.message
    return {
        "messageId": message.message_id, "name": message.name,
        "namespace": message.namespace, "correlationKey": message.correlation_key,
        "duplicate": result.duplicate,
        "expiresAt": message.expires_at.isoformat().replace("+00:00", "Z"),
        "delivered": result.delivered, "started": result.started,
    }  # fmt: skip


def _over_http(args: argparse.Namespace, payload: Any) -> dict[str, Any]:
    import httpx

    if not args.token:
        raise Usage("--url needs --token (an API token)")
    body: dict[str, Any] = {
        "namespace": args.namespace, "correlationKey": args.key, "payload": payload,
        "ttlSeconds": args.ttl,
    }  # fmt: skip
    if args.message_id is not None:
        body["messageId"] = args.message_id
    url = args.url.rstrip("/").removesuffix("/graphql") + f"/messages/{args.name}"
    response = httpx.post(
        url, json=body, headers={"Authorization": f"Bearer {args.token}"}, timeout=TIMEOUT
    )
    answer = response.json()
    if response.status_code != 200:
        error = answer["errors"][0]
        raise DomainError(error["extensions"]["code"], error["message"])
    return dict(answer)


def run(args: argparse.Namespace) -> int:
    """Publish; print the JSON answer. 0, 1 refused, 2 bad usage."""
    try:
        if (args.url is None) == (args.db is None and args.key_file is None):
            raise Usage("give either --db URL --key-file KEYFILE or --url URL --token TOKEN")
        payload = _payload(args.payload)
        answer = (
            _over_http(args, payload)
            if args.url is not None
            else asyncio.run(_on_db(args, payload))
        )
    except (Usage, OSError, ValueError) as exc:
        print(f"publish: {exc}", file=sys.stderr)
        return 2
    except DomainError as exc:
        print(f"publish: {exc.code} {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(answer, sort_keys=True))
    return 0

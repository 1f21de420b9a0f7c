"""What the operation commands share (issue 15): talk to the database (`--db URL`, as the
key file's actor) or to a running server (`--url URL --token TOKEN`, GraphQL).

`add_target(parser)` adds the flags; `remote(args)` says which one was chosen (bad usage
when both or a half of the server pair is given); `query(args, document, variables)`
runs one GraphQL operation on the server and returns its `data` (a refusal raises a
`DomainError` with the server's code, pointer and problems, like the local path does).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from stateward.domain.errors import DomainError, Problem


def add_target(p: argparse.ArgumentParser, *, key: bool = True) -> None:
    """`--db URL` (with `--key-file`) or `--url URL --token TOKEN`."""
    p.add_argument("--db", dest="db", default=None, help="database URL (STATEWARD_DATABASE_URL)")
    if key:
        p.add_argument("--key-file", default=None, help="with --db: the acting key's file")
    p.add_argument("--url", default=None, help="a running server's GraphQL URL (with --token)")
    p.add_argument("--token", default=None, help="an API token for --url")


def remote(args: argparse.Namespace) -> bool:
    """True for `--url` + `--token`; ValueError for a mix or half of the pair."""
    url, token = getattr(args, "url", None), getattr(args, "token", None)
    if url is None and token is None:
        return False
    if url is None or token is None:
        raise ValueError("--url and --token go together")
    if getattr(args, "db", None) is not None:
        raise ValueError("give either --db or --url/--token, not both")
    return True


def json_arg(text: str | None, name: str) -> dict[str, Any] | None:
    """A JSON object given on the command line (None when absent)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object")
    return value


async def query(
    args: argparse.Namespace, document: str, variables: Mapping[str, Any] | None = None
) -> Any:
    """`data` of one GraphQL operation on `--url` as `--token`."""
    from stateward.client.api import Client, StatewardError

    async with Client(args.url, token=args.token) as client:
        try:
            return await client.query(document, variables)
        except StatewardError as exc:
            problems = tuple(
                Problem(
                    str(p.get("code", exc.code)),
                    str(p.get("message", "")),
                    str(p.get("pointer", "")),
                )
                for p in exc.extensions.get("problems") or ()
            )
            raise DomainError(
                exc.code, exc.message, pointer=str(exc.extensions.get("pointer", "")),
                problems=problems,
            ) from exc  # fmt: skip

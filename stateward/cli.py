"""The `stateward` command line (DESIGN §11): argument parsing and dispatch only.

Exit codes: 0 success, 1 a finding, 2 bad usage. Findings go to stdout as
`path: CODE pointer message`.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any

from stateward.commands.remote import add_target

#: A public key as `keygen` prints it: 43 base64url characters, and base64url's alphabet
#: has "-": one key in 64 begins with it, which argparse would take for an option.
_DASHED_KEY = re.compile(r"-[A-Za-z0-9_-]{42}")


class _Parser(argparse.ArgumentParser):
    """argparse, except that a public key beginning with "-" is a value (`key revoke
    -AbC…`), never an option: no option of this CLI has that shape."""

    def _parse_optional(self, arg_string: str) -> Any:
        if _DASHED_KEY.fullmatch(arg_string):
            return None
        return super()._parse_optional(arg_string)


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", dest="db", default=None, help="database URL (STATEWARD_DATABASE_URL)")


_KEY = "key file of the actor (from `stateward keygen`)"
_KEY_ADMIN = "operator key file granted admin (created when missing)"
_EPILOG = (
    "Exit codes: 0 success, 1 a finding, 2 bad usage. Settings also come from STATEWARD_* "
    "environment variables (flags win); see README.md."
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser of every subcommand."""
    parser = _Parser(prog="stateward", description=__doc__.splitlines()[0], epilog=_EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="validate workflow files or folders of *.json")
    p.add_argument("paths", nargs="+", help="workflow files or folders of *.json (and *.star)")
    p.add_argument("--json", action="store_true", help="print a JSON report")

    p = sub.add_parser("keygen", help="write a new Ed25519 key file")
    p.add_argument("--out", required=True, help="key file to create (mode 0600, never overwritten)")

    p = sub.add_parser("init", help="create the schema and the system registry genesis")
    _db(p)
    p.add_argument("--key-file", required=True, help=_KEY_ADMIN)

    p = sub.add_parser("token", help="print an API token for a key's actor")
    _db(p)
    p.add_argument("--key-file", required=True, help=_KEY)
    p.add_argument("--label", default="cli", help="label stored with the token (default: cli)")
    p.add_argument(
        "--ttl",
        type=float,
        default=None,
        help="seconds until it expires (default: STATEWARD_TOKEN_TTL, 30 days; at most a year)",
    )

    p = sub.add_parser("sign", help="sign an event envelope (JSON on stdin or a file)")
    p.add_argument("--key-file", required=True, help=_KEY)
    p.add_argument("envelope", nargs="?", default="-", help="envelope JSON file (default: stdin)")

    p = sub.add_parser("deploy", help="deploy workflow files through signed registry events")
    _db(p)
    p.add_argument("paths", nargs="+", help="workflow files or folders (*.star files: modules)")
    p.add_argument("--key-file", required=True, help="an admin's key file (signs the events)")

    p = sub.add_parser("verify", help="verify signatures, hash chains, replay and the log")
    _db(p)
    p.add_argument("process_id", nargs="?", default=None, help="one process (default: all)")
    p.add_argument("--log", default=None, help="verify an exported log file (no database)")
    p.add_argument(
        "--checkpoint", default=None, help="a checkpoint JSON saved earlier the log must contain"
    )

    p = sub.add_parser("checkpoint", help="print the latest signed checkpoint of the log")
    _db(p)
    p.add_argument("--sign", action="store_true", help="sign a fresh one first (node key)")

    p = sub.add_parser(
        "key", help="rotate, revoke, trust or distrust a key (signed registry events)"
    )
    keys = p.add_subparsers(dest="key_command", required=True)
    q = keys.add_parser("rotate", help="move a key's grants to a new key; retire the old one")
    _db(q)
    q.add_argument("--key-file", required=True, help="the current key (signs the event)")
    q.add_argument("--new-key-file", required=True, help="the new key (created when missing)")
    q = keys.add_parser("revoke", help="revoke a key (needs a system admin's key)")
    _db(q)
    q.add_argument("--key-file", required=True, help="a system admin's key file")
    q.add_argument("key", help="the public key to revoke")
    for verb, what in (("trust", "may attest events"), ("distrust", "attests nothing more")):
        q = keys.add_parser(verb, help=f"a node key {what} (needs a system admin's key)")
        _db(q)
        q.add_argument("--key-file", required=True, help="a system admin's key file")
        q.add_argument("key", help="the node's public key")

    p = sub.add_parser("log", help="export, restore and prove the deployment log")
    logs = p.add_subparsers(dest="log_command", required=True)
    q = logs.add_parser("export", help="write the whole log as JSON Lines")
    _db(q)
    q.add_argument("--out", default="-", help="file to write (default: stdout)")
    q = logs.add_parser("restore", help="rebuild an empty database from an exported log")
    _db(q)
    q.add_argument("--log", required=True, help="the exported log file")
    q = logs.add_parser("proof", help="inclusion proof of one event (RFC 9162)")
    _db(q)
    q.add_argument("process", help="process id")
    q.add_argument("seq", type=int, help="event seq")
    q.add_argument("--size", type=int, default=None, help="tree size (default: current)")
    q = logs.add_parser("consistency", help="consistency proof between tree sizes (RFC 9162)")
    _db(q)
    q.add_argument("first", type=int, help="the older tree size")
    q.add_argument("second", type=int, nargs="?", default=None, help="default: current")

    p = sub.add_parser("export", help="export a namespace as a package")
    _db(p)
    p.add_argument("namespace", help="namespace to export, with every namespace below it")
    p.add_argument("--out", default="-", help="package file to write (default: stdout)")
    p.add_argument(
        "--with-dependencies",
        action="store_true",
        help="also the workflows (and their modules) spawned in other namespaces",
    )

    p = sub.add_parser("import", help="import a package (all-or-nothing)")
    _db(p)
    p.add_argument("package", help="package JSON file (stateward.package/1)")
    p.add_argument("--key-file", required=True, help="an admin's key file (signs the events)")

    p = sub.add_parser("publish", help="publish a message to the instances waiting for it")
    _db(p)
    p.add_argument("name", help="message name")
    p.add_argument("--namespace", required=True, help="namespace (and below) to publish in")
    p.add_argument("--key", required=True, help="correlation key")
    p.add_argument("--payload", default=None, help="JSON object, or @file (default: {})")
    p.add_argument("--ttl", type=int, default=0, help="seconds kept for later arrivals (0)")
    p.add_argument("--message-id", default=None, help="idempotency id of the message")
    p.add_argument("--key-file", default=None, help=_KEY + " (with --db)")
    p.add_argument("--url", default=None, help="a running server (with --token)")
    p.add_argument("--token", default=None, help="API token (with --url)")

    p = sub.add_parser("batch", help="start, watch or stop a bulk operation")
    _db(p)
    p.add_argument("op", choices=["cancel", "action", "status", "stop"], help="what to do")
    p.add_argument("id", nargs="?", default=None, help="the batch id (status, stop)")
    p.add_argument("--filter", default=None, help="InstanceFilter as JSON (cancel, action)")
    p.add_argument("--reason", default=None, help="the cancel reason")
    p.add_argument("--action", default=None, help="the action to perform (action)")
    p.add_argument("--input", default=None, help="the action's input, JSON (action)")
    p.add_argument("--no-wait", action="store_true", help="return at once, do not wait")
    p.add_argument("--key-file", default=None, help=_KEY + " (with --db)")
    p.add_argument("--url", default=None, help="a running server (with --token)")
    p.add_argument("--token", default=None, help="API token (with --url)")

    p = sub.add_parser("migrate", help="move an instance to another version of its workflow")
    add_target(p)
    p.add_argument("instance", help="instance id")
    p.add_argument("--to-version", type=int, required=True, help="the version to move it to")
    p.add_argument("--state-map", default=None, help='JSON {"old state": "new state"}')
    p.add_argument("--mutate", default=None, help="JSON DSL data mutation applied with it")
    p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")

    p = sub.add_parser("incidents", help="list incidents (failures that stopped instances)")
    add_target(p)
    p.add_argument("--namespace", default=None, help="only this namespace")
    p.add_argument("--workflow", default=None, help="only this workflow path")
    p.add_argument("--kind", action="append", default=None,
                   choices=["HOOK_FAILED", "HOOK_TIMEOUT", "CYCLE_GUARD", "TIMER_FAILED",
                            "WEBHOOK_EXHAUSTED", "WORKFLOW_ERROR"],
                   help="only this kind (repeatable)")  # fmt: skip
    p.add_argument("--open", action="store_true", help="only open incidents")
    p.add_argument("--resolved", action="store_true", help="only resolved incidents")
    p.add_argument("--instance", default=None, help="only this instance's incidents")
    p.add_argument("--first", type=int, default=50, help="how many, newest first (50, max 100)")
    p.add_argument("--json", action="store_true", help="print a JSON array")

    p = sub.add_parser("retry", help="retry (or resolve) an incident")
    add_target(p)
    p.add_argument("incident", help="incident id")
    p.add_argument(
        "--resolve",
        default=None,
        metavar="ACTION",
        help="resolve instead: $cancel, or an action of the instance's state",
    )
    p.add_argument("--input", default=None, help="with --resolve: the action's input, JSON")

    p = sub.add_parser("serve", help="run the GraphQL server")
    _db(p)
    p.add_argument("--host", default=None, help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default: 8000; 0: any free one)")
    p.add_argument(
        "--bus", default=None, help="memory:// | redis://... | postgres://... (STATEWARD_BUS_URL)"
    )
    p.add_argument(
        "--mode",
        default=None,
        choices=["development", "production"],
        help="production turns introspection and GraphiQL off (STATEWARD_MODE)",
    )
    p.add_argument(
        "--node-key-file", default=None, help="this node's signing key (STATEWARD_NODE_KEY_FILE)"
    )
    p.add_argument(
        "--demo", action="store_true", help="deploy examples/, start instances, print a token"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus /metrics on this port (STATEWARD_METRICS_PORT; "
        "STATEWARD_METRICS=1 serves them at /metrics of the API port)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes sharing the port (STATEWARD_WORKERS; default 1; "
        "more than one needs PostgreSQL)",
    )

    p = sub.add_parser("bench", help="run a benchmark from bench/")
    p.add_argument(
        "name",
        choices=["engine", "store", "api", "sla", "verify", "operations"],
        help="bench/NAME.py",
    )
    p.add_argument("--quick", action="store_true", help="a shorter run")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    return parser


_MODULES = {"import": "import_", "export": "export"}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `stateward` script."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage
        return int(exc.code or 0)
    name = _MODULES.get(args.command, args.command)
    module = importlib.import_module(f"stateward.commands.{name}")
    return int(module.run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

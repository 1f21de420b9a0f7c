"""The `stateward` command line (DESIGN §11): argument parsing and dispatch only.

Exit codes: 0 success, 1 a finding, 2 bad usage. Findings go to stdout as
`path: CODE pointer message`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", dest="db", default=None, help="database URL (STATEWARD_DATABASE_URL)")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="stateward", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="validate workflow files or folders of *.json")
    p.add_argument("paths", nargs="+")
    p.add_argument("--json", action="store_true", help="print a JSON report")

    p = sub.add_parser("keygen", help="write a new Ed25519 key file")
    p.add_argument("--out", required=True)

    p = sub.add_parser("init", help="create the schema and the system registry genesis")
    _db(p)
    p.add_argument("--key-file", required=True)

    p = sub.add_parser("token", help="print an API token for a key's actor")
    _db(p)
    p.add_argument("--key-file", required=True)
    p.add_argument("--label", default="cli")
    p.add_argument("--ttl", type=float, default=None)

    p = sub.add_parser("sign", help="sign an event envelope (JSON on stdin or a file)")
    p.add_argument("--key-file", required=True)
    p.add_argument("envelope", nargs="?", default="-")

    p = sub.add_parser("deploy", help="deploy workflow files through signed registry events")
    _db(p)
    p.add_argument("paths", nargs="+")
    p.add_argument("--key-file", required=True)

    p = sub.add_parser("verify", help="verify signatures, hash chains and replay")
    _db(p)
    p.add_argument("process_id", nargs="?", default=None)

    p = sub.add_parser("export", help="export a namespace as a package")
    _db(p)
    p.add_argument("namespace")
    p.add_argument("--out", default="-")

    p = sub.add_parser("import", help="import a package (all-or-nothing)")
    _db(p)
    p.add_argument("package")
    p.add_argument("--key-file", required=True)

    p = sub.add_parser("serve", help="run the GraphQL server")
    _db(p)
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--bus", default=None)
    p.add_argument("--mode", default=None, choices=["development", "production"])
    p.add_argument("--node-key-file", default=None)
    p.add_argument("--demo", action="store_true")

    p = sub.add_parser("bench", help="run a benchmark from bench/")
    p.add_argument("name", choices=["engine", "store", "api", "sla"])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
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

"""Implementations of the `stateward` CLI subcommands, one module per command.

Each module exposes `run(args: argparse.Namespace) -> int` (exit code: 0 success,
1 a finding, 2 bad usage). `stateward.cli` only parses arguments and dispatches.
"""

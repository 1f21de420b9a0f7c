"""`stateward migrate INSTANCE --to-version N [--state-map JSON] [--mutate JSON] [--dry-run]`
with `--db URL --key-file KEY` (as the key's actor) or `--url URL --token TOKEN`.

Moves one instance to another version of its workflow (a `$migrate` event; admin or
operator of its namespace) and prints the plan as JSON on stdout: from/to version and
state, assignments kept, cancelled or opened, timers cancelled or armed, the recomputed
SLA deadlines. `--dry-run` prints the plan and writes nothing. A refusal prints one
finding per problem, `INSTANCE: CODE pointer message` (`MIGRATION_INVALID /stateMap/review
...`). Exit 0 migrated (or a valid dry run), 1 refused, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from stateward.commands.remote import json_arg, query, remote
from stateward.commands.runtime_args import cli_runtime
from stateward.commands.validate import format_finding
from stateward.domain.errors import DomainError, Problem
from stateward.governance.keys import read_key_file

MUTATION = """mutation($i:ID!,$v:Int!,$m:JSON,$u:JSON,$d:Boolean!){
  migrateInstance(instance:$i,toVersion:$v,stateMap:$m,mutate:$u,dryRun:$d){
    plan{instanceId workflowPath fromVersion toVersion fromState toState assignmentsKept
         assignmentsCancelled assignmentOpened timersCancelled{id action key}
         timersArmed{id action key} slaWarnAt slaDueAt valid
         problems{code message pointer}}}}"""


def plan_json(plan: Any) -> dict[str, Any]:
    """A `MigrationPlan` as the JSON the server answers (camelCase)."""
    return {
        "instanceId": plan.instance,
        "workflowPath": plan.workflow,
        "fromVersion": plan.from_version,
        "toVersion": plan.to_version,
        "fromState": plan.from_state,
        "toState": plan.to_state,
        "assignmentsKept": list(plan.assignments_kept),
        "assignmentsCancelled": list(plan.assignments_cancelled),
        "assignmentOpened": plan.assignment_opened,
        "timersCancelled": [t.as_dict() for t in plan.timers_cancelled],
        "timersArmed": [t.as_dict() for t in plan.timers_armed],
        "slaWarnAt": plan.sla_warn_at,
        "slaDueAt": plan.sla_due_at,
        "valid": plan.valid,
        "problems": [p.as_dict() for p in plan.problems],
    }


async def _local(args: argparse.Namespace, state_map: Any, mutate: Any) -> dict[str, Any]:
    from stateward.runtime.operate.migration import migrate_instance

    if args.key_file is None:
        raise ValueError("--db needs --key-file (the acting key)")
    actor = read_key_file(args.key_file).public
    async with cli_runtime(args) as runtime:
        done = await migrate_instance(
            runtime, actor, args.instance, args.to_version, state_map, mutate,
            dry_run=args.dry_run,
        )  # fmt: skip
    return plan_json(done.plan)


async def _remote(args: argparse.Namespace, state_map: Any, mutate: Any) -> dict[str, Any]:
    variables = {"i": args.instance, "v": args.to_version, "m": state_map, "u": mutate,
                 "d": bool(args.dry_run)}  # fmt: skip
    data = await query(args, MUTATION, variables)
    return dict(data["migrateInstance"]["plan"])


def run(args: argparse.Namespace) -> int:
    """Migrate (or plan); 0 done, 1 refused, 2 bad usage."""
    try:
        state_map = json_arg(args.state_map, "--state-map")
        mutate = json_arg(args.mutate, "--mutate")
        coroutine = _remote if remote(args) else _local
        plan = asyncio.run(coroutine(args, state_map, mutate))
    except DomainError as exc:
        problems = exc.problems or (Problem(exc.code, exc.message, exc.pointer),)
        for problem in problems:
            print(format_finding(args.instance, problem))
        print(f"migrate: refused ({exc.code})", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"migrate: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(plan, indent=2, sort_keys=True))
    for problem in plan["problems"]:
        print(format_finding(args.instance, Problem(**problem)), file=sys.stderr)
    what = "planned" if args.dry_run else "migrated"
    print(f"migrate: {what} {args.instance} v{plan['fromVersion']} -> v{plan['toVersion']}",
          file=sys.stderr)  # fmt: skip
    return 0 if plan["valid"] else 1

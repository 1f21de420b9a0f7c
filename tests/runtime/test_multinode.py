"""Two OS processes tick on one database: every SLA warning, breach, timer and webhook
delivery happens exactly once (DESIGN §7: "exactly once across nodes")."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from kernel_fixtures import DESK, TICKET, TIMED, Desk, Receiver

from stateward.governance.keys import generate_keypair
from stateward.runtime.access.genesis import init
from stateward.runtime.access.registry import set_webhook
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.ops_support import kernel_repo
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings

WORKER = Path(__file__).with_name("multinode_worker.py")
N = 12
DEADLINE_S = 3
RUN_S = 8.0
QUICK = {**TICKET, "$path": "ops/desk/quick"}
QUICK["states"] = {**TICKET["states"], "review": {"label": "Review", "assign": "analyst",
                                                  "sla_seconds": DEADLINE_S}}  # fmt: skip
TIMER = {**TIMED, "$path": "ops/desk/quicktimer"}
ARM = {"from": "waiting", "schedule": [{"action": "expire", "after": DEADLINE_S, "key": "t"}]}
TIMER["actions"] = {**TIMED["actions"], "arm": ARM}


async def _node(url: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), url, str(RUN_S),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


async def test_two_processes_fire_every_mark_timer_and_delivery_exactly_once(postgres_db_url):
    operator = generate_keypair()
    rt = await Runtime.open(Settings(database_url=postgres_db_url), node_key=generate_keypair())
    receiver = Receiver()
    try:
        await init(rt, operator)
        desk = await Desk(rt, operator).setup(QUICK, TIMER)
        await set_webhook(rt, operator, DESK, receiver.url, "k")
        tickets, timers = [], []
        for _ in range(N):
            pid = (await start_instance(rt, desk.admin, QUICK["$path"], {})).record.id
            await perform_action(rt, desk.admin, pid, "submit", {})
            tickets.append(pid)
            tid = (await start_instance(rt, desk.admin, TIMER["$path"], {})).record.id
            await perform_action(rt, desk.admin, tid, "arm", {})
            timers.append(tid)
        a, b = await asyncio.gather(_node(postgres_db_url), _node(postgres_db_url))
        async with rt.uow(readonly=True) as uow:
            logs = {p: await uow.events.for_process(p) for p in tickets + timers}
            delivery_rows = await kernel_repo(uow).deliveries()
    finally:
        receiver.close()
        await rt.close()
    assert a["errors"] == [] and b["errors"] == []
    assert sorted(a["warnings"] + b["warnings"]) == sorted(tickets)
    assert sorted(a["breaches"] + b["breaches"]) == sorted(tickets)
    assert len(a["timers"] + b["timers"]) == N
    for pid in tickets:
        kinds = Counter(e.input["kind"] for e in logs[pid] if e.action == "$sla")
        assert kinds == {"warning": 1, "breach": 1}, (pid, kinds)
    for tid in timers:
        assert [e.action for e in logs[tid]].count("$timer") == 1
    assert sorted(r.status for r in delivery_rows) == ["delivered"] * N
    posted = Counter(json.loads(body)["instanceId"] for _, body in receiver.requests)
    assert posted == dict.fromkeys(tickets, 1)
    assert a["deliveries"] + b["deliveries"] == N

"""One stateward "node" for the multi-process test: ticks on a shared database.

Run as `python multinode_worker.py DATABASE_URL SECONDS`; prints one JSON line with what
THIS node fired: `{"warnings": [...], "breaches": [...], "timers": [...], "deliveries": n}`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from stateward.governance.keys import generate_keypair
from stateward.runtime.core.services import Runtime
from stateward.runtime.ticker import tick
from stateward.settings import Settings


async def main(url: str, seconds: float) -> None:
    rt = await Runtime.open(
        Settings(database_url=url), create_schema=False, node_key=generate_keypair()
    )
    fired: dict[str, list] = {"warnings": [], "breaches": [], "timers": [], "errors": []}
    deliveries = 0
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            report = await tick(rt)
            fired["warnings"] += report.sla.warnings
            fired["breaches"] += report.sla.breaches
            fired["timers"] += report.timers.fired
            fired["errors"] += list(report.errors.values())
            deliveries += sum(1 for a in report.deliveries if a.ok)
            await asyncio.sleep(0.02)
    finally:
        await rt.close()
    print(json.dumps({**fired, "deliveries": deliveries}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))

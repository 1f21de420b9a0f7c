"""One stateward "node" working on a bulk operation (issue 15 tests).

Run as `python batch_worker.py DATABASE_URL BATCH_ID [PAGE] [--barrier]`; prints one JSON
line with what THIS node finished: `{"succeeded": n, "failed": n, "pages": n}`. With
`--barrier` it prints `ready` once its runtime is open and starts only when a line comes on
its standard input (so that two nodes start the work together, however long each took to
start on a loaded machine).
"""

from __future__ import annotations

import asyncio
import json
import sys

from stateward.governance.keys import generate_keypair
from stateward.runtime.batches import bulk
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings


async def main(url: str, batch_id: str, page: int, barrier: bool) -> None:
    rt = await Runtime.open(
        Settings(database_url=url), create_schema=False, node_key=generate_keypair()
    )
    try:
        if barrier:
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        progress = await bulk.process(rt, batch_id, page=page)
    finally:
        await rt.close()
    print(json.dumps({"succeeded": progress.succeeded, "failed": progress.failed,
                      "pages": progress.pages}))  # fmt: skip


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--barrier"]
    page_size = int(args[2]) if len(args) > 2 else 50
    asyncio.run(main(args[0], args[1], page_size, "--barrier" in sys.argv))

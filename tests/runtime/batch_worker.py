"""One stateward "node" working on a bulk operation (issue 15 tests).

Run as `python batch_worker.py DATABASE_URL BATCH_ID [PAGE]`; prints one JSON line with
what THIS node finished: `{"succeeded": n, "failed": n, "pages": n}`.
"""

from __future__ import annotations

import asyncio
import json
import sys

from stateward.governance.keys import generate_keypair
from stateward.runtime.batches import bulk
from stateward.runtime.core.services import Runtime
from stateward.settings import Settings


async def main(url: str, batch_id: str, page: int) -> None:
    rt = await Runtime.open(
        Settings(database_url=url), create_schema=False, node_key=generate_keypair()
    )
    try:
        progress = await bulk.process(rt, batch_id, page=page)
    finally:
        await rt.close()
    print(json.dumps({"succeeded": progress.succeeded, "failed": progress.failed,
                      "pages": progress.pages}))  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 50))

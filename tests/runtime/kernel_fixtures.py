"""Workflows and helpers shared by the kernel runtime service tests (assignments, SLA,
timers, staleness, automation, public entry). Everything goes through the real runtime."""

from __future__ import annotations

import uuid
from typing import Any

from stateward.governance.keys import KeyPair, generate_keypair
from stateward.records import AssignmentRecord, OutboxRecord, ProcessRecord
from stateward.runtime.access import registry
from stateward.runtime.core.commands import perform_action, start_instance
from stateward.runtime.core.services import Runtime

DESK = "ops/desk"
TICKET: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/ticket",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "review": {"label": "Review", "assign": "analyst", "sla_seconds": 100},
        "done": {"label": "Done", "terminal": True},
        "rejected": {"label": "Rejected", "terminal": True},
    },
    "actions": {
        "submit": {"from": "intake", "to": "review"},
        "note": {"from": "review", "mutate": {"$increment": {"notes": 1}}},
        "approve": {
            "role": "analyst,admin",
            "from": "review",
            "to": "done",
            "mutate": {"$set": {"verdict": "input.reviewData.verdict"}},
        },
        "reject": {"role": "analyst,admin", "from": "review", "to": "rejected"},
    },
}

TIMED: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/timed",
    "initial": "waiting",
    "states": {
        "waiting": {"label": "Waiting"},
        "expired": {"label": "Expired", "terminal": True},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "arm": {"from": "waiting", "schedule": [{"action": "expire", "after": 60, "key": "t"}]},
        "arm_late": {"from": "waiting", "schedule": [{"action": "expire", "after": 600}]},
        "expire": {"role": "admin", "from": "waiting", "to": "expired"},
        "finish": {"from": "waiting", "to": "done"},
    },
}


class Desk:
    """An initialized deployment with the desk workflows and an analyst team."""

    def __init__(self, rt: Runtime, operator: KeyPair) -> None:
        self.rt = rt
        self.operator = operator
        self.admin = operator.public
        self.analysts = [generate_keypair().public for _ in range(3)]
        self.outsider = generate_keypair().public  # no role: may not even read
        self.member = generate_keypair().public  # reads the desk, holds no team role

    async def setup(self, *definitions: dict[str, Any]) -> Desk:
        """Deploy `definitions` (default: the ticket workflow) and grant the analysts."""
        for definition in definitions or (TICKET,):
            await registry.deploy_workflow(self.rt, self.operator, definition)
        for analyst in self.analysts:
            await registry.grant_role(self.rt, self.operator, DESK, analyst, ["analyst"])
        await registry.grant_role(self.rt, self.operator, DESK, self.member, ["viewer"])
        return self

    async def ticket_in_review(self, **data: Any) -> str:
        """A new ticket moved into `review` (which opens an assignment)."""
        pid = (await start_instance(self.rt, self.admin, TICKET["$path"], data)).record.id
        await perform_action(self.rt, self.admin, pid, "submit", {})
        return pid

    async def process(self, pid: str) -> ProcessRecord:
        """The process row now."""
        async with self.rt.uow(readonly=True) as uow:
            record = await uow.processes.get(pid)
        assert record is not None
        return record

    async def open_assignment(self, pid: str) -> AssignmentRecord:
        """The single open assignment of `pid`."""
        async with self.rt.uow(readonly=True) as uow:
            found = await uow.assignments.open_for_process(pid)
        assert len(found) == 1, found
        return found[0]

    async def outbox(self, pid: str) -> list[OutboxRecord]:
        """Every bus message about `pid`, in order."""
        async with self.rt.uow(readonly=True) as uow:
            from stateward.records import OutboxFilter

            return await uow.outbox.events_after(0, OutboxFilter(instance_id=pid))

    async def actions(self, pid: str) -> list[str]:
        """The action names of `pid`'s log, in order."""
        async with self.rt.uow(readonly=True) as uow:
            return [e.action for e in await uow.events.for_process(pid)]


def new_id() -> str:
    """A fresh instance id."""
    return str(uuid.uuid4())


class Receiver:
    """A real HTTP server on 127.0.0.1 (a thread) that records webhook POSTs and answers
    with the next status of `statuses` (then 200)."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        import http.server
        import threading

        self.statuses = list(statuses or [])
        self.requests: list[tuple[dict[str, str], bytes]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = outer.statuses.pop(0) if outer.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop the server."""
        self.server.shutdown()
        self.server.server_close()

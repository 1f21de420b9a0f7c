"""Model-based test of the runtime, Jepsen-lite (issue 9, "How it is checked").

A Hypothesis `RuleBasedStateMachine` drives random sequences of start / act / advance /
claim / unclaim / complete / cancel / timer firing / node restart against the REAL
runtime on a fresh database (SQLite and PostgreSQL), keeping a small model of what each
instance must look like. After every step it checks, for every instance:

- its events' seqs are 1..n with no gap and the process row is at seq n (no event is
  half-written: the row, the log and the chain move together);
- it is in the model's state and status, with the model's counter (`n`);
- an instance in the assigned state has exactly ONE open assignment, any other none;
- `verify` is clean: signatures, chain, and a replay of the log reproduces the stored
  data, state and status.
Examples are few (about a minute for both databases), the seed is fixed and failures are
not shrunk (the generated steps are printed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from stateward.domain.errors import DomainError
from stateward.governance.keys import generate_keypair
from stateward.runtime.access import registry
from stateward.runtime.access.genesis import init
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.commands import (
    advance_instance,
    cancel_instance,
    perform_action,
    start_instance,
)
from stateward.runtime.core.services import Runtime
from stateward.runtime.insight.verify import verify
from stateward.runtime.queues.assignments import (
    claim_assignment,
    complete_assignment,
    unclaim_assignment,
)
from stateward.runtime.sweeps.scheduler import fire_due
from stateward.settings import Settings

NAMESPACE = "model/desk"
FLOW: dict[str, Any] = {
    "$version": "2.0",
    "$path": "model/desk/flow",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "review": {"label": "Review", "assign": "analyst"},
        "waiting": {"label": "Waiting"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {"from": "intake", "to": "review", "mutate": {"$increment": {"n": 1}}},
        "bump": {"from": ["intake", "review", "waiting"], "mutate": {"$increment": {"n": 1}}},
        "approve": {
            "role": "analyst,admin",
            "from": "review",
            "to": "waiting",
            "schedule": [{"action": "expire", "after": 60, "key": "t"}],
        },
        "expire": {"role": "admin", "from": "waiting", "to": "done"},
        "finish": {"from": "waiting", "to": "done"},
    },
}
#: What a successful action does to the model: (from states, to state or None, +n).
MOVES: dict[str, tuple[frozenset[str], str | None, int]] = {
    "submit": (frozenset({"intake"}), "review", 1),
    "bump": (frozenset({"intake", "review", "waiting"}), None, 1),
    "approve": (frozenset({"review"}), "waiting", 0),
    "finish": (frozenset({"waiting"}), "done", 0),
}
LIVE = "active"


class Model:
    """What one instance must look like."""

    def __init__(self) -> None:
        self.state = "intake"
        self.status = LIVE
        self.n = 0

    def apply(self, action: str) -> bool:
        """Apply `action` if the workflow allows it now; True when it should succeed."""
        sources, target, bump = MOVES[action]
        if self.status != LIVE or self.state not in sources:
            return False
        self.n += bump
        if target is not None:
            self.state = target
            if target == "done":
                self.status = "completed"
        return True


class RuntimeMachine(RuleBasedStateMachine):
    """The machine (see the module docstring); `databases` is set by the test below."""

    databases: Any = None  # tests/conftest.py: make_database_url / drop_database
    kind = "sqlite"
    instances = Bundle("instances")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.url = self.databases.make_database_url(self.kind)
        self.clock = ManualClock(datetime.now(UTC))
        self.node_key = generate_keypair()
        self.operator = generate_keypair()
        self.analysts = [generate_keypair().public for _ in range(2)]
        self.models: dict[str, Model] = {}
        self.rt: Runtime = self.run(self._open())

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def _open(self) -> Runtime:
        settings = Settings(database_url=self.url)
        return await Runtime.open(settings, clock=self.clock, node_key=self.node_key)

    def teardown(self) -> None:
        try:
            self.run(self.rt.close())
        finally:
            self.loop.close()
            self.databases.drop_database(self.url)

    @property
    def admin(self) -> str:
        return self.operator.public

    # -- rules -------------------------------------------------------------------------

    @initialize()
    def deploy(self) -> None:
        async def setup() -> None:
            await init(self.rt, self.operator)
            await registry.deploy_workflow(self.rt, self.operator, FLOW)
            for analyst in self.analysts:
                await registry.grant_role(self.rt, self.operator, NAMESPACE, analyst, ["analyst"])

        self.run(setup())

    @rule(target=instances)
    def start(self) -> str:
        result = self.run(start_instance(self.rt, self.admin, FLOW["$path"], {"n": 0}))
        pid = result.record.id
        self.models[pid] = Model()
        return pid

    @rule(pid=instances, action=st.sampled_from(sorted(MOVES)))
    def act(self, pid: str, action: str) -> None:
        model = self.models[pid]
        expected = Model()
        expected.__dict__.update(model.__dict__)
        should = expected.apply(action)
        try:
            self.run(perform_action(self.rt, self.admin, pid, action, {}))
        except DomainError as error:
            assert not should, f"{action} in {model.state} refused: {error.code}"
            return
        assert should, f"{action} in {model.state}/{model.status} was accepted"
        self.models[pid] = expected

    @rule(pid=instances)
    def advance(self, pid: str) -> None:
        try:
            self.run(advance_instance(self.rt, self.admin, pid, {}))
        except DomainError:
            return
        self._resync(pid)

    @rule(pid=instances, who=st.integers(0, 1))
    def claim(self, pid: str, who: int) -> None:
        assignment = self._open_assignment(pid)
        if assignment is None:
            return
        try:
            self.run(claim_assignment(self.rt, self.analysts[who], assignment.id))
        except DomainError as error:
            assert assignment.assignee is not None, error  # only a claimed one is refused

    @rule(pid=instances)
    def unclaim(self, pid: str) -> None:
        assignment = self._open_assignment(pid)
        if assignment is None or assignment.assignee is None:
            return
        self.run(unclaim_assignment(self.rt, assignment.assignee, assignment.id))

    @rule(pid=instances)
    def complete(self, pid: str) -> None:
        assignment = self._open_assignment(pid)
        if assignment is None or assignment.assignee is None:
            return
        review = {"ok": True}
        self.run(
            complete_assignment(self.rt, assignment.assignee, assignment.id, review, "approve")
        )
        model = self.models[pid]
        assert model.apply("approve"), model.state

    @rule(pid=instances)
    def cancel(self, pid: str) -> None:
        model = self.models[pid]
        try:
            self.run(cancel_instance(self.rt, self.admin, pid, "model"))
        except DomainError as error:
            assert model.status != LIVE, error.code
            return
        assert model.status == LIVE
        model.status = "cancelled"

    @rule()
    def timers_fire(self) -> None:
        self.clock.advance(61)
        self.run(fire_due(self.rt))
        for pid, model in self.models.items():
            if model.status == LIVE and model.state == "waiting":
                self._resync(pid)

    @precondition(lambda self: bool(self.models))
    @rule()
    def node_restart(self) -> None:
        self.run(self.rt.close())
        self.rt = self.run(self._open())

    # -- helpers -----------------------------------------------------------------------

    def _open_assignment(self, pid: str) -> Any:
        async def read() -> Any:
            async with self.rt.uow(readonly=True) as uow:
                found = await uow.assignments.open_for_process(pid)
            return found[0] if found else None

        return self.run(read())

    def _resync(self, pid: str) -> None:
        """Take the state a rule with no single expected outcome (advance, a timer) led
        to, after checking it is one the workflow allows."""

        async def read() -> Any:
            async with self.rt.uow(readonly=True) as uow:
                return await uow.processes.get(pid)

        record = self.run(read())
        model = self.models[pid]
        assert record.state in FLOW["states"]
        if record.seq and record.state != model.state:
            moved = [a for a, (src, to, _) in MOVES.items() if model.state in src and to]
            assert record.state in {MOVES[a][1] for a in moved} | {"done"}, record.state
        model.state, model.status, model.n = record.state, record.status, record.data.get("n", 0)

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def every_instance_is_consistent(self) -> None:
        if not self.models:
            return

        async def check() -> None:
            async with self.rt.uow(readonly=True) as uow:
                for pid, model in self.models.items():
                    record = await uow.processes.get(pid)
                    assert record is not None
                    seqs = [e.seq for e in await uow.events.for_process(pid)]
                    assert seqs == list(range(1, len(seqs) + 1)), seqs
                    assert record.seq == len(seqs), (record.seq, seqs)
                    assert (record.state, record.status) == (model.state, model.status), pid
                    assert record.data.get("n", 0) == model.n, record.data
                    open_ = await uow.assignments.open_for_process(pid)
                    assigned = record.state == "review" and record.status == LIVE
                    assert len(open_) == (1 if assigned else 0), (record.state, open_)
            report = await verify(self.rt)
            assert report.valid, [p.line() for p in report.problems]

        self.run(check())


MODEL_SETTINGS = settings(
    max_examples=6,
    stateful_step_count=12,
    derandomize=True,
    deadline=None,
    database=None,
    # No shrinking: each step costs database work, and the failing run's steps are printed
    # as they were generated; CI stays bounded even when it fails.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _databases(config: pytest.Config) -> Any:
    """tests/conftest.py as loaded by pytest (its databases are dropped at session end)."""
    root = Path(__file__).resolve().parents[1] / "conftest.py"
    for plugin in config.pluginmanager.get_plugins():
        if Path(getattr(plugin, "__file__", "") or "").resolve() == root:
            return plugin
    raise AssertionError("tests/conftest.py is not loaded")


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_runtime_keeps_its_invariants_under_random_operations(
    kind: str, pytestconfig: pytest.Config
) -> None:
    databases = _databases(pytestconfig)
    if kind == "postgres" and databases.postgres_admin_url() is None:
        pytest.skip("STATEWARD_TEST_POSTGRES_URL is not set: PostgreSQL tests skipped")
    machine: Callable[[], RuntimeMachine] = type(
        f"{kind.title()}Machine", (RuntimeMachine,), {"kind": kind, "databases": databases}
    )
    run_state_machine_as_test(machine, settings=MODEL_SETTINGS)

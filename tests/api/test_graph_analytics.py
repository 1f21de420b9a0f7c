"""Typed workflow analytics through the API: figures of a hand-timed scenario, the window
arguments and who may read them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from graph_stack import Api

from stateward.runtime.core.clock import ManualClock

DESK: dict[str, Any] = {
    "$version": "2.0",
    "$path": "ops/desk/ticket",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "review": {"label": "Review", "sla_seconds": 100},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {"role": "*", "from": "intake", "to": "review"},
        "approve": {"role": "*", "from": "review", "to": "done"},
    },
}
DEPLOY = "mutation($d:JSON!){addWorkflow(definition:$d){id}}"
START = 'mutation{startInstance(workflow:"ops/desk/ticket"){instanceId}}'
DO = "mutation($i:ID!,$a:String!){performAction(instance:$i,action:$a){duplicate}}"
CANCEL = "mutation($i:ID!){cancelInstance(instance:$i){duplicate}}"
ANALYTICS = """query($p:String,$f:DateTime,$t:DateTime){workflow(path:"ops/desk/ticket"){
  analytics(period:$p, from:$f, to:$t){
    workflow version from to started
    statusCounts{status count}
    throughput{day completed}
    cycleTime{count meanSeconds p50Seconds p90Seconds p99Seconds}
    states{state label entered left current slaSeconds slaMet slaBreached slaCompliance
      dwell{count meanSeconds p50Seconds p90Seconds p99Seconds}}}}}"""


async def _scenario(api: Api) -> datetime:
    """Four tickets on a clock moved by hand; returns t0 (clock now = t0 + 400 s)."""
    # noon, so the whole scenario falls on one UTC day
    t0 = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    t0 -= timedelta(days=1)
    clock = ManualClock(t0)
    api.runtime.clock = clock
    await api.ok(DEPLOY, {"d": DESK})

    async def start() -> str:
        return str((await api.ok(START))["startInstance"]["instanceId"])

    async def at(seconds: int, pid: str, action: str) -> None:
        clock.set(t0 + timedelta(seconds=seconds))
        await api.ok(DO, {"i": pid, "a": action})

    a, b = await start(), await start()
    await at(10, a, "submit")  # a: intake 10 s
    await at(40, b, "submit")  # b: intake 40 s
    await at(70, a, "approve")  # a: review 60 s (met), cycle 70 s
    await at(240, b, "approve")  # b: review 200 s (breached: due at 140), cycle 240 s
    clock.set(t0 + timedelta(seconds=250))
    c = await start()
    await at(270, c, "submit")  # c: intake 20 s, in review since 270 (due 370)
    clock.set(t0 + timedelta(seconds=300))
    d = await start()
    await api.ok(CANCEL, {"i": d})  # d: cancelled in intake
    clock.set(t0 + timedelta(seconds=400))  # c is overdue now
    return t0


async def test_typed_analytics_equal_the_hand_computed_figures(api: Api) -> None:
    t0 = await _scenario(api)
    got = (await api.ok(ANALYTICS, {"p": "7d"}))["workflow"]["analytics"]
    assert (got["workflow"], got["version"], got["started"]) == ("ops/desk/ticket", None, 4)
    now = t0 + timedelta(seconds=400)
    assert datetime.fromisoformat(got["to"]) == now
    assert datetime.fromisoformat(got["from"]) == now - timedelta(days=7)
    assert {c["status"]: c["count"] for c in got["statusCounts"]} == {
        "COMPLETED": 2, "ACTIVE": 1, "CANCELLED": 1,
    }  # fmt: skip
    per_day = {d["day"]: d["completed"] for d in got["throughput"]}
    assert per_day[t0.date().isoformat()] == 2 and sum(per_day.values()) == 2
    assert len(per_day) == 8  # 7 days back from noon touch 8 UTC days, zeros listed
    # cycle times 70 and 240: p50 155, p90 70 + 0.9*170 = 223, p99 70 + 0.99*170 = 238.3
    assert got["cycleTime"] == {
        "count": 2, "meanSeconds": 155.0, "p50Seconds": 155.0,
        "p90Seconds": 223.0, "p99Seconds": 238.3,
    }  # fmt: skip
    states = {s["state"]: s for s in got["states"]}
    assert list(states) == ["intake", "review", "done"]
    intake, review, done = states["intake"], states["review"], states["done"]
    # intake: entered by a, b, c, d; left by a (10), b (40), c (20); d is cancelled in it
    assert (intake["label"], intake["entered"], intake["left"], intake["current"]) == (
        "Intake", 4, 3, 0,
    )  # fmt: skip
    assert intake["dwell"] == {
        "count": 3, "meanSeconds": 70 / 3, "p50Seconds": 20.0,
        "p90Seconds": 20 + 0.8 * 20, "p99Seconds": 20 + 0.98 * 20,
    }  # fmt: skip
    assert intake["slaSeconds"] is None and intake["slaCompliance"] is None
    # review: a left after 60 s (met), b after 200 s (breached), c is there past its due time
    assert (review["entered"], review["left"], review["current"]) == (3, 2, 1)
    assert review["dwell"]["meanSeconds"] == 130 and review["dwell"]["p50Seconds"] == 130
    assert (review["slaSeconds"], review["slaMet"], review["slaBreached"]) == (100, 1, 2)
    assert abs(review["slaCompliance"] - 1 / 3) < 1e-9
    assert (done["entered"], done["left"], done["current"], done["dwell"]["count"]) == (2, 0, 0, 0)


async def test_a_from_to_window_counts_only_what_happened_in_it(api: Api) -> None:
    t0 = await _scenario(api)
    window = {"f": t0.isoformat(), "t": (t0 + timedelta(seconds=100)).isoformat()}
    got = (await api.ok(ANALYTICS, window))["workflow"]["analytics"]
    assert got["started"] == 2  # a and b
    assert got["cycleTime"]["count"] == 1 and got["cycleTime"]["p50Seconds"] == 70
    review = {s["state"]: s for s in got["states"]}["review"]
    assert (review["slaMet"], review["slaBreached"], review["left"]) == (1, 0, 1)


async def test_bad_windows_are_invalid_input_with_a_location(api: Api) -> None:
    await api.ok(DEPLOY, {"d": DESK})
    now = datetime.now(UTC)
    for variables, pointer in [
        ({"p": "a week"}, "/period"),
        ({"p": "7d", "t": now.isoformat()}, "/period"),
        ({"f": now.isoformat(), "t": (now - timedelta(hours=1)).isoformat()}, "/from"),
        ({"f": (now - timedelta(days=500)).isoformat()}, "/from"),
    ]:
        body = await api.gql(ANALYTICS, variables)
        error = body["errors"][0]
        assert error["extensions"]["code"] == "INVALID_INPUT", error
        assert error["extensions"]["pointer"] == pointer


async def test_analytics_are_hidden_from_a_key_with_no_role(api: Api) -> None:
    await api.ok(DEPLOY, {"d": DESK})
    _, token = await api.user()
    body = await api.gql(ANALYTICS, {"p": "7d"}, token=token)
    assert body["data"] is None or body["data"]["workflow"] is None
    assert "Review" not in str(body)
    anonymous = await api.gql(ANALYTICS, {"p": "7d"}, token=None)
    assert anonymous.get("errors") or anonymous["data"]["workflow"] is None

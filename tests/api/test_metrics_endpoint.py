"""`/metrics`: off by default, Prometheus text when enabled, counters move after actions."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from graph_stack import Api, loan, running_stack
from prometheus_client.parser import text_string_to_metric_families

from stateward.observe import metrics

DEPLOY = "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }"
START = "mutation Start($w: String!) { startInstance(workflow: $w) { id } }"
PERFORM = """mutation Submit($i: ID!) {
  performAction(instance: $i, action: "submit", input: {fields: {amount: 5}}) { duplicate } }"""


@pytest.fixture
async def metered(sqlite_db_url: str) -> AsyncIterator[Api]:
    async with running_stack(sqlite_db_url, metrics=True) as stack:
        yield stack
        metrics.enable(False)


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of an exposition, by (name, labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(all_samples: dict, name: str, **labels: str) -> float:
    return all_samples.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_are_not_served_unless_enabled(api: Api) -> None:
    response = await api.client.get("/metrics")
    assert response.status_code == 404


async def test_metrics_parse_and_their_counters_move_after_an_action(metered: Api) -> None:
    await metered.ok(DEPLOY, {"d": loan()})
    before = samples((await metered.client.get("/metrics")).text)
    instance = (await metered.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["id"]
    await metered.ok(PERFORM, {"i": instance})
    response = await metered.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    after = samples(response.text)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    act = "stateward_act_duration_seconds_count"
    assert moved(act, op="start", outcome="ok") == 1
    assert moved(act, op="business", outcome="ok") == 1
    graphql = "stateward_graphql_operation_duration_seconds_count"
    assert moved(graphql, type="mutation", operation="Start", outcome="ok") == 1
    assert moved(graphql, type="mutation", operation="Submit", outcome="ok") == 1
    assert moved("stateward_group_commit_batch_size_count") >= 1
    assert moved("stateward_outbox_lag_seconds_count", path="publish") >= 2
    assert ("stateward_subscribers", frozenset()) in after
    assert value(after, "stateward_db_pool_connections", state="checked_out") >= 0


async def test_a_refused_action_counts_under_its_error_code(metered: Api) -> None:
    await metered.ok(DEPLOY, {"d": loan()})
    instance = (await metered.ok(START, {"w": "acme/loans/loan"}))["startInstance"]["id"]
    refused = await metered.gql(
        'mutation Approve($i: ID!) { performAction(instance: $i, action: "approve") '
        "{ duplicate } }",
        {"i": instance},
    )
    code = refused["errors"][0]["extensions"]["code"]
    after = samples((await metered.client.get("/metrics")).text)
    assert value(after, "stateward_act_duration_seconds_count", op="business", outcome=code) >= 1
    assert (
        value(
            after,
            "stateward_graphql_operation_duration_seconds_count",
            type="mutation",
            operation="Approve",
            outcome=code,
        )
        >= 1
    )


async def test_every_response_carries_a_request_id(metered: Api) -> None:
    chosen = await metered.client.get("/healthz", headers={"X-Request-ID": "req-42"})
    assert chosen.headers["x-request-id"] == "req-42"
    unsafe = await metered.client.get("/healthz", headers={"X-Request-ID": "a b\tc"})
    assert unsafe.headers["x-request-id"] not in ("", "a b\tc")
    body = await metered.gql("{ nope }")
    assert body["errors"][0]["extensions"]["requestId"]

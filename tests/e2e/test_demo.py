"""`stateward serve --demo` from a fresh directory: it prints a token that works at once."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from harness import ServerProcess

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO_WORKFLOWS = {
    "case/review/kyc-review",
    "customer/retail/retail-customer",
    "intake/public/claim",
    "intake/public/contact-form",
    "support/desk/ticket",
    "procure/purchasing/purchase-approval",
    "finance/payments/payment",
    "intake/public/service-request",
    "people/onboarding/onboarding",
    "people/onboarding/onboarding-task",
}


def _token(output: str) -> str:
    found = re.search(r"demo token \(admin \S+\):\n\s+(sw_\S+)", output)
    assert found, output
    return found.group(1)


def _workflows(url: str, token: str) -> set[str]:
    response = httpx.post(
        url,
        json={"query": "{ workflows { edges { node { path version } } } }"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    body = response.json()
    assert "errors" not in body, body
    return {e["node"]["path"] for e in body["data"]["workflows"]["edges"]}


def test_demo_prints_a_token_that_lists_the_example_workflows(tmp_path: Path) -> None:
    env = {"STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"}
    server = ServerProcess("--demo", env=env, cwd=tmp_path).start()
    try:
        token = _token(server.output())
        assert _workflows(server.url, token) >= DEMO_WORKFLOWS
        assert f"curl -s {server.url}" in server.output()
    finally:
        assert server.stop() == 0
    assert (tmp_path / "demo-operator.json").exists()  # the genesis key, beside the DB

    again = ServerProcess("--demo", env=env, cwd=tmp_path).start()  # idempotent re-run
    try:
        examples = len(list((Path(__file__).parents[2] / "examples").rglob("*.json")))
        assert f"0 workflow(s) deployed, {examples} unchanged" in again.output()
        assert _workflows(again.url, _token(again.output())) >= DEMO_WORKFLOWS
    finally:
        again.stop()

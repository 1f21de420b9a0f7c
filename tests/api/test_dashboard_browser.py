"""The dashboard in a real browser: Debian's chromium driven by Playwright, on a real
`stateward serve --demo`. Sign in with the printed token, see an instance started by the
test appear live (within 2 s), claim an assignment through the page, see an SLA breach
highlighted; the screenshot is kept as a CI artifact (.ci/artifacts/dashboard.png).

Skips with a reason only when chromium is missing outside CI (`CI=true` never skips).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e.harness import ServerProcess

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("STATEWARD_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / ".ci" / "artifacts"
DEPLOY = "mutation($d: JSON!) { addWorkflow(definition: $d) { path } }"
HURRY = {
    "$version": "2.0",
    "$path": "ops/sla/hurry",
    "initial": "waiting",
    "states": {
        "waiting": {"label": "Waiting", "sla_seconds": 1},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {"finish": {"label": "Finish", "from": "waiting", "to": "done"}},
}
BROKEN = "def check(ctx):\n    fail('upstream down')\n"
STUCK = {
    "$version": "2.0",
    "$path": "ops/checks/claim",
    "initial": "intake",
    "states": {
        "intake": {"label": "Intake"},
        "checking": {"label": "Checking", "audience": "system", "hook": "checks:check"},
        "done": {"label": "Done", "terminal": True},
    },
    "actions": {
        "submit": {"label": "Submit", "from": "intake", "to": "checking"},
        "pass": {"label": "Pass", "from": "checking", "to": "done"},
    },
}
TICKET_FIELDS = {
    "subject": "Printer on fire",
    "description": "Smoke everywhere.",
    "priority": "normal",
    "customer_email": "grace@example.com",
}


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[ServerProcess, str]]:
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser test: {CHROMIUM} is missing")
        pytest.skip(f"chromium is not installed ({CHROMIUM})")
    env = {
        "STATEWARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}",
        "STATEWARD_BUS_URL": "memory://",
        "STATEWARD_OPERATOR_KEY_FILE": str(tmp_path / "operator.json"),
        "STATEWARD_SCAN_INTERVAL": "0.5",
    }
    proc = ServerProcess("--demo", env=env, cwd=tmp_path).start(timeout=120)
    lines = proc.output().splitlines()
    token = next(
        lines[i + 1].strip() for i, line in enumerate(lines) if line.startswith("demo token")
    )
    yield proc, token
    proc.stop()


def gql(url: str, token: str, query: str, variables: dict | None = None) -> dict:
    response = httpx.post(
        url,
        json={"query": query, "variables": variables or {}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    body = response.json()
    assert not body.get("errors"), body
    return body["data"]


def test_the_dashboard_shows_new_instances_live_and_claims_through_the_page(
    demo: tuple[ServerProcess, str],
) -> None:
    from playwright.sync_api import expect, sync_playwright

    server, token = demo
    base = server.url.removesuffix("/graphql")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1300})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            page.goto(f"{base}/dashboard")
            page.fill("#token", token)
            page.click("#sign-in")
            expect(page.locator("#status")).to_have_text("live", timeout=15000)
            expect(page.locator("#counts tr").first).to_be_visible(timeout=15000)

            started = time.monotonic()
            created = gql(
                server.url,
                token,
                'mutation { startInstance(workflow: "support/desk/ticket") { instanceId } }',
            )
            instance = created["startInstance"]["instanceId"]
            row = page.locator(f'#instances tr[data-instance="{instance}"]')
            expect(row).to_be_visible(timeout=2000)
            assert time.monotonic() - started < 2.0
            # The per-state counts are the server's GROUP BY, recounted after the event.
            state = gql(server.url, token, '{ instance(id: "' + instance + '") { state { key } } }')
            key = state["instance"]["state"]["key"]
            counted = gql(
                server.url,
                token,
                "{ instanceCounts(groupBy: [WORKFLOW, STATE], filter: {status: [ACTIVE, STALE,"
                " ERROR]}) { workflow state count } }",
            )["instanceCounts"]
            [expected] = [
                c["count"]
                for c in counted
                if c["workflow"] == "support/desk/ticket" and c["state"] == key
            ]
            cell = page.locator(
                f'#counts tr[data-workflow="support/desk/ticket"][data-state="{key}"] td.count'
            )
            expect(cell).to_have_text(str(expected), timeout=5000)

            gql(
                server.url,
                token,
                'mutation($i: ID!, $f: JSON) { performAction(instance: $i, action: "open",'
                " input: {fields: $f}) { duplicate } }",
                {"i": instance, "f": TICKET_FIELDS},
            )
            claim = page.locator(f'button[data-claim][data-instance="{instance}"]')
            expect(claim).to_be_visible(timeout=15000)
            assignment = claim.get_attribute("data-claim")
            claim.click()
            expect(page.locator("#claim-result")).to_contain_text("claimed", timeout=10000)
            mine = gql(
                server.url,
                token,
                "{ myAssignments(status: CLAIMED) { nodes { assignmentId instanceId } } }",
            )
            assert assignment in {n["assignmentId"] for n in mine["myAssignments"]["nodes"]}

            gql(server.url, token, DEPLOY, {"d": HURRY})
            late = gql(
                server.url,
                token,
                'mutation { startInstance(workflow: "ops/sla/hurry") { instanceId } }',
            )["startInstance"]["instanceId"]
            breach = page.locator(f'#sla li.sla-breached[data-sla="{late}"]')
            expect(breach).to_be_visible(timeout=15000)
            expect(
                page.locator(f'#instances tr.sla-breached[data-instance="{late}"]')
            ).to_be_visible()

            # An instance stopped by a failing hook shows as an open incident, live; the
            # Retry button runs it again (still broken: one more attempt).
            gql(server.url, token,
                'mutation($s: String!) { addModule(namespace: "ops/checks", name: "checks",'
                " source: $s) { seq } }", {"s": BROKEN})  # fmt: skip
            gql(server.url, token, DEPLOY, {"d": STUCK})
            stuck = gql(
                server.url,
                token,
                'mutation { startInstance(workflow: "ops/checks/claim") { instanceId } }',
            )["startInstance"]["instanceId"]
            gql(server.url, token,
                'mutation($i: ID!) { performAction(instance: $i, action: "submit") { duplicate } }',
                {"i": stuck})  # fmt: skip
            incident = page.locator(f'#incidents li[data-instance="{stuck}"]')
            expect(incident).to_be_visible(timeout=15000)
            expect(incident.locator(".attempts")).to_have_text("attempts 1")
            incident.locator("button[data-retry]").click()
            expect(page.locator("#incident-result")).to_contain_text("retried", timeout=15000)
            # the re-run happens after the answer; its failure (workflow.error) updates the list
            expect(incident.locator(".attempts")).to_have_text("attempts 2", timeout=15000)

            row.click()
            expect(page.locator("#graph g.node.current")).to_have_count(1, timeout=5000)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()

"""Shared fixtures for governance tests: real keys and a well-formed envelope."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from stateward.governance.keys import KeyPair, generate_keypair

NOW = datetime(2026, 11, 30, 2, 21, 9, 123000, tzinfo=UTC)
NET = "net-test-1"


@pytest.fixture
def alice() -> KeyPair:
    return generate_keypair()


@pytest.fixture
def server() -> KeyPair:
    return generate_keypair()


@pytest.fixture
def envelope_json(alice: KeyPair) -> dict[str, Any]:
    return {
        "v": 1,
        "net": NET,
        "process": "0b7f4c1e-6a53-4b8e-9a57-3f1f8c0f2b11",
        "action": {"name": "approve", "workflow": "customer/retail/loan", "input": {"amount": 10}},
        "actor": alice.public,
        "ts": "2026-11-30T02:21:09.123Z",
        "nonce": "AAECAwQFBgcICQoLDA0ODw",
    }

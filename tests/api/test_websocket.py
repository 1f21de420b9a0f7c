"""The /graphql websocket: subprotocol, Origin policy, connection_init auth, operation cap."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from api_app import make_app
from starlette.applications import Starlette
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

PROTOCOL = ["graphql-transport-ws"]


@pytest.fixture
def ws_app() -> Starlette:
    return make_app(max_subscriptions=3, allowed_origins=("https://dash.example.com",))


@pytest.fixture
def tc(ws_app: Starlette) -> Iterator[TestClient]:
    with TestClient(ws_app) as client:
        yield client


def _init(ws: Any, payload: dict | None = None) -> dict:
    message: dict[str, Any] = {"type": "connection_init"}
    if payload is not None:
        message["payload"] = payload
    ws.send_json(message)
    return ws.receive_json()


def _subscribe(ws: Any, op_id: str, query: str) -> None:
    ws.send_json({"id": op_id, "type": "subscribe", "payload": {"query": query}})


def test_a_subscription_streams_over_graphql_transport_ws(tc: TestClient):
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL) as ws:
        assert ws.accepted_subprotocol == "graphql-transport-ws"
        assert _init(ws) == {"type": "connection_ack"}
        _subscribe(ws, "1", "subscription { ticks(count: 3) }")
        frames = [ws.receive_json() for _ in range(4)]
    assert [f["payload"]["data"]["ticks"] for f in frames[:3]] == [0, 1, 2]
    assert frames[3] == {"id": "1", "type": "complete"}


def test_the_legacy_graphql_ws_subprotocol_is_not_spoken(tc: TestClient):
    with tc.websocket_connect("/graphql", subprotocols=["graphql-ws"]) as ws:
        assert ws.accepted_subprotocol is None
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 4406
    assert closed.value.reason == "Subprotocol not acceptable"


def test_a_foreign_origin_is_refused_with_a_reason(tc: TestClient):
    headers = {"Origin": "https://evil.example"}
    with (
        pytest.raises(WebSocketDenialResponse) as denied,
        tc.websocket_connect("/graphql", subprotocols=PROTOCOL, headers=headers),
    ):
        pass  # pragma: no cover
    assert denied.value.status_code == 403
    error = denied.value.json()["errors"][0]
    assert error["extensions"]["code"] == "FORBIDDEN_ORIGIN"
    assert "https://evil.example" in error["message"]


@pytest.mark.parametrize("origin", ["https://dash.example.com", "http://testserver", None], ids=str)
def test_allowed_same_and_absent_origins_are_accepted(tc: TestClient, origin: str | None):
    headers = {"Origin": origin} if origin else {}
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL, headers=headers) as ws:
        assert _init(ws) == {"type": "connection_ack"}


@pytest.mark.parametrize(
    "payload",
    [
        {"authorization": "Bearer good-token"},
        {"Authorization": "Bearer good-token"},
        {"AUTHORIZATION": "bearer good-token"},
        {"headers": {"Authorization": "Bearer good-token"}},
        {"headers": {"authorization": "Bearer good-token"}},
    ],
    ids=["lower", "title", "upper", "nested-title", "nested-lower"],
)
def test_connection_init_authenticates_the_socket(tc: TestClient, payload: dict):
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL) as ws:
        ack = _init(ws, payload)
        assert ack == {"type": "connection_ack", "payload": {"authenticated": True}}
        _subscribe(ws, "1", "subscription { whoami }")
        assert ws.receive_json()["payload"]["data"] == {"whoami": "alice"}


def test_the_handshake_authorization_header_also_authenticates(tc: TestClient):
    headers = {"Authorization": "Bearer good-token"}
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL, headers=headers) as ws:
        _init(ws)
        _subscribe(ws, "1", "subscription { whoami }")
        assert ws.receive_json()["payload"]["data"] == {"whoami": "alice"}


def test_a_socket_without_a_token_is_anonymous(tc: TestClient):
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL) as ws:
        _init(ws, {})
        _subscribe(ws, "1", "subscription { whoami }")
        assert ws.receive_json()["payload"]["data"] == {"whoami": "anonymous"}


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"authorization": "Bearer stolen"}, "UNAUTHENTICATED: invalid or expired token"),
        ({"authorization": "Token abc"}, "UNAUTHENTICATED: Authorization must be 'Bearer <token>'"),
        ({"authorization": 42}, "UNAUTHENTICATED: Authorization must be 'Bearer <token>'"),
    ],
    ids=["refused", "wrong-scheme", "not-a-string"],
)
def test_a_bad_token_closes_the_socket_with_a_clear_reason(
    tc: TestClient, payload: dict, reason: str
):
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL) as ws:
        ws.send_json({"type": "connection_init", "payload": payload})
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 4403
    assert closed.value.reason == reason


def test_operations_beyond_the_per_socket_cap_get_a_coded_error(tc: TestClient):
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL) as ws:
        _init(ws)
        for op in ("1", "2", "3"):
            _subscribe(ws, op, "subscription { forever }")
            assert ws.receive_json()["type"] == "next"
        _subscribe(ws, "4", "subscription { forever }")
        refused = ws.receive_json()
        assert refused["id"] == "4" and refused["type"] == "error"
        assert refused["payload"][0]["extensions"]["code"] == "TOO_MANY_SUBSCRIPTIONS"
        assert "at most 3" in refused["payload"][0]["message"]
        ws.send_json({"id": "1", "type": "complete"})
        _subscribe(ws, "5", "subscription { forever }")
        assert ws.receive_json() == {"id": "5", "type": "next", "payload": {"data": {"forever": 0}}}


def test_a_websocket_message_over_the_size_limit_closes_the_socket():
    with (
        TestClient(make_app(max_body_bytes=2048)) as client,
        client.websocket_connect("/graphql", subprotocols=PROTOCOL) as ws,
    ):
        _init(ws)
        _subscribe(ws, "1", "subscription { ticks(count: 1) }" + " " * 4096)
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert closed.value.code == 1009
    assert closed.value.reason.startswith("PAYLOAD_TOO_LARGE")


def test_domain_errors_in_subscriptions_carry_codes(tc: TestClient):
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL) as ws:
        _init(ws)
        _subscribe(ws, "1", "subscription { denied }")
        frame = ws.receive_json()
    assert frame["type"] == "next"
    assert frame["payload"]["errors"][0]["extensions"] == {"code": "FORBIDDEN"}
    assert frame["payload"]["errors"][0]["message"] == "not for you"


def test_a_stream_failing_after_it_started_is_internal_error_not_a_validation_error(
    tc: TestClient,
):
    """Strawberry wraps an exception of a running stream in a GraphQL error without path or
    location; it is the server's failure (masked INTERNAL_ERROR), never the client's
    GRAPHQL_VALIDATION_FAILED (issue 11: streams around bus faults ended with that code)."""
    with tc.websocket_connect("/graphql", subprotocols=PROTOCOL) as ws:
        assert _init(ws) == {"type": "connection_ack"}
        _subscribe(ws, "1", "subscription { broken }")
        frames = [ws.receive_json() for _ in range(3)]
    assert frames[0]["payload"] == {"data": {"broken": 0}}
    error = frames[1]["payload"]["errors"][0]
    assert error["extensions"]["code"] == "INTERNAL_ERROR"
    assert "secret" not in error["message"]
    assert frames[2] == {"id": "1", "type": "complete"}

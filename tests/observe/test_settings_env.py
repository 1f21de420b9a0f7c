"""The observability and port settings come from the environment (flags win)."""

from __future__ import annotations

from stateward.settings import Settings


def test_port_host_metrics_and_dashboard_come_from_stateward_variables() -> None:
    s = Settings.from_env(
        {
            "STATEWARD_PORT": "8001",
            "STATEWARD_HOST": "0.0.0.0",
            "STATEWARD_METRICS": "1",
            "STATEWARD_METRICS_PORT": "9100",
            "STATEWARD_DASHBOARD": "yes",
        }
    )
    assert (s.port, s.host, s.metrics, s.metrics_port, s.dashboard) == (
        8001,
        "0.0.0.0",
        True,
        9100,
        True,
    )


def test_defaults_and_flags_over_the_environment() -> None:
    s = Settings.from_env({})
    assert (s.port, s.metrics, s.metrics_port, s.dashboard) == (8000, False, None, False)
    assert Settings.from_env({"STATEWARD_PORT": "8001"}, port=9000).port == 9000

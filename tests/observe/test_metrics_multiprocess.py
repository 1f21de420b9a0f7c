"""Several worker processes write one metrics directory; the exposition merges them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.parser import text_string_to_metric_families

WORKER = """
from stateward.observe import metrics
metrics.enable()
metrics.record_act("start", "ok", 0.01)
metrics.record_act("start", "ok", 0.02)
metrics.SUBSCRIBERS.set(3)
"""


def test_values_of_several_processes_add_up(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", WORKER], env=env, check=True, timeout=60)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    count = found[("stateward_act_duration_seconds_count", (("op", "start"), ("outcome", "ok")))]
    assert count == 4
    # livesum gauges of exited processes are dropped by mark_process_dead; both still count
    assert sum(v for (name, _), v in found.items() if name == "stateward_subscribers") == 6

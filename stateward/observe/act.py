"""`observed_act`: the metric and the span around one call of `act`.

`stateward_act_duration_seconds{op, outcome}` counts and times every signed event by
kernel operation (`start`, `advance`, `claim`, ..., `business`, `governance`, `unknown`)
and outcome (`ok`, `duplicate`, or the refusal's error code); the `act` span is the
parent of `act.verify`, `act.engine`, `act.commit` and `act.publish`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from stateward.observe import metrics, tracing


class ActObservation:
    """What the block learned: `done(result)` marks a success (or a duplicate)."""

    outcome = "error"

    def done(self, result: Any) -> Any:
        """Record `result`'s outcome and hand it back."""
        self.outcome = "duplicate" if getattr(result, "duplicate", False) else "ok"
        return result


@contextmanager
def observed_act(op: str) -> Iterator[ActObservation]:
    """Time the block as one `act` of kernel operation `op` (see the module docstring)."""
    seen = ActObservation()
    started = time.perf_counter()
    with tracing.span("act", attributes={"stateward.op": op}) as current:
        try:
            yield seen
        except BaseException as error:
            seen.outcome = str(getattr(error, "code", None) or type(error).__name__)
            raise
        finally:
            metrics.record_act(op, seen.outcome, time.perf_counter() - started)
            if tracing.recording(current):
                current.set_attribute("stateward.outcome", seen.outcome)

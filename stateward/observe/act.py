"""`observed_act`: the metric and the span around one call of `act`.

`stateward_act_duration_seconds{op, outcome}` counts and times every signed event by
kernel operation (`start`, `advance`, `claim`, ..., `business`, `governance`, `unknown`)
and outcome (`ok`, `duplicate`, or the refusal's error code); the `act` span is the
parent of `act.verify`, `act.engine`, `act.commit` and `act.publish`.
"""

from __future__ import annotations

import asyncio
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
        self.outcome = result_outcome(result)
        return result


def result_outcome(result: Any) -> str:
    """The outcome label of an answered act: `duplicate` or `ok`."""
    return "duplicate" if getattr(result, "duplicate", False) else "ok"


def error_outcome(error: BaseException) -> str:
    """The outcome label of a refused or failed act: its error code, else its type."""
    return str(getattr(error, "code", None) or type(error).__name__)


@contextmanager
def observed_act(op: str) -> Iterator[ActObservation]:
    """Time the block as one `act` of kernel operation `op` (see the module docstring)."""
    seen = ActObservation()
    started = time.perf_counter()
    with tracing.span("act", attributes={"stateward.op": op}) as current:
        try:
            yield seen
        except BaseException as error:
            seen.outcome = error_outcome(error)
            raise
        finally:
            metrics.record_act(op, seen.outcome, time.perf_counter() - started)
            if tracing.recording(current):
                current.set_attribute("stateward.outcome", seen.outcome)


def record_answer(op: str, started: float, answer: asyncio.Future[Any]) -> None:
    """`observed_act`'s metric (no span) for an act of `op` begun at `started`
    (`time.perf_counter`) and answered through `answer`: a done-callback."""
    if answer.cancelled():
        outcome = "CancelledError"
    elif (error := answer.exception()) is not None:
        outcome = error_outcome(error)
    else:
        outcome = result_outcome(answer.result())
    metrics.record_act(op, outcome, time.perf_counter() - started)

"""Liveness (`/healthz`) and readiness (`/readyz`) probes.

Liveness says the process serves requests at all. Readiness says this node should get
traffic: the lifespan has finished starting (and is not stopping) and `services.ready()`
(e.g. a database ping), when the services object has one, answered truthily in time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

READY_TIMEOUT = 2.0


async def healthz(request: Request) -> JSONResponse:
    """200 `{"status": "ok"}` whenever the process can answer."""
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    """200 `{"status": "ready"}` when started and `services.ready()` agrees, else 503."""
    state = request.app.state
    lifecycle = getattr(state, "lifecycle", "starting")
    if lifecycle != "ready":
        return JSONResponse({"status": lifecycle}, status_code=503)
    probe = getattr(state.services, "ready", None)
    if probe is None:
        return JSONResponse({"status": "ready"})
    try:
        outcome = await asyncio.wait_for(probe(), timeout=READY_TIMEOUT)
    except TimeoutError:
        return JSONResponse({"status": "unavailable", "error": "readiness timeout"}, 503)
    except Exception as exc:
        return JSONResponse({"status": "unavailable", "error": type(exc).__name__}, 503)
    return _verdict(outcome)


def _verdict(outcome: Any) -> JSONResponse:
    if isinstance(outcome, Mapping):
        checks = {str(k): bool(v) for k, v in outcome.items()}
        ok = all(checks.values())
        body = {"status": "ready" if ok else "unavailable", "checks": checks}
        return JSONResponse(body, status_code=200 if ok else 503)
    if outcome is None or outcome:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "unavailable"}, status_code=503)

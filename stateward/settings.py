"""One settings object, read from the environment (STATEWARD_*) and CLI flags."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./stateward.db"


@dataclass(frozen=True)
class Settings:
    """Everything configurable about a stateward node. Build with `from_env`."""

    database_url: str = DEFAULT_DATABASE_URL
    bus_url: str = "memory://"
    mode: str = "development"
    node_key_file: str | None = None
    scan_interval: float = 5.0
    checkpoint_interval: float = 10.0
    stale_after: float = 30 * 24 * 3600.0
    hook_timeout_ms: int = 1000
    public_rate_limit: int = 60
    #: Failed callback-token lookups (`completeDelegatedTask`) per client IP per minute;
    #: a client that used them up is refused before the lookup until its bucket refills.
    callback_failure_limit: int = 20
    allowed_origins: tuple[str, ...] = ()
    trusted_proxies: tuple[str, ...] = ()
    max_body_bytes: int = 1024 * 1024
    token_ttl: float = 30 * 24 * 3600.0
    #: Lifetime of the callback token posted to a delegated stage's surface webhook (it
    #: also ends when the stage is left, and when a worker locks the task).
    delegation_token_ttl: float = 7 * 24 * 3600.0
    host: str = "127.0.0.1"
    port: int = 8000
    debug: bool = False
    #: Serve `/metrics` (STATEWARD_METRICS=1); `metrics_port` serves them on their own port.
    metrics: bool = False
    metrics_port: int | None = None
    #: Serve the operations dashboard at `/dashboard` in production too (STATEWARD_DASHBOARD=1).
    dashboard: bool = False
    #: PostgreSQL: longest lock wait, and longest idle time inside a writing transaction.
    lock_timeout_ms: int = 1000
    #: Seconds a node may take to drain after SIGTERM before it exits anyway.
    shutdown_grace: float = 10.0
    #: SQLite `PRAGMA synchronous` (STATEWARD_SQLITE_SYNCHRONOUS): `normal` (an OS crash or
    #: power loss may lose the last commits, never corrupt) or `full` (every acknowledged
    #: event survives power loss; group commit spreads one fsync over a batch).
    sqlite_synchronous: str = "normal"
    #: Offer permessage-deflate on websockets (STATEWARD_WS_DEFLATE=1); off by default: a
    #: deflate per subscriber per event cost more CPU than the frames of events save.
    ws_deflate: bool = False
    #: One span per SQL statement while tracing (STATEWARD_TRACE_SQL=1); off by default:
    #: they were 18 of a `performAction`'s 28 spans (issue 17).
    trace_sql: bool = False
    #: Worker processes of `stateward serve` sharing one listening socket (STATEWARD_WORKERS);
    #: more than one needs PostgreSQL (each worker is a node on the same database).
    workers: int = 1
    #: CPUs the server's event loop and its database threads run on
    #: (STATEWARD_SERVER_CPUS, a Linux CPU list such as `1` or `2-3`; empty: wherever the
    #: OS puts them). The signature worker runs on the others (`commands/affinity.py`).
    server_cpus: tuple[int, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def production(self) -> bool:
        """True in production mode (introspection and GraphiQL off, errors masked)."""
        return self.mode == "production"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from STATEWARD_* variables; non-None keyword overrides win (CLI flags)."""
        e = os.environ if env is None else env
        s = cls(
            database_url=e.get("STATEWARD_DATABASE_URL", DEFAULT_DATABASE_URL),
            bus_url=e.get("STATEWARD_BUS_URL", "memory://"),
            mode=e.get("STATEWARD_MODE", "development"),
            node_key_file=e.get("STATEWARD_NODE_KEY_FILE") or None,
            scan_interval=float(e.get("STATEWARD_SCAN_INTERVAL", "5")),
            checkpoint_interval=float(e.get("STATEWARD_CHECKPOINT_INTERVAL", "10")),
            stale_after=float(e.get("STATEWARD_STALE_AFTER", str(30 * 24 * 3600))),
            hook_timeout_ms=int(e.get("STATEWARD_HOOK_TIMEOUT_MS", "1000")),
            public_rate_limit=int(e.get("STATEWARD_PUBLIC_RATE_LIMIT", "60")),
            callback_failure_limit=int(e.get("STATEWARD_CALLBACK_FAILURE_LIMIT", "20")),
            allowed_origins=tuple(
                o.strip() for o in e.get("STATEWARD_ALLOWED_ORIGINS", "").split(",") if o.strip()
            ),
            trusted_proxies=_trusted_proxies(e.get("STATEWARD_TRUSTED_PROXIES", "")),
            max_body_bytes=int(e.get("STATEWARD_MAX_BODY_BYTES", str(1024 * 1024))),
            token_ttl=_positive("STATEWARD_TOKEN_TTL", e.get("STATEWARD_TOKEN_TTL", "2592000")),
            delegation_token_ttl=_positive(
                "STATEWARD_DELEGATION_TOKEN_TTL",
                e.get("STATEWARD_DELEGATION_TOKEN_TTL", "604800"),
            ),
            debug=e.get("STATEWARD_DEBUG", "") in ("1", "true", "yes"),
            host=e.get("STATEWARD_HOST") or cls.host,
            port=int(e.get("STATEWARD_PORT") or cls.port),
            metrics=_flag(e.get("STATEWARD_METRICS", "")),
            metrics_port=int(e["STATEWARD_METRICS_PORT"])
            if e.get("STATEWARD_METRICS_PORT")
            else None,
            dashboard=_flag(e.get("STATEWARD_DASHBOARD", "")),
            lock_timeout_ms=int(e.get("STATEWARD_LOCK_TIMEOUT_MS", "1000")),
            shutdown_grace=float(e.get("STATEWARD_SHUTDOWN_GRACE", "10")),
            sqlite_synchronous=sqlite_synchronous(e.get("STATEWARD_SQLITE_SYNCHRONOUS", "")),
            ws_deflate=_flag(e.get("STATEWARD_WS_DEFLATE", "")),
            trace_sql=_flag(e.get("STATEWARD_TRACE_SQL", "")),
            workers=int(e.get("STATEWARD_WORKERS") or 1),
            server_cpus=cpu_list("STATEWARD_SERVER_CPUS", e.get("STATEWARD_SERVER_CPUS", "")),
        )
        return s.with_overrides(**overrides)

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with every non-None override applied."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


SQLITE_SYNCHRONOUS = ("normal", "full")


def sqlite_synchronous(value: str) -> str:
    """STATEWARD_SQLITE_SYNCHRONOUS: `normal` (the default, also when empty) or `full`;
    ValueError naming the variable otherwise."""
    mode = value.strip().lower() or "normal"
    if mode not in SQLITE_SYNCHRONOUS:
        raise ValueError(f"STATEWARD_SQLITE_SYNCHRONOUS: {value!r} is not one of normal, full")
    return mode


_CPU_ITEM = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?")
#: The highest CPU number a CPU list may name (a bound on what `2-99999999` would build).
MAX_CPU = 4095


def cpu_list(name: str, value: str) -> tuple[int, ...]:
    """A Linux CPU list (`0`, `1,3`, `2-5`, `0,2-3`; spaces ignored) from variable `name`
    as sorted CPU numbers, () when empty; ValueError naming the variable otherwise."""
    text = value.replace(" ", "")
    if not text:
        return ()
    cpus: set[int] = set()
    for item in text.split(","):
        found = _CPU_ITEM.fullmatch(item)
        if found is None:
            raise ValueError(f"{name}: {value!r} is not a CPU list such as 1 or 0,2-3")
        first = int(found[1])
        last = int(found[2]) if found[2] is not None else first
        if first > last or last > MAX_CPU:
            raise ValueError(f"{name}: {item!r} is not a range of CPUs 0..{MAX_CPU}")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def _flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def _positive(name: str, value: str) -> float:
    """A positive number of seconds from variable `name` (ValueError naming it otherwise)."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0 or number == float("inf"):
        raise ValueError(f"{name}: {value!r} is not a positive number of seconds")
    return number


def _trusted_proxies(value: str) -> tuple[str, ...]:
    """The comma list of STATEWARD_TRUSTED_PROXIES (IPs or CIDRs); ValueError naming the
    variable for an entry that is neither, so a typo never silently trusts nothing."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError as error:
            raise ValueError(
                f"STATEWARD_TRUSTED_PROXIES: {item!r} is not an IP address or CIDR"
            ) from error
        out.append(item)
    return tuple(out)

"""The sequencer step and COMMIT in one round trip (PostgreSQL; issue 11).

Before, the step was five awaited round trips with the global sequencer lock held from
the first to the last (lock, outbox INSERT, log head UPDATE, log nodes INSERT, COMMIT).
Between them the node's event loop ran whatever else was ready, so a CPU-starved or
paused node held the lock that every writer of every node waits for.

Here everything the step needs is computed by the client BEFORE the lock, and sent as one
multi-statement simple query that ends in COMMIT:

    SAVEPOINT sw_seq;
    SELECT pg_advisory_xact_lock(K);
    WITH u AS (UPDATE log_head SET size=…, frontier=… WHERE id=1 AND size=… AND
               frontier=… RETURNING 1) SELECT 1 / count(*) FROM u;   -- the guess held?
    INSERT INTO log_nodes … FROM jsonb_populate_recordset(…);
    INSERT INTO outbox (…) SELECT … FROM jsonb_populate_recordset(…) ORDER BY ord;
    RELEASE SAVEPOINT sw_seq;
    COMMIT

so the lock is held for server time only: taken and released (by COMMIT) inside one
request. The Merkle nodes are computed from this process's last known head (`log._HEADS`,
the same guess the multi-statement path used). When another writer moved the head, the
guarded UPDATE matches no row, `1 / 0` aborts the rest (SQLSTATE 22012), the client rolls
back to the savepoint (the event rows stay), takes the lock, reads the head, and sends the
rest with COMMIT in one more request: on a miss the lock spans one client round trip
(the head read), not five.

Outbox ids (the subscription cursors) come from the table's sequence inside the locked
step, so they still follow commit order; the INSERT takes them in staging order
(`ORDER BY ord`), and since every outbox insert on PostgreSQL happens under the lock, one
INSERT's ids are consecutive: after COMMIT `currval` (session-local) gives the last one.
Values travel as one JSON literal per table (`'…'` with quotes doubled; the server runs
with `standard_conforming_strings`, the default since 9.1 and checked here), never as SQL
built from data.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from stateward.persistence.db import dumps_json
from stateward.persistence.log import _HEADS, PENDING, NodeRow, _grow
from stateward.persistence.sequencer import LOCKED_INFO, SEQUENCER_LOCK_KEY
from stateward.records import StoredEvent

if TYPE_CHECKING:
    from stateward.persistence.uow import UnitOfWork

#: SQLSTATE of `1 / 0`: the guarded head UPDATE found another head (a guess miss).
HEAD_MOVED = "22012"
_OUTBOX_COLUMNS = ("type", "namespace", "workflow", "instance_id", "team", "payload", "created_at")
#: Round trips of the one-trip step that missed the head guess (tests and metrics).
stats = {"steps": 0, "misses": 0}


def _literal(value: str) -> str:
    """A standard-conforming SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _ts(value: datetime) -> str:
    return value.isoformat()


def _jsonb(rows: list[dict[str, Any]]) -> str:
    """`rows` as one jsonb literal (the column's own serialiser: orjson when present)."""
    return _literal(dumps_json(rows)) + "::jsonb"


def _outbox_sql(messages: list[dict[str, Any]]) -> str:
    rows = [
        {**{c: m[c] for c in _OUTBOX_COLUMNS}, "created_at": _ts(m["created_at"])} for m in messages
    ]
    cols = ", ".join(_OUTBOX_COLUMNS)
    picked = ", ".join(f"r.{c}" for c in _OUTBOX_COLUMNS)
    return (
        f"INSERT INTO outbox ({cols}) SELECT {picked} FROM "
        f"jsonb_populate_recordset(NULL::outbox, {_jsonb(rows)}) WITH ORDINALITY AS r "
        "ORDER BY r.ordinality"
    )


def _nodes_sql(nodes: list[NodeRow]) -> str:
    # bytea from JSON text: its hex input form `\\x…`
    rows = [
        {"level": lv, "idx": ix, "hash": "\\x" + h.hex(), "event_id": ev} for lv, ix, h, ev in nodes
    ]
    return (
        "INSERT INTO log_nodes (level, idx, hash, event_id) SELECT r.level, r.idx, r.hash, "
        f"r.event_id FROM jsonb_populate_recordset(NULL::log_nodes, {_jsonb(rows)}) AS r"
    )


def _head_sql(new_size: int, new_frontier: str, guard: tuple[int, str] | None) -> str:
    update = f"UPDATE log_head SET size = {int(new_size)}, frontier = {_literal(new_frontier)}"
    if guard is None:
        return update + " WHERE id = 1"
    size, frontier = guard
    return (
        f"WITH u AS ({update} WHERE id = 1 AND size = {int(size)} AND frontier = "
        f"{_literal(frontier)} RETURNING 1) SELECT 1 / count(*) FROM u"
    )


async def sequence_and_commit_pg(uow: UnitOfWork) -> None:
    """The sequencer step and COMMIT of `uow` in one request (see the module docstring)."""
    session = uow.session
    messages = [m.params for m in uow.sequencer.messages]
    pending: list[StoredEvent] = session.info.pop(PENDING, None) or []
    if not messages and not pending:
        await session.commit()
        return
    await session.flush()
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    driver: Any = raw.driver_connection
    if driver.get_settings().standard_conforming_strings != "on":  # pragma: no cover
        raise RuntimeError("stateward needs standard_conforming_strings = on")
    engine = session.get_bind()
    lock = f"SELECT pg_advisory_xact_lock({int(SEQUENCER_LOCK_KEY)})"
    tail = [_outbox_sql(messages)] if messages else []
    tail.append("COMMIT")
    stats["steps"] += 1
    grown: tuple[int, str] | None = None
    guess = _HEADS.get(engine) if pending else None
    if not pending:
        await driver.execute(";\n".join([lock, *tail]))
    elif guess is not None:
        size, frontier = guess
        new_size, new_frontier, rows = _grow(size, frontier, pending)
        step = [
            "SAVEPOINT sw_seq",
            lock,
            _head_sql(new_size, new_frontier, guess),
            _nodes_sql(rows),
            "RELEASE SAVEPOINT sw_seq",
            *tail,
        ]
        try:
            await driver.execute(";\n".join(step))
            grown = (new_size, new_frontier)
        except Exception as error:
            if getattr(error, "sqlstate", None) != HEAD_MOVED:
                raise
            stats["misses"] += 1
            await driver.execute("ROLLBACK TO SAVEPOINT sw_seq")
    if pending and grown is None:
        # no guess, or it missed: lock, read the head (one round trip under the lock),
        # then the rest and COMMIT in one request
        await driver.execute(lock)
        head = await driver.fetchrow("SELECT size, frontier FROM log_head WHERE id = 1")
        new_size, new_frontier, rows = _grow(int(head["size"]), head["frontier"], pending)
        await driver.execute(
            ";\n".join([_head_sql(new_size, new_frontier, None), _nodes_sql(rows), *tail])
        )
        grown = (new_size, new_frontier)
    if grown is not None:
        _HEADS[engine] = grown
    session.info.pop(LOCKED_INFO, None)
    if messages:
        last = int(await driver.fetchval("SELECT currval(pg_get_serial_sequence('outbox', 'id'))"))
        first = last - len(messages) + 1
        for offset, staged in enumerate(uow.sequencer.messages):
            staged.assign(first + offset)
    uow.sequencer.locked += 1
    # SQLAlchemy still thinks the transaction is open: its COMMIT finds none (a no-op
    # with a server WARNING) and closes the session's transaction state cleanly.
    await session.commit()

"""`log restore`: rebuild an empty database from an exported log, by replay.

Every signed event of the export goes, in log-index order, through the one write path
(`act_verified`: the same reads, engine, rows and outbox as when it first happened),
after its signature is checked (signer = actor or a node key the log trusts; the ±300 s
freshness window does not apply to history). The clock reads each event's own `ts`.
A spawned child's `$start` is written by its parent's event, as it was originally, but
with the exported envelope instead of a newly signed one (`Runtime.restoring`), so the
rebuilt log is the same log: same chain hashes, same leaves, same Merkle root. Kept
checkpoints are copied. Any event that does not come out identical stops the restore,
naming its log index. Works on SQLite and PostgreSQL alike: this is the backup and the
migration path between them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from stateward.domain.canonical import loads_strict
from stateward.domain.errors import CONFLICT, INVALID_INPUT, DomainError
from stateward.domain.logformat import checkpoint_bytes
from stateward.governance.checkpoint import verify_checkpoint
from stateward.governance.envelope import Envelope, SignedEnvelope, parse_ts
from stateward.governance.node_trust import NodeTrust, node_change
from stateward.governance.verification import verify_envelope
from stateward.persistence import create_engine, init_schema
from stateward.records import CheckpointRecord
from stateward.runtime.core.act import act_verified
from stateward.runtime.core.clock import ManualClock
from stateward.runtime.core.services import LEGACY_NODES_KEY, NET_KEY, Runtime
from stateward.runtime.insight.logfile import LogFile
from stateward.settings import Settings


@dataclass(frozen=True)
class RestoreReport:
    """What a restore rebuilt."""

    events: int
    checkpoints: int
    size: int
    root: str


def _signed(line: str, signer: str, signature: str) -> SignedEnvelope:
    return SignedEnvelope(Envelope.from_json(loads_strict(line)), signer, signature)


async def _prepare(settings: Settings, log: LogFile) -> None:
    """Migrate the target, refuse a database that already has events, fix `net`."""
    engine = create_engine(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous)
    try:
        await init_schema(engine)
        from stateward.persistence import UnitOfWorkFactory

        async with UnitOfWorkFactory.from_engine(engine)() as uow:
            size, _root = await uow.log.head()
            if size or await uow.processes.all_ids():
                raise DomainError(CONFLICT, "restore needs an empty database; this one has events")
            net = await uow.meta.get(NET_KEY)
            if net is not None and net != log.net:
                raise DomainError(CONFLICT, f"the database belongs to deployment {net}")
            await uow.meta.set(NET_KEY, log.net)
            if log.legacy_nodes:
                await uow.meta.set(LEGACY_NODES_KEY, json.dumps(sorted(log.legacy_nodes)))
            await uow.commit()
    finally:
        await engine.dispose()


async def restore(settings: Settings, log: LogFile) -> RestoreReport:
    """Rebuild the (empty) database of `settings` from `log` (see the module docstring)."""
    await _prepare(settings, log)
    clock = ManualClock(datetime.now().astimezone())
    runtime = await Runtime.open(settings, clock=clock, register_node=False)
    runtime.group_commit = False
    runtime.replaying = True
    try:
        children = {}
        for event in log.events:
            if event.action == "$start" and '"parent"' in event.envelope:
                children[event.process] = _signed(event.envelope, event.signer, event.signature)
        runtime.restoring = dict(children)
        done: set[str] = set()
        trust = NodeTrust(legacy=log.legacy_nodes)
        for event in log.events:
            key = f"{event.process}/{event.seq}"
            if (
                event.seq == 1
                and event.process in children
                and event.process not in runtime.restoring
            ):
                if event.process not in done:
                    raise _diverged(event.index, "spawned child was not recreated by its parent")
                continue  # written by its parent's event, with this very envelope
            signed = _signed(event.envelope, event.signer, event.signature)
            trusted = trust.signers_for(event.process, event.seq, event.signer)
            verify_envelope(signed, net=log.net, now=None, trusted_signers=trusted)
            now = signed.envelope.timestamp
            clock.set(now)
            result = await act_verified(
                runtime, signed, signed.envelope.identity(), now, attested=False
            )
            if result.duplicate or result.event.hash != event.hash:
                raise _diverged(event.index, f"event {key} came out different")
            done.update(c.id for c in result.children)
            action = signed.envelope.action
            change = node_change(event.process, action.name, action.input)
            if change is not None:  # the write path checked the admin
                trust.apply(*change)
        copied = 0
        async with runtime.uow() as uow:
            for cp in log.checkpoints:
                verify_checkpoint(cp, net=log.net, trusted=frozenset(trust.ever))
                await uow.log.add_checkpoint(
                    CheckpointRecord(
                        id=None, size=cp.size, root=cp.root, ts=parse_ts(cp.ts),
                        signer=cp.signer, signature=cp.signature,
                        body=checkpoint_bytes(cp.body).decode("utf-8"),
                    )
                )  # fmt: skip
                copied += 1
            size, root = await uow.log.head()
            await uow.commit()
        return RestoreReport(len(log.events), copied, size, root)
    finally:
        await runtime.close()


def _diverged(index: int, message: str) -> DomainError:
    return DomainError(
        INVALID_INPUT, f"restore stopped at log index {index}: {message}", pointer=f"/{index}"
    )

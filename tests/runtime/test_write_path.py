"""Small pieces of the write path made cheaper must give what they replaced."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from stateward.records import ProcessRecord
from stateward.runtime.core.writes import _changed


def test_the_process_row_copy_equals_dataclasses_replace() -> None:
    assert not hasattr(ProcessRecord, "__post_init__")  # `_changed` skips nothing
    now = datetime(2026, 1, 1, tzinfo=UTC)
    old = ProcessRecord(
        id="p", kind="instance", namespace="acme", workflow="acme/w", workflow_version=1,
        data={"a": 1}, state="s", status="active", seq=3, state_entered_at=now,
        last_event_at=now, created_at=now, updated_at=now, head_hash="h3", parent_id="q",
        sla_due_at=now,
    )  # fmt: skip
    later = now + timedelta(seconds=1)
    values = {f.name: getattr(old, f.name) for f in dataclasses.fields(old)}
    values.update(seq=4, data={"a": 2}, head_hash="h4", updated_at=later, sla_due_at=None)
    del values["id"], values["kind"]
    new = _changed(old, values)
    assert new == dataclasses.replace(old, **values)
    assert vars(new) == vars(dataclasses.replace(old, **values))
    assert old.seq == 3 and old.data == {"a": 1}  # the old row is untouched
    assert type(new) is ProcessRecord and dataclasses.asdict(new)["sla_due_at"] is None

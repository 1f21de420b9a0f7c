"""Every kernel operation the runtime dispatches (the core's own and the features' table,
`stateward.runtime.operations.OPERATIONS`) is listed in the events reference, and every
operation the page lists exists: a new `$` event (like DSL 2.1's `$child`) cannot ship
undocumented."""

from __future__ import annotations

import re
from pathlib import Path

from stateward.runtime.core import kernel
from stateward.runtime.operations import OPERATIONS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "events.md"
ROW = re.compile(r"^\| (`\$[a-z_]+`(?: / `\$[a-z_]+`)*) \|", re.MULTILINE)


def _documented() -> set[str]:
    names: set[str] = set()
    for cell in ROW.findall(PAGE.read_text(encoding="utf-8")):
        names.update(re.findall(r"`(\$[a-z_]+)`", cell))
    return names


def test_every_kernel_operation_is_in_the_events_reference_and_back() -> None:
    dispatched = {*OPERATIONS, kernel.START, kernel.CANCEL, kernel.ADVANCE}
    documented = _documented()
    assert dispatched - documented == set(), f"add to {PAGE.name}: {dispatched - documented}"
    assert documented - dispatched == set(), f"not dispatched: {documented - dispatched}"

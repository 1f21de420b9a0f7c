"""Progress of long CLI work: a `rich` bar on a terminal, plain lines otherwise.

```python
with progress("verify", total=len(ids)) as bar:
    for pid in ids:
        ...
        bar.advance()
```
On a TTY (stderr) it draws a transient bar (or a spinner when `total` is None) that
disappears when done, so the command's own summary stays the last line. Not on a TTY (CI,
pipes, tests) it prints `label: done/total` at every tenth of runs of at least
`PLAIN_MIN` items, and nothing for shorter ones.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

PLAIN_MIN = 100


class Bar:
    """What the caller advances; draws through rich or prints plain lines."""

    def __init__(self, label: str, total: int | None, stream: IO[str], rich: Any = None):
        self.label = label
        self.total = total
        self.done = 0
        self._stream = stream
        self._rich = rich
        self._task = rich.add_task(label, total=total) if rich is not None else None
        self._next_line = 0.1

    def advance(self, count: int = 1) -> None:
        """`count` more items are done."""
        self.done += count
        if self._rich is not None:
            self._rich.advance(self._task, count)
            return
        if self.total is None or self.total < PLAIN_MIN:
            return
        if self.done >= self.total * self._next_line or self.done == self.total:
            print(f"{self.label}: {self.done}/{self.total}", file=self._stream, flush=True)
            while self._next_line <= self.done / self.total:
                self._next_line += 0.1


@contextmanager
def progress(
    label: str, total: int | None = None, *, stream: IO[str] | None = None
) -> Iterator[Bar]:
    """A progress display for the block (see the module docstring)."""
    out = stream or sys.stderr
    if not out.isatty():
        yield Bar(label, total, out)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, console=Console(file=out), transient=True) as rich:
        yield Bar(label, total, out, rich)

"""Progress display: plain lines off a terminal (long runs only), a rich bar on one."""

from __future__ import annotations

import io

from stateward.observe.progress import PLAIN_MIN, progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_long_runs_print_a_line_per_tenth() -> None:
    out = io.StringIO()
    with progress("verify", total=200, stream=out) as bar:
        for _ in range(200):
            bar.advance()
    lines = out.getvalue().splitlines()
    assert lines[0] == "verify: 20/200" and lines[-1] == "verify: 200/200"
    assert len(lines) == 10


def test_off_a_terminal_short_runs_print_nothing() -> None:
    out = io.StringIO()
    with progress("deploy", total=PLAIN_MIN - 1, stream=out) as bar:
        bar.advance(PLAIN_MIN - 1)
    assert out.getvalue() == ""


def test_on_a_terminal_a_rich_bar_is_drawn_and_cleared() -> None:
    out = Terminal()
    with progress("deploy", total=3, stream=out) as bar:
        for _ in range(3):
            bar.advance()
    assert bar.done == 3
    assert "deploy" in out.getvalue()  # drawn (transient: erased with control codes)

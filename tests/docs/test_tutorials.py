"""Each tutorial's steps, run in order against a real `stateward serve` on a fresh database.

A tutorial page is executed the way a reader follows it, in an empty temporary folder:

- a fence with a file name as title and an include (```json title="flows/x.json"`` holding
  `--8<-- "docs/snippets/…"`) creates that file from the included one;
- a ```sh fence titled `Terminal 1…` is the server: started in the background, waited for
  until it prints `listening on`, stopped at the end;
- every other ```sh fence runs in bash (`set -euo pipefail`; variables and shell functions
  carry over to the next fence, as in one terminal), stdout and stderr together;
- a ```text fence titled `Output` right after it is what the page promises: each of its
  lines must match a line of the real output, where `...` stands for any text.

The folder holds a link to the repository's `examples/` (pages may assume a checkout).
The port `8765` the pages use is replaced by a free one, so parallel runs never collide.
Tools the pages use: `stateward` and `python` (this virtualenv's), `curl`, `jq`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "docs" / "tutorials"
PAGE_PORT = "8765"
FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="(?P<title>[^"]*)"')
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$', re.MULTILINE)
STEP_TIMEOUT = 60.0
ENV_FILE = ".tutorial-env"


@dataclass
class Step:
    """One fence of a page that the runner acts on."""

    kind: str  # "file" | "server" | "shell"
    text: str  # file: the included path; server/shell: the script
    target: str = ""  # file: where to write it
    expected: list[str] = field(default_factory=list)  # shell: the Output fence's lines
    line: int = 0  # where the fence starts in the page (for messages)


def parse_steps(page: Path) -> list[Step]:
    """The steps of a tutorial page, in page order."""
    text = page.read_text(encoding="utf-8")
    steps: list[Step] = []
    for m in FENCE.finditer(text):
        info, body = m["info"].strip(), m["body"]
        lang = info.split(" ", 1)[0]
        title_match = TITLE.search(info)
        title = title_match["title"] if title_match else ""
        line = text.count("\n", 0, m.start()) + 1
        include = INCLUDE.search(body)
        if include and title and lang != "sh":
            steps.append(Step("file", include["path"], target=title, line=line))
        elif lang == "sh" and title.startswith("Terminal 1"):
            steps.append(Step("server", body, line=line))
        elif lang == "sh":
            steps.append(Step("shell", body, line=line))
        elif lang == "text" and title == "Output":
            assert steps and steps[-1].kind == "shell", f"{page}:{line}: Output after no step"
            steps[-1].expected = [ln for ln in body.splitlines() if ln.strip()]
    return steps


def line_pattern(expected: str) -> re.Pattern[str]:
    """A promised output line as a pattern: `...` is any text, the rest literal."""
    parts = [re.escape(p) for p in expected.strip().split("...")]
    return re.compile(".*?".join(parts))


def unmatched(expected: list[str], output: str) -> list[str]:
    """The promised lines that no line of `output` matches (whole line, blanks ignored)."""
    lines = [ln.strip() for ln in output.splitlines()]
    return [e for e in expected if not any(line_pattern(e).fullmatch(ln) for ln in lines)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Reader:
    """Follows a page in a folder of its own: runs its steps as a reader would."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = str(free_port())
        self.servers: list[subprocess.Popen[bytes]] = []
        self.timings: list[tuple[int, float]] = []
        bin_dir = str(Path(sys.executable).parent)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("STATEWARD_")},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(folder),
        }
        (folder / "examples").symlink_to(ROOT / "examples")  # pages run in a checkout

    def script(self, body: str) -> str:
        body = body.replace(PAGE_PORT, self.port)
        return (
            "set -a\n"
            f"if [ -f {ENV_FILE} ]; then set +e; source {ENV_FILE} >/dev/null 2>&1; set -e; fi\n"
            "set -euo pipefail\n"
            f"{body}\n"
            f"{{ export -p | grep -v -E ' (BASHOPTS|SHELLOPTS|BASH_[A-Z_]*|PWD|OLDPWD|SHLVL|_)=';"
            f" declare -f; }} > {ENV_FILE}\n"
        )

    def write_file(self, step: Step) -> None:
        target = self.folder / step.target
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / step.text, target)

    def start_server(self, step: Step) -> None:
        log = (self.folder / f"server-{len(self.servers)}.log").open("wb")
        proc = subprocess.Popen(
            ["bash", "-c", self.script(step.text)],
            cwd=self.folder,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.servers.append(proc)
        deadline = time.monotonic() + 30
        path = Path(log.name)
        while time.monotonic() < deadline:
            if "listening on" in path.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        pytest.fail(f"the server of line {step.line} did not start:\n{path.read_text()[-3000:]}")

    def run_shell(self, step: Step) -> str:
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", self.script(step.text)],
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=STEP_TIMEOUT,
        )
        output = done.stdout.decode("utf-8", errors="replace")
        self.timings.append((step.line, time.monotonic() - started))
        assert done.returncode == 0, f"step at line {step.line} failed:\n{step.text}\n{output}"
        return output

    def stop(self) -> None:
        for proc in self.servers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def tutorial_pages() -> list[Path]:
    """The tutorials, and the guides that promise outputs the same way."""
    guides = [
        p
        for p in sorted((ROOT / "docs" / "guides").glob("*.md"))
        if 'title="Output"' in p.read_text(encoding="utf-8")
    ]
    return [*sorted(p for p in TUTORIALS.glob("*.md") if p.name != "index.md"), *guides]


@pytest.mark.skipif(not shutil.which("curl") or not shutil.which("jq"), reason="needs curl, jq")
@pytest.mark.parametrize("page", tutorial_pages(), ids=lambda p: p.stem)
def test_the_tutorial_runs_as_written(page: Path, tmp_path: Path) -> None:
    steps = parse_steps(page)
    assert any(s.kind == "shell" and s.expected for s in steps), f"{page}: nothing is checked"
    reader = Reader(tmp_path)
    try:
        for step in steps:
            if step.kind == "file":
                reader.write_file(step)
            elif step.kind == "server":
                reader.start_server(step)
            else:
                output = reader.run_shell(step)
                missing = unmatched(step.expected, output.replace(reader.port, PAGE_PORT))
                assert not missing, (
                    f"{page.name} line {step.line}: the page promises lines the run did not "
                    f"print: {missing}\n--- the run printed:\n{output}"
                )
    finally:
        reader.stop()
        print("seconds per step (line, s):", [(n, round(t, 1)) for n, t in reader.timings])


def test_a_promised_line_matches_with_wildcards_only_where_the_page_says() -> None:
    assert unmatched(['"state": "review"'], '  "state": "review"\n') == []
    assert unmatched(['"instanceId": "..."'], '"instanceId": "9f1c"') == []
    assert unmatched(["deploy: ... v1"], "deploy: a/b v2") == ["deploy: ... v1"]


def test_the_browser_and_terminal_clients_carry_the_subscription_the_page_shows() -> None:
    # The browser module cannot run here; the Python client the tutorial runs above carries
    # the same subscription document, so what the page shows is what was executed.
    page = (TUTORIALS / "live-updates.md").read_text(encoding="utf-8")
    documents = [m["body"].strip() for m in FENCE.finditer(page) if m["info"].strip() == "graphql"]
    assert len(documents) == 1
    for client in ("docs/snippets/clients/follow.py", "docs/snippets/clients/live.js"):
        assert documents[0] in (ROOT / client).read_text(encoding="utf-8"), client

"""Attack family: private keys leaking by accident (issue 9 item 13). Every key file the
README steps, `serve --demo`, node startup and `docker/keys/` create is ignored by git, and
the Docker build context holds only what the image copies (it used to hold the 248 MB
`.venv`, and `docker/keys/` with the operator key).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEY_FILES = [
    "operator.json",  # README: stateward keygen --out operator.json
    "stateward-operator.json",  # serve --demo / init default
    "data/prod-operator.json",  # <db>-operator.json beside any SQLite file
    "stateward.db.node-key.json",  # node key beside a SQLite file
    "docker/keys/operator.json",
    "docker/keys/node.json",
    "alice.key.json",
]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout")  # fmt: skip
@pytest.mark.parametrize("path", KEY_FILES)
def test_key_files_are_ignored_by_git(path: str):
    result = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
    assert result.returncode == 0, f"{path} would be committed"


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout")  # fmt: skip
def test_example_workflows_are_not_ignored():
    result = subprocess.run(
        ["git", "check-ignore", "-q", "examples/customer/retail/retail-customer.json"],
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 1


@pytest.mark.parametrize("ignore_file", [".dockerignore", "docker/Dockerfile.dockerignore"])
def test_the_docker_context_holds_only_what_the_image_copies(ignore_file: str):
    rules = [
        line.strip()
        for line in (ROOT / ignore_file).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert rules[0] == "*"  # everything is excluded first ...
    allowed = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    copied = set()
    for line in (ROOT / "docker" / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            copied.update(part.rstrip("/") for part in line.split()[1:-1])
    assert copied == allowed  # ... and only what the Dockerfile copies is let back in

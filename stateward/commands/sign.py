"""`stateward sign --key-file K [ENVELOPE|-]`: sign an event envelope for `submitEvent`.

Reads the envelope JSON from the file (or stdin for `-`), fills what a script would
otherwise have to compute — `v` (1), `actor` (the key's public key), `ts` (now, UTC ms)
and `nonce` (16 random bytes) — when absent, validates it strictly and prints one line of
canonical JSON `{"event": …, "signer": …, "signature": …}` on stdout (nothing else).
Exit 0 on success; 1 when the envelope is invalid (`path: CODE pointer message` on
stderr); 2 on bad usage (unreadable envelope or key file).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from stateward.domain.canonical import canonical_bytes, loads_strict
from stateward.domain.errors import DomainError
from stateward.governance.envelope import ENVELOPE_VERSION, Envelope, format_ts, new_nonce
from stateward.governance.keys import read_key_file
from stateward.governance.verification import sign_envelope


def _read_source(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    return Path(source).read_bytes()


def run(args: argparse.Namespace) -> int:
    """Sign the envelope named by `args.envelope` with `args.key_file`; print the result."""
    source = args.envelope
    label = "<stdin>" if source == "-" else source
    try:
        keypair = read_key_file(args.key_file)
    except DomainError as exc:
        print(f"sign: {exc.message}", file=sys.stderr)
        return 2
    try:
        raw = _read_source(source)
    except OSError as exc:
        print(f"sign: cannot read {label}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        obj = loads_strict(raw)
        if isinstance(obj, dict):
            obj.setdefault("v", ENVELOPE_VERSION)
            obj.setdefault("actor", keypair.public)
            obj.setdefault("ts", format_ts(datetime.now(UTC)))
            obj.setdefault("nonce", new_nonce())
        signed = sign_envelope(Envelope.from_json(obj), keypair)
    except DomainError as exc:
        print(f"{label}: {exc.code} {exc.pointer or '/'} {exc.message}", file=sys.stderr)
        return 1
    sys.stdout.write(canonical_bytes(signed.to_json()).decode("utf-8") + "\n")
    return 0

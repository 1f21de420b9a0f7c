"""The node key: the server's own Ed25519 key that signs server-attested events.

Clients that authenticate with a bearer token get envelopes built and signed by this key
on their behalf (DESIGN §6). Every node of a deployment should load the same file
(`STATEWARD_NODE_KEY_FILE`) or have its public key listed as trusted.
"""

from __future__ import annotations

import os
from pathlib import Path

from stateward.governance.keys import KeyPair, generate_keypair, read_key_file, write_key_file


def load_or_create_node_key(path: str | os.PathLike[str]) -> KeyPair:
    """Read the node key at `path`, creating it (mode 0600, parent folders too) if missing.

    Safe when several processes start at once: creation is exclusive, and the loser of a
    race reads the winner's file.
    """
    target = Path(path)
    if target.exists():
        return read_key_file(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    keypair = generate_keypair()
    try:
        write_key_file(target, keypair)
    except FileExistsError:
        return read_key_file(target)
    return keypair

"""`stateward keygen --out KEYFILE`: write a new Ed25519 key file (mode 0600).

Prints the public key (the actor) on stdout. Refuses to overwrite an existing file:
exit 2 (bad usage) with a message on stderr, the old key left untouched.
"""

from __future__ import annotations

import argparse
import sys

from stateward.governance.keys import generate_keypair, write_key_file


def run(args: argparse.Namespace) -> int:
    """Generate a key pair, write it to `args.out`, print the public key; 0, or 2 on misuse."""
    keypair = generate_keypair()
    try:
        write_key_file(args.out, keypair)
    except FileExistsError:
        print(f"keygen: {args.out} already exists; refusing to overwrite it", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"keygen: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(keypair.public)
    return 0

"""Insight: reading the log back. Analytics by SQL aggregates (`analytics`),
verification of chains, signatures and replays (`verify`), and the deployment-wide
Merkle log: signed checkpoints (`checkpoints`), RFC 9162 proofs (`proofs`), the export
file (`logfile`), whole-log and offline verification (`logverify`) and restore by
replay (`restore`).

May use the runtime core only.
"""

"""Insight: reading the log back. Analytics over replayed events (`analytics`) and
offline verification of chains, signatures and replays (`verify`).

May use the runtime core only.
"""

"""Governance: Ed25519 keys, signed event envelopes, the hash chain and role resolution.

Owns who may say what: key files, strict signature verification, envelope shape and
freshness, the byte layout of the hash chain and the union of role grants over namespace
prefixes. Imports only `stateward.domain` (canonical JSON, errors); never the database,
the runtime or the API. Randomness (keys, nonces) lives here, never in the domain.
"""

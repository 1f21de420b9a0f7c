"""Live events: the node's bus (broadcaster) with bounded local fan-out, and the outbox relay.

Owns delivery of §9 payloads between nodes and to local subscribers. Must not import
`schema` or `resolvers`.
"""

"""Runtime: the services that orchestrate the domain, governance and persistence.

Owns the ONE path of every state change (`act.act`: envelope -> verify -> engine ->
one transaction -> publish after commit), registries and governance, genesis, tokens,
verification, and the node's clock and keys. May import `stateward.domain`,
`stateward.governance` and `stateward.persistence`; never the schema or resolvers.
"""

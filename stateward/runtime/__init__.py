"""Runtime: the services that orchestrate the domain, governance and persistence.

One sub-package per capability (docs/architecture.md draws them):

- `core`: the ONE path of every state change (`core.act.act`: envelope -> verify ->
  kernel operation / engine -> one transaction -> outbox -> publish), group commit, the
  kernel operation table, commands, read queries, the `Runtime` object and the clock;
- feature packages that use the core and not each other (exceptions are named in their
  docstrings and in the import-linter contract): `access`, `hooks`, `sweeps`, `queues`,
  `public`, `packages`, `insight`;
- the composition root, beside them: `operations` (the features' kernel operations,
  registered into the core's table below), `container` (a node's services), `ticker`
  (the periodic loop over every feature's sweep) and `demo`.

May import `stateward.domain`, `stateward.records`, `stateward.governance`,
`stateward.persistence`, `stateward.subscriptions` and `stateward.settings`; never the
GraphQL layer (`schema`, `resolvers`, `http`).
"""

from stateward.runtime.operations import install as _install_operations

_install_operations()

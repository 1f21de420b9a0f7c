"""The runtime's core: the ONE path of every state change, and what it runs on.

Owns `act` (envelope -> verify -> kernel operation / engine -> one transaction ->
outbox -> publish), group commit, the kernel operation table (`kernel.KERNEL_OPS`, filled
by the composition root), event writes, server-signed commands, the read queries, the
`Runtime` object and the clock. May use `stateward.domain`, `stateward.governance`,
`stateward.persistence` and `stateward.records`; never a runtime feature package.
"""

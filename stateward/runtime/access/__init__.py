"""Access: who may do what. Bearer tokens and challenges (`auth`, `tokens`), registry
commands (`registry`: deploy, grants, keys, webhooks), the deployment's genesis and the
governance kernel operation (`governance_ops`).

May use the runtime core. Exception: `governance_ops` checks a deployed hook module with
`hooks.module.check_module` (one Starlark checker for deploys and packages).
"""

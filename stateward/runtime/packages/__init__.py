"""Packages: workflow packages. Export, import and clone (`transfer`), the package format
and its checks (`check`), and many envelopes in one transaction (`batch`).

May use the runtime core. Exceptions: `transfer` deploys through `access.registry` and
`batch` honours `access.governance_ops`' pending workflows (a package is a batch of
registry events); `check` checks hook modules with `hooks.module.check_module`.
"""

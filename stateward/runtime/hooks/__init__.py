"""Hooks: Starlark hooks in a sandboxed subprocess. The runner (`runner`), the worker
process and its protocol (`process`, `worker`), module resolution and checking
(`module`), and the automation of system states (`automation`, the `$automate` operation).

May use the runtime core only.
"""

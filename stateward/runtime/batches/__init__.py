"""Bulk operations (issue 15): a `BatchOperation` applies one operation (cancel, migrate,
retry, an action) to every instance a filter matched, in the background, in pages, with
one signed event per instance, exactly once across nodes and restarts.

May use the runtime core, and the one migration path of `runtime.operate` (bulkMigrate
builds the same `$migrate` event as `migrateInstance`).
"""

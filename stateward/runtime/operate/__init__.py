"""Operating running instances (issue 15): migration to another version, incidents.

Owns the `$migrate` kernel operation and `migrate_instance` (`migration.py`), the
operator role rule (`roles.py`) and incidents (`incidents.py`). Every change is a signed
event through the core's `act`; it uses the core only (no other feature package).

Stable service functions for other features and the GraphQL/CLI edges:
`migration.migrate_instance(runtime, actor, instance_id, to_version, state_map, mutate,
dry_run) -> MigrationResult`.
"""

"""Alembic migrations of the stateward schema (run by `persistence.db.init_schema`)."""

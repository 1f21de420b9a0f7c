"""Persistence: SQLAlchemy 2 async models, repositories, unit of work, alembic migrations.

Owns every table and every SQL statement of stateward. Rows are mapped to frozen
dataclasses (`stateward.domain.model` types or the read-model records of
`stateward.records`) before they leave this package: no mapped class escapes. May import
`stateward.domain` and `stateward.records` (for types) and nothing else of the project.
"""

from stateward.persistence.db import create_engine, init_schema, session_factory, sqlite_file
from stateward.persistence.errors import (
    NonceConflict,
    PersistenceConflict,
    SeqConflict,
)
from stateward.persistence.uow import UnitOfWork, UnitOfWorkFactory

__all__ = [
    "NonceConflict",
    "PersistenceConflict",
    "SeqConflict",
    "UnitOfWork",
    "UnitOfWorkFactory",
    "create_engine",
    "init_schema",
    "session_factory",
    "sqlite_file",
]

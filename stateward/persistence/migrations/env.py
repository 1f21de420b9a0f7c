"""Alembic environment: runs on the connection handed over by `db.init_schema`.

Offline mode (SQL scripts) and URL-based runs are supported for operators who use the
alembic CLI with their own ini file; the application always runs online, in code.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

config = context.config


def run_offline() -> None:
    """Emit SQL for `sqlalchemy.url` without connecting."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    """Migrate on the given connection (or one opened from `sqlalchemy.url`)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as conn:
        context.configure(connection=conn, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()

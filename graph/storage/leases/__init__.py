"""A run's lease on its thread, kept in the thread's own database: SQLite rows or Postgres locks."""

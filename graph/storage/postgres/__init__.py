"""Threads in PostgreSQL (`FERRY_DATABASE_URL`): LangGraph's tables, Ferry's histories beside."""

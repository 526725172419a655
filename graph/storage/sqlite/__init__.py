"""Threads in one SQLite file (`FERRY_DB`), in Ferry's own layout."""

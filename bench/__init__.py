"""`make bench`: Ferry side by side with langchain's `create_agent` + `SqliteSaver`.

Run `python -m bench` (full, ~10 min on 2 cores) or `python -m bench --quick` (~1 min).
"""

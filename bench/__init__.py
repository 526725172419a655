"""`make bench`: Ferry side by side with its peers (see bench/README.md).

Run `python -m bench` in `.venv-bench` (full, ~12 min on 2 busy cores) or `python -m bench --quick`
(~30 s smoke run).
"""

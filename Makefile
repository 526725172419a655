# Two commands matter: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make bench`'s own venv: its peers (the bench group) conflict with the server extra in .venv.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_ARGS ?=

.PHONY: install run test tests lint docs bench bench-install lock clean

install: $(STAMP)

# Reinstall only when the lock or the project metadata changes.
$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	# setuptools warns at length that an editable install is one; it is what we want here.
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: install
	$(BIN)/ferry ask "What day is it, how much is 150 * 3, and what's the weather in Bogotá?"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict graph tools
	$(BIN)/deptry .

# The docs site, as `mkdocs serve` shows it: a broken link or page fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

# Lint and the docs build run beside the tests, their lines between the tests' lines: each is
# one process, and the tests leave a CPU idle about a third of the time. Any failure fails it.
test: install
	$(MAKE) --no-print-directory --jobs=3 --output-sync=line lint docs tests

# Ferry's own modules are compiled first: its editable install leaves them uncompiled, and where
# PYTHONDONTWRITEBYTECODE is set, every `ferry`, worker and server process the tests start would
# compile them again (about 0.1 s of CPU each, hundreds of times).
tests: install
	$(BIN)/python -m compileall -q graph tools tests
	$(BIN)/pytest -q

bench-install: $(BENCH_STAMP)

# The project itself goes in with an isolated build: the bench lock has no setuptools.
$(BENCH_STAMP): requirements-bench.lock pyproject.toml
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-bench.lock
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(BENCH_STAMP)

# Runs in .venv-bench; the Postgres cold read runs in .venv, which has the postgres extra.
# `make bench BENCH_ARGS=--quick` is a ~30 s smoke run.
bench: install $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m bench --pg-python $(BIN)/python $(BENCH_ARGS)

# Regenerate the lock after changing dependencies in pyproject.toml: every extra and the dev
# group (PEP 735), so `make install` needs nothing but the lock and pip.
lock:
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --all-extras --group dev --python-version 3.11 --quiet -o requirements.lock
	$(BIN)/uv pip compile pyproject.toml --group bench --python-version 3.11 --quiet -o requirements-bench.lock

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache

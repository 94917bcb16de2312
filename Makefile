# Two entry points on a fresh machine: `make run` (demo) and `make test` (lint, types, all tests).
# Everything else here is the set-up they share.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test setup pulsar check-java lint typecheck unit integration e2e deploy-check vectors bench clean

run: setup
	$(VENV)/bin/loadmgr demo

test: setup lint typecheck
	bash scripts/run-tests.sh

setup: check-java $(STAMP) pulsar
	@bash scripts/install-shim.sh

# Apache Pulsar's broker jars (pinned in deploy/pulsar/pom.xml) from Maven Central, cached outside git.
pulsar:
	@bash scripts/fetch-pulsar.sh

# The editable install maps `service` and `balancer` to these very folders (setuptools' lenient mode:
# new files are seen, nothing else of the checkout lands on sys.path); its notice that same-named
# folders in the working directory take precedence is about exactly these folders, so it is silenced.
# `make setup` then puts a `loadmgr` shim on PATH (scripts/install-shim.sh says where, or why not).
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required, found " + sys.version.split()[0]'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -W 'ignore:Editable installation:UserWarning' -m pip install --quiet -e '.[dev,spark,pulsar,oracle]'
	@touch $(STAMP)

check-java:
	@bash scripts/check-java.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check balancer service tests bench

typecheck: setup
	$(VENV)/bin/mypy balancer
	$(VENV)/bin/mypy service
	$(VENV)/bin/mypy tests/pulsar

unit: setup
	$(PY) -m pytest tests/unit -q

integration: setup
	$(PY) -m pytest tests/integration -q

e2e: setup
	$(PY) -m pytest tests/e2e -q

vectors: setup
	$(VENV)/bin/loadmgr vectors run tests/vectors

bench: setup
	$(PY) bench/quality.py
	$(PY) bench/quality_named.py
	$(PY) bench/cycle_speed.py
	$(PY) bench/longterm_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info

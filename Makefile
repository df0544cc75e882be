# `make run` and `make test` are the two commands a fresh machine needs (see README.md).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
export FOLDWISE_URL ?= http://$(HOST):$(PORT)

.PHONY: install run test test-fast lint bench bench-peers clean browser

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[server,dev,lightning]'
	touch $(STAMP)

install: $(STAMP)

## Chromium for the dashboard's browser tests, from Debian (Playwright never downloads a browser).
browser:
	@test -x /usr/bin/chromium || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

## Start the service on embedded SQLite and a local Ray, submit the example study, keep serving.
run: install
	@bash scripts/run_service.sh $(HOST) $(PORT) examples/digits.yaml

## The whole suite: unit, PostgreSQL, Ray, DDP and end-to-end tests, a test file per worker
## process at a time (the files that share one live service go as one: tests/shared_service.py),
## in the order tests/conftest.py gives them (xdist would reorder them by their number of
## tests, which put the long live files last). The slowest tests are listed at the end.
TEST_WORKERS ?= 2
test: install browser
	$(PY) -m ruff check .
	$(PY) -m pytest -ra --durations=15 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

## Unit tests only, for a quick loop while editing.
test-fast: install
	$(PY) -m pytest -ra -m "not slow" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

lint: install
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

## The peer libraries of benchmarks/optimizers.py (Optuna, scikit-optimize, Ax, HEBO).
bench-peers: install
	$(PY) -m pip install --quiet -r benchmarks/requirements-peers.txt
	$(PY) -m pip install --quiet --no-deps -r benchmarks/requirements-peers-nodeps.txt

bench: install
	$(PY) benchmarks/fold_overhead.py

clean:
	rm -rf $(VENV) *.egg-info foldwise-artifacts

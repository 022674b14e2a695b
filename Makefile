# make run   - install, set up var/, migrate, seed the demo users, serve http://127.0.0.1:8000/
#              (another address: make run PORT=8080 HOST=0.0.0.0)
# make test  - the test suite with coverage, then the lint gates (ruff, mypy --strict on the kernel, structural gate)
# make lint  - the lint gates alone
# make bench - the benchmarks in bench/
# make chaos - fault injection (scripts/chaos.py): its own PostgreSQL and Redis, 1,000 submissions per fault
# make clean - caches and install stamps (never var/, never the virtualenv itself)

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
STAMP_RUN := $(VENV)/.stamp-requirements
STAMP_DEV := $(VENV)/.stamp-requirements-dev
PYTHON_CANDIDATES := python3.11 python3.12 python3.13 python3
# Where `make run` serves (and what the demo banner prints).
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint bench chaos clean

$(PY):
	@py=""; \
	for candidate in $(PYTHON_CANDIDATES); do \
	  if command -v $$candidate >/dev/null 2>&1 && \
	     $$candidate -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1; then \
	    py=$$candidate; break; \
	  fi; \
	done; \
	if [ -z "$$py" ]; then \
	  echo "make: no Python 3.11 or newer found (tried: $(PYTHON_CANDIDATES)); install one and retry" >&2; exit 1; \
	fi; \
	echo "make: creating $(VENV) with $$($$py --version)"; \
	$$py -m venv $(VENV)

# A stamp newer than the requirements file means the install is current: a second run reuses everything.
$(STAMP_RUN): requirements.txt | $(PY)
	$(PIP) install -q -r requirements.txt
	@touch $@

$(STAMP_DEV): requirements-dev.txt requirements.txt | $(PY)
	$(PIP) install -q -r requirements-dev.txt
	@touch $@ $(STAMP_RUN)

run: $(STAMP_RUN)
	$(PY) -m reviewportal.bootstrap
	$(PY) manage.py migrate --noinput
	@# The portal's signing key (var/keys/, mode 0600): created once, then reported; the server refuses to start without it.
	$(PY) manage.py create_signing_key
	$(PY) manage.py seed_demo --url http://$(HOST):$(PORT)/
	$(PY) manage.py runserver $(HOST):$(PORT) --noreload

# Every step runs; the target fails if any did.
test: $(STAMP_DEV)
	@$(PY) -m reviewportal.bootstrap
	@status=0; \
	$(PY) -m pytest --cov=verification --cov=reviewportal --cov-report=term --durations=30 || status=1; \
	echo "== kernel line coverage (floor 95%) =="; \
	$(PY) -m coverage report --include='verification/kernel/*' --fail-under=95 || status=1; \
	$(MAKE) --no-print-directory lint || status=1; \
	if [ $$status -ne 0 ]; then echo "make test: FAILED (see above)"; fi; \
	exit $$status

lint: $(STAMP_DEV)
	@status=0; \
	echo "== ruff =="; $(PY) -m ruff check . || status=1; \
	echo "== mypy --strict verification/kernel =="; $(PY) -m mypy --strict verification/kernel || status=1; \
	echo "== structural gate =="; $(PY) scripts/structural_gate.py || status=1; \
	exit $$status

bench: $(STAMP_DEV)
	$(PY) bench/run.py

chaos: $(STAMP_DEV)
	$(PY) scripts/chaos.py --per-fault 1000

clean:
	rm -f $(STAMP_RUN) $(STAMP_DEV) .coverage .coverage.*
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis htmlcov .import_linter_cache
	find . -path ./.venv -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

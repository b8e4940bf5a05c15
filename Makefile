# epoch-broker developer targets. `make run` and `make test` are the README's two set-up commands; both
# work on a fresh Debian machine (`make test` installs kcat/node/kafkajs for the interop suite when root).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

# The tests and benchmarks start hundreds of broker processes: without cached bytecode each compiles every module
# again (measured: launch to ready 0.63-0.73 s instead of 0.36-0.37 s), so an environment's
# PYTHONDONTWRITEBYTECODE is not passed on.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install interop-deps run cluster image test test-fast test-nightly test-interop bench lint docs clean

# setup.py compiles protocol/record_scan.py and record_columns.py: a change must rebuild, or a stale build would run
$(STAMP): pyproject.toml setup.py protocol/record_scan.py protocol/record_scan.pxd protocol/record_columns.py protocol/record_columns.pxd
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench,spark,drill]'
	touch $(STAMP)

install: $(STAMP)

# kcat (Debian), node + npm, and kafkajs from tests/interop/js/package-lock.json
interop-deps:
	bash tests/interop/install-deps.sh

run: install
	$(VENV)/bin/epoch-broker serve

# a controller and three brokers on 127.0.0.1:9092-9094 (controller 9192), data in ./cluster-data; Ctrl-C stops
cluster: install
	$(VENV)/bin/epoch-broker cluster --brokers 3

# The Docker image from a wheelhouse made here: the wheel is built with this machine's compiler (the compiled record
# scanner, which python:3.11-slim cannot build), and `docker build` needs no network. BASE_IMAGE=... picks the base.
# (setuptools reuses build/lib.*: removed first, so no file of an older build gets into the wheel)
image: install
	rm -rf build/image build/lib.* build/bdist.*
	$(PY) -m pip wheel -q -w build/image/wheelhouse .
	cp Dockerfile .dockerignore build/image/
	docker build $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) -t epoch-broker build/image

# pytest's own exit status is kept in .venv/.pytest-status (make itself exits 2 on any failure)
test: install interop-deps
	@rm -f $(VENV)/.pytest-status
	$(PY) -m pytest -q --durations=10 -m "not nightly" $(PYTEST_ARGS); status=$$?; echo $$status > $(VENV)/.pytest-status; exit $$status

test-fast: install
	$(PY) -m pytest -q -m "not slow and not interop" $(PYTEST_ARGS)

test-nightly: install
	$(PY) -m pytest -q -m nightly --timeout=1800 $(PYTEST_ARGS)

test-interop: install interop-deps
	$(PY) -m pytest -q tests/interop $(PYTEST_ARGS)

bench: install
	$(PY) -m bench

lint: install
	$(VENV)/bin/ruff check .

# the reference pages (docs/faults.md, metrics.md, drills.md, ...) from the code's catalogues; tests/test_docs.py
# fails while a committed page differs from what this writes
docs: install
	$(PY) tools/generate_docs.py

clean:
	rm -rf $(VENV) build *.egg-info tests/interop/js/node_modules protocol/*.so protocol/record_scan.c protocol/record_columns.c

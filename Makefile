# epoch-broker developer targets. `make run` and `make test` are the README's two set-up commands.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/epoch-broker serve

test: install
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q -m "not slow"

bench: install
	$(PY) -m bench

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info

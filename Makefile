# contextfold developer tasks. Everything runs in a local virtual environment (.venv).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: install install-dev demo lint format typecheck test bench clean

$(VENV)/.installed-dev: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $@

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[cli]'
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

## The main job: compact a shipped example conversation, offline, on the embedded defaults
## (extractive summarizer, SQLite store). A second run reuses the stored checkpoint.
demo: $(VENV)/.installed
	$(VENV)/bin/contextfold compact examples/support_chat.json --budget 500 \
		--store sqlite:///demo.db --conversation demo

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

format: $(VENV)/.installed-dev
	$(VENV)/bin/ruff format src tests bench
	$(VENV)/bin/ruff check --fix src tests bench

typecheck: $(VENV)/.installed-dev
	$(VENV)/bin/mypy src

## The test suite (Redis/PostgreSQL tests skip when no server is running, except in CI).
test: $(VENV)/.installed-dev
	$(PY) -m pytest --cov=contextfold --cov-report=term

bench: $(VENV)/.installed-dev
	$(PIP) install -q -e '.[bench]'
	$(PY) -m bench.report

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage build dist

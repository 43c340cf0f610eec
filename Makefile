# Front door. The logic lives in Python (tools/, emulator/, runtime/) and pyproject.toml;
# every target creates and uses the project's own virtual environment in .venv.

PYTHON_SYS ?= python3.11
VENV       := .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help install test test-fast regs proto lint demo serve bench clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[emulator,dev]'
	@touch $@

install: $(STAMP) ## Create .venv and install the project with all its tools

test: $(STAMP) ## Run every test (builds the verilated models once, cached)
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP) ## Run the tests that need no simulator
	$(PY) -m pytest -m "not sim" $(PYTEST_ARGS)

regs: $(STAMP) ## Regenerate CSR RTL, register docs, Python register map, hw config and proto stubs
	$(PY) -m tools.generate

proto: regs ## Regenerate the gRPC stubs (same generator as regs)

lint: $(STAMP) ## verilator --lint-only -Wall on every top, and ruff on the Python
	$(PY) -m tools.lint

demo: $(STAMP) ## Run the demo
	$(PY) -m tools.demo

bench: $(STAMP) ## Print performance figures (see docs/performance.md)
	$(PY) bench/bench_dma.py

clean: ## Remove build products (keeps .venv)
	rm -rf build .pytest_cache .hypothesis .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

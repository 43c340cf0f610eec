# Front door. The logic lives in Python (tools/, emulator/, runtime/) and pyproject.toml;
# every target creates and uses the project's own virtual environment in .venv.

PYTHON_SYS ?= python3.11
VENV       := .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help install test test-fast coverage lockstep-long mutation regs proto lint demo demo-npu serve bench fuzz clean c-example

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[emulator,dev,farm]'
	@touch $@

install: $(STAMP) ## Create .venv and install the project with all its tools

test: $(STAMP) ## Run every test (builds the verilated models once, cached)
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP) ## Run the tests that need no simulator
	$(PY) -m pytest -m "not sim" $(PYTEST_ARGS)

coverage: $(STAMP) ## RTL line/branch/toggle and functional coverage: build/coverage (COVERAGE_ARGS="--all")
	$(PY) -m tools.coverage $(COVERAGE_ARGS)

SEEDS ?= 1000
lockstep-long: $(STAMP) ## Random and error programs against the RTL in lockstep with the golden model (SEEDS=1000)
	LOCKSTEP_SEEDS=$(SEEDS) $(PY) -m pytest tests/rtl/test_lockstep.py $(PYTEST_ARGS)

mutation: $(STAMP) ## RTL mutants of the compute engine and DMA, each must fail its tests: build/mutation (MUTATION_ARGS="--full")
	$(PY) -m tools.mutation $(MUTATION_ARGS)

regs: $(STAMP) ## Regenerate CSR RTL, register docs, Python register map, hw config and proto stubs
	$(PY) -m tools.generate

proto: regs ## Regenerate the gRPC stubs (same generator as regs)

lint: $(STAMP) ## verilator --lint-only -Wall on every top, and ruff on the Python
	$(PY) -m tools.lint

demo: $(STAMP) ## Run the demo: a server on loopback, 16 MiB through the simulated NPU's DMA
	$(PY) -m tools.demo

demo-npu: $(STAMP) ## Run a quantized CNN on the simulated NPU (BuyiBackend via gRPC), profile and check
	$(PY) -m tools.demo_npu

serve: $(STAMP) ## Serve simulated NPUs on 127.0.0.1:50051 (SERVE_ARGS="--devices 2 --target zg330")
	$(VENV)/bin/npu-emu serve $(SERVE_ARGS)

bench: $(STAMP) ## Print the performance figures (docs/performance.md keeps the table)
	$(PY) bench/bench_dma.py
	$(PY) bench/bench_server.py
	$(PY) bench/bench_runtime.py
	$(PY) bench/bench_runtime_grpc.py
	$(PY) bench/bench_sim_device.py
	$(PY) bench/bench_registers.py
	$(PY) bench/bench_session.py --threads 1
	$(PY) bench/bench_waves.py
	$(PY) bench/bench_farm.py --repeat 3
	$(PY) bench/bench_hardening.py
	$(PY) bench/bench_golden.py
	$(PY) bench/bench_light_models.py --quantize
	$(PY) bench/bench_npu_compiler.py
	$(PY) bench/bench_compute.py
	$(PY) bench/bench_npu_backend.py --repeat 1

fuzz: $(STAMP) ## Server fuzz at scale (100,000 requests, 4 seeds, device probed every 300), kill-mid-DMA trials, TLS
	$(PY) bench/bench_hardening.py --fuzz 25000 --seeds 1,2,3,4 --probe-every 300 --kills 20 --reads 2000

CC      ?= cc
C_FLAGS ?= -O2 -Wall -Wextra -std=gnu11
C_OUT   ?= build/c
C_SRC   := examples/c/dma_copy.c src/npu_mmio.c

c-example: ## Build the C DMA driver example for a board and for the emulator (npu-emu attach)
	@mkdir -p $(C_OUT)
	$(CC) $(C_FLAGS) -DNPU_MMIO_BOARD -I include $(C_SRC) -o $(C_OUT)/npu_dma_example
	$(CC) $(C_FLAGS) -DNPU_MMIO_EMU -I include $(C_SRC) -o $(C_OUT)/npu_dma_example_emu

clean: ## Remove build products (keeps .venv)
	rm -rf build .pytest_cache .hypothesis .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

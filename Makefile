# Quick start:  make demo   (install into .venv, split a bundled sample in each style)
#               make test   (install with test extras and run the test suite)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SAMPLE := samples/ctr_sparse_adam
DEMO_OUT := demo-out

# mermaid's parser, for the test of report.md's diagrams (tests/test_report_diagram.py): the
# npm package's self-contained browser bundle, unpacked into tests/.node (git ignores it)
MERMAID_VERSION := $(shell cat tests/mermaid/version.txt)
MERMAID_DIR := tests/.node/mermaid-$(MERMAID_VERSION)

.PHONY: demo test test-fast install install-test mermaid clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

install-test: $(BIN)/python mermaid
	$(BIN)/python -m pip install --quiet -e '.[test]'

mermaid:
	@if [ -f $(MERMAID_DIR)/dist/mermaid.esm.min.mjs ]; then :; \
	elif command -v npm >/dev/null 2>&1; then \
		echo "npm pack mermaid@$(MERMAID_VERSION) -> $(MERMAID_DIR)"; \
		rm -rf $(MERMAID_DIR) && mkdir -p $(MERMAID_DIR) && \
		tgz=$$(cd $(MERMAID_DIR) && npm pack --silent mermaid@$(MERMAID_VERSION)) && \
		tar -xzf $(MERMAID_DIR)/$$tgz -C $(MERMAID_DIR) --strip-components=1 \
			package/package.json package/LICENSE package/dist/mermaid.esm.min.mjs \
			package/dist/chunks/mermaid.esm.min && rm $(MERMAID_DIR)/$$tgz; \
	else echo "npm not found: the test of report.md's diagrams needs node and mermaid"; fi

demo: install
	@echo "== 1. split samples/ctr_sparse_adam (an embedding table, fc 64 relu -> fc 1, Adam) the way"
	@echo "==    Paddle 2.1-2.6 does (style ps, configs/ps_sync.yaml: 2 pservers, 2 trainers, sync)"
	@mkdir -p $(DEMO_OUT)
	$(BIN)/pstranspile split $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/ps_sync.yaml --out $(DEMO_OUT)/ps --force
	@echo
	@echo "== 2. check the split, then train it against the original for 5 steps"
	$(BIN)/pstranspile check $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/ps_sync.yaml $(DEMO_OUT)/ps
	$(BIN)/pstranspile --quiet simulate $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/ps_sync.yaml $(DEMO_OUT)/ps --no-why
	@echo
	@echo "== 3. the same program for the older pipelines, split and checked (a line each):"
	@echo "==    fleet (Paddle 2.0, configs/two_pservers.yaml), classic (the DistributeTranspiler)"
	@$(BIN)/pstranspile split $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/two_pservers.yaml --out $(DEMO_OUT)/fleet --force --quiet
	@$(BIN)/pstranspile check $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/two_pservers.yaml $(DEMO_OUT)/fleet 2>/dev/null
	@$(BIN)/pstranspile split $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/classic_sync.yaml --out $(DEMO_OUT)/classic --force --quiet
	@$(BIN)/pstranspile check $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/classic_sync.yaml $(DEMO_OUT)/classic 2>/dev/null
	@echo
	@echo "== what went where, who sends what to whom, the Paddle faults each split meets:"
	@echo "==    $(DEMO_OUT)/<style>/report.md, or: $(BIN)/pstranspile report $(DEMO_OUT)/ps"

test: install-test
	$(BIN)/python -m pytest

# the suite without its corpus-wide sweeps (@pytest.mark.slow): docs/contributing.md
test-fast: install-test
	$(BIN)/python -m pytest -m "not slow"

# make bench                      # sizes 1k, 5k, 20k ops; inputs cached in bench/out/
# make bench BENCH_ARGS=--quick   # 1-2 min smoke run; see bench/README.md for the options
bench: install
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_OUT) *.egg-info bench/out tests/.node build transpile/format/*.so

# Quick start:  make demo   (install into .venv and split a bundled sample)
#               make test   (install with test extras and run the test suite)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SAMPLE := samples/mlp_sgd
DEMO_OUT := demo-out

.PHONY: demo test install install-test clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'

demo: install
	@echo "== 1. split samples/mlp_sgd (fc 1000->1000 relu -> fc 1, square error, SGD)"
	@echo "==    for 2 pservers and 2 trainers, synchronous (configs/two_pservers.yaml)"
	$(BIN)/pstranspile split $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/two_pservers.yaml --out $(DEMO_OUT) --force
	@echo
	@echo "== 2. what went where ($(DEMO_OUT)/report.md)"
	$(BIN)/pstranspile report $(DEMO_OUT)
	@echo
	@echo "== 3. check the split, then train it against the original for 5 steps"
	$(BIN)/pstranspile check $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/two_pservers.yaml $(DEMO_OUT)
	$(BIN)/pstranspile simulate $(SAMPLE)/main.pb --startup $(SAMPLE)/startup.pb \
		--cluster configs/two_pservers.yaml $(DEMO_OUT)

test: install-test
	$(BIN)/python -m pytest

# make bench                      # sizes 1k, 5k, 20k ops; inputs cached in bench/out/
# make bench BENCH_ARGS=--quick   # ~1 min smoke run; see bench/README.md for the options
bench: install
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_OUT) *.egg-info bench/out

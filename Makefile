# convsmith: `make fuzz` and `make test` set up a fresh machine and run.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
GPU ?=
TIME ?= 3m
WORKERS ?= 2
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install fuzz test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch first, pinned (the CPU build by default; `make install TORCH=torch GPU=1` for a GPU box), so that
# nothing later pulls another build. onnx2torch is installed without its dependencies: it would pull
# torchvision, which asks for a different torch; it is reported unavailable where torchvision does not import.
# GPU=1 swaps onnxruntime for onnxruntime-gpu (both install the same module, so only one may be present).
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[optimizers,dev,report]"
	$(BIN)/pip install --quiet --no-deps "onnx2torch>=1.5"
	$(if $(GPU),$(BIN)/pip uninstall --quiet -y onnxruntime && $(BIN)/pip install --quiet "onnxruntime-gpu>=1.18")
	touch $(STAMP)

install: $(STAMP)

# The probe (cached per library version, about a minute the first time) lets the campaign skip the
# (operator, dtype) pairs the TorchScript exporter does not support; a second `make fuzz` resumes bugs/.
fuzz: install
	$(BIN)/convsmith probe --converters torch-onnx-script
	if [ -f bugs/campaign.db ]; then \
		$(BIN)/convsmith fuzz --time $(TIME) --workers $(WORKERS) --resume bugs; \
	else \
		$(BIN)/convsmith fuzz --time $(TIME) --workers $(WORKERS) --avoid-unsupported --out bugs; \
	fi

test: install
	$(BIN)/python -m pytest -p no:cacheprovider -n 2

bench: install
	$(BIN)/python bench/generate.py
	$(BIN)/python bench/noise.py --graphs 300
	$(BIN)/python bench/fuzz.py
	$(BIN)/python bench/reduce.py --hunt 12 --nodes 10 build/bench-reduce --out build/bench-reduced
	$(BIN)/python bench/pybind_internals.py

lint: install
	$(BIN)/ruff check generators oracles fuzzer tests bench
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .convsmith-cache

# convsmith: `make fuzz` and `make test` set up a fresh machine and run.
PYTHON ?= python3
VENV ?= .venv
# The stack `make install` installs: a pip constraints file, refreshed by `make lock` (docs/stack.md).
# `make install LOCK=path/to/older.lock` installs another one.
LOCK ?= fuzzer/support/stack.lock
# The torch release `make lock` takes (the CPU build lies on this disk; docs/stack.md weighs a newer one).
TORCH ?= torch==2.13.0
LOCKVENV ?= /tmp/convsmith-lock-venv
GPU ?=
# RAY=1: `make install` adds Ray, the extra of `convsmith fuzz --engine ray` (docs/scale.md). `make test-all` always
# does, so that the two-node cluster test runs (Ray and what it needs are in the lock too; they install in about 20 s).
RAY ?=
TIME ?= 3m
WORKERS ?= 2
BIN := $(VENV)/bin
# Named by the lock's content, so that installing another lock (or a refreshed one) is never skipped.
STAMP := $(VENV)/.installed-$(shell sha256sum $(LOCK) 2>/dev/null | cut -c1-12)
RAY_STAMP := $(VENV)/.installed-ray

.PHONY: install lock fuzz test test-all bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Everything under the lock's constraints, torch included: the lock pins releases (torch==2.13.0, not +cpu), so
# pip takes the CPU build lying on this disk and the CUDA build of the same release on a GPU box. GPU=1 swaps onnxruntime for onnxruntime-gpu (both install the same
# module, so only one may be present; it is not in the lock, so `convsmith converters` marks onnxruntime).
# The lock installed is copied into the venv: `convsmith converters` and tests/test_stack.py check against it.
$(STAMP): $(BIN)/python pyproject.toml $(LOCK)
	$(BIN)/pip install --quiet -c "$(LOCK)" torch -e ".[optimizers,dev,report,tensorflow,zoo,openvino]"
	$(if $(GPU),$(BIN)/pip uninstall --quiet -y onnxruntime && $(BIN)/pip install --quiet "onnxruntime-gpu>=1.18")
	cp "$(LOCK)" $(VENV)/convsmith-stack.lock
	rm -f $(VENV)/.installed*
	touch $(STAMP)

# Ray under the lock's constraints: the releases it shares with the stack stay the locked ones. Redone after a
# new stack is installed (that removes every stamp), a no-op for pip then.
$(RAY_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -c "$(LOCK)" -e ".[ray]"
	touch $(RAY_STAMP)

install: $(STAMP) $(if $(RAY),$(RAY_STAMP))

# The newest releases that install together (torch as TORCH says), in a throwaway venv, written over LOCK atomically.
lock:
	rm -rf $(LOCKVENV)
	$(PYTHON) -m venv $(LOCKVENV)
	$(LOCKVENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCKVENV)/bin/pip install --quiet "$(TORCH)" ".[optimizers,dev,report,ray,tensorflow,zoo,openvino]"
	$(LOCKVENV)/bin/python -m fuzzer.support.lock "$(LOCK)"
	rm -rf $(LOCKVENV)

# The probe (cached per library version, about a minute the first time) lets the campaign skip the
# (operator, dtype) pairs the TorchScript exporter does not support; a second `make fuzz` resumes bugs/.
fuzz: install
	$(BIN)/convsmith probe --converters torch-onnx-script
	if [ -f bugs/campaign.db ]; then \
		$(BIN)/convsmith fuzz --time $(TIME) --workers $(WORKERS) --resume bugs; \
	else \
		$(BIN)/convsmith fuzz --time $(TIME) --workers $(WORKERS) --avoid-unsupported --out bugs; \
	fi

# `make test`: the fast tests, every area of the tool in a few minutes on two cores, before each commit. The tests
# marked slow (campaigns, worker processes, sweeps over every operator or converter) run only in `make test-all`,
# which runs every test: before a merge, and in CI (.ci/run).
test: install
	$(BIN)/python -m pytest -p no:cacheprovider -n 2 -m "not slow"

test-all: install $(RAY_STAMP)
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

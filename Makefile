# The two set-up commands of the README. Both create or refresh .venv and install what they need:
# `make demo` kernelpick alone, `make test` and `make lint` its test tools as well.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kernelpick-installed
DEV_STAMP := $(VENV)/.kernelpick-dev-installed
# A line before each step, and pip's own progress through the large downloads (torch, triton): a
# first `make demo` takes minutes, and should never sit silent through them.
SAY := @echo "make:"

.PHONY: demo test lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(SAY) "[1/3] a virtual environment in $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip
	$(SAY) "[2/3] torch 2.13.0 (a large download, unless $(VENV) has it already)"
	@# Pinned. Where pip is configured with a local CPU wheel (as CI's machines are) that is what it
	@# installs; from PyPI alone, Linux gets the default build, which bundles CUDA (several GB).
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --progress-bar on torch==2.13.0
	$(SAY) "[3/3] kernelpick and what it needs: triton (a large download), numpy, jinja2, rich"
	@$(BIN)/python -m pip install --progress-bar on -e .
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(SAY) "the test tools: pytest, ruff, mypy, and the extras' packages (redis, ray, scikit-learn, matplotlib)"
	@$(BIN)/python -m pip install --progress-bar on -e '.[dev]'
	@touch $(DEV_STAMP)

demo: venv
	$(SAY) "kernelpick demo: tuning a matmul and a vector add here"
	$(BIN)/kernelpick demo

test: $(DEV_STAMP)
	tools/ensure-test-programs
	$(BIN)/python -m pytest -q

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info

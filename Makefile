# The two set-up commands of the README. Both create or refresh .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kernelpick-installed

.PHONY: demo test lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# A CPU build of torch: without a pin pip would pull a multi-GB CUDA build.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: venv
	$(BIN)/kernelpick demo

test: venv
	tools/ensure-test-programs
	$(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info

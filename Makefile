# Two entry points, both self-contained on a machine with only Python 3.11:
#   make run   -> creates .venv on first use, replays a real trace's pods through the
#                 coordinator's extender on an emulated cluster, side by side with
#                 kube-scheduler's default scoring; prints the summary and a plot's path, ends
#                 by itself (make run ARGS=--keep stays up; ARGS=--help for the options)
#   make test  -> creates .venv on first use, runs ruff, the import layer contracts
#                 (.importlinter), mypy --strict ([tool.mypy] in pyproject.toml), builds
#                 the real control plane when it is not built yet (hack/cluster: minutes
#                 the first time, cached after) and runs the test suite, the tier against
#                 that control plane included
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The image the manifests in daemonset/ run: stowage:<version in pyproject.toml>.
IMAGE  ?= stowage
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)

.PHONY: run test lint bench bench-scheduling image clean cluster

$(BIN)/stowage: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,sim]'
	touch $@

run: $(BIN)/stowage
	$(BIN)/python -m hack.demo $(ARGS)

test: $(BIN)/stowage
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	-$(BIN)/python -m hack.cluster build  # a failure is the real tier's to report
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup  # tests/realcluster: one worker

lint: $(BIN)/stowage
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy

bench: $(BIN)/stowage
	$(BIN)/python -m hack.bench.agent_cost

cluster: $(BIN)/stowage
	$(BIN)/python -m hack.cluster up $(ARGS)

# What Stowage costs the real kube-scheduler (builds the control plane on first use);
# ARGS="--nodes 500,5000" for both sizes.
bench-scheduling: $(BIN)/stowage
	$(BIN)/python -m hack.bench.scheduling $(ARGS)

image:
	docker build -t $(IMAGE):$(VERSION) .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .mypy_cache

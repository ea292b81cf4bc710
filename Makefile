# Headwater developer commands.  `make test` works from a fresh clone: it
# installs the system packages (zookeeper, java, helm), a .venv with every
# Python package, checks lint/types/layers, and runs the default test suite.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/.tools/bin:$(CURDIR)/$(BIN):$(PATH)
PYTEST_ARGS ?=

.PHONY: test-pure-python e2e-slow console-browser interop-slow interop-slow-tools e2e-k8s e2e-k8s-short k8s-up k8s-down k8s-images docs-check test install system-deps venv check lint typecheck layers proto proto-check up down unit e2e bench clean

# --durations: the slowest tests in the output, to keep the suite inside its ~20 minutes.
test: install check
	$(BIN)/pytest -m "not slow and not k8s" --durations=15 $(PYTEST_ARGS)

# The same suite with the C record code turned off in every process (the client's and the
# brokers'): the pure-Python record path must behave the same.  Not in CI (as long again).
test-pure-python: install
	HEADWATER_PURE_PYTHON_RECORDS=1 $(BIN)/pytest -m "not slow and not k8s" $(PYTEST_ARGS)

install: system-deps venv

system-deps:
	bash scripts/install-system-deps.sh
	bash scripts/fetch-kafka-clients.sh
	bash scripts/fetch-kafka-clients-4.sh
	bash scripts/fetch-kafka-tools.sh

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml node/headwater/records/_speedups.c \
		node/headwater/client/producer/_native.c
	@echo "==> creating $(VENV) and installing headwater[all]"
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all]'
	touch $@

check: lint typecheck layers proto-check docs-check

docs-check: venv
	$(BIN)/python scripts/gen-config-docs.py --check

lint: venv
	$(BIN)/ruff check node operator spark tests bench scripts
	$(BIN)/ruff format --check node operator spark tests bench scripts

typecheck: venv
	$(BIN)/mypy node/headwater operator/headwater_operator spark/headwater_spark

layers: venv
	$(BIN)/lint-imports

proto: venv
	bash scripts/gen-proto.sh node

proto-check: venv
	bash scripts/gen-proto.sh --check

unit: venv
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

e2e: install
	$(BIN)/pytest tests/e2e tests/interop -m "not k8s" $(PYTEST_ARGS)

# The slow interop suites (minutes of JVMs: Kafka Connect, Spark's own Kafka connector,
# Kafka's verifiable producer and consumer across a leader kill) against the Kafka listener.
# Their jars come from Maven Central into .tools (scripts/fetch-interop-slow.sh; Kafka's
# tools by scripts/fetch-kafka-tools.sh in system-deps); `make test` does not run them.
interop-slow-tools: install
	bash scripts/fetch-interop-slow.sh

interop-slow: install interop-slow-tools
	$(BIN)/pytest tests/interop -m slow $(PYTEST_ARGS)

# Slow e2e suites on real processes (minutes each): exactly-once pipelines through
# app and broker crashes (tests/e2e/transactions, tests/e2e/spark).
e2e-slow: install
	$(BIN)/pytest tests/e2e/transactions tests/e2e/spark -m slow $(PYTEST_ARGS)

# Headwater Console in a real browser (Debian's Chromium, headless; about a minute);
# screenshots of each page in test-artifacts/console/.
console-browser: install
	$(BIN)/pytest tests/e2e/console/test_browser.py -m slow $(PYTEST_ARGS)

up: install
	$(BIN)/headwater dev up --brokers 3 --data-dir .headwater-dev
	$(BIN)/python scripts/demo.py --data-dir .headwater-dev

down: venv
	$(BIN)/headwater dev down --data-dir .headwater-dev

# The Kubernetes tier (tests/e2e/k8s): a local Kubernetes built from the package
# registries (scripts/k8s), the images built with no registry, then the users' whole path.
k8s-up:
	bash scripts/k8s/up.sh

k8s-down:
	bash scripts/k8s/down.sh

k8s-images:
	bash scripts/k8s/images.sh

# The whole scenario (about 15 minutes once built), and the short one CI runs after
# `make test`: install, the Topic lifecycle, one rolling upgrade under load.  Each prints the
# figures of its run (FIGURE lines, kept in .tools/k8s/figures.txt).
K8S_PYTEST = $(BIN)/pytest tests/e2e/k8s -m k8s -v -rs -p no:cacheprovider
K8S_SHORT = -k "install or topic or upgrade_rolls or still_serves"

e2e-k8s: install k8s-up k8s-images
	@mkdir -p .tools/k8s && : > .tools/k8s/figures.txt
	@$(K8S_PYTEST) $(PYTEST_ARGS); status=$$?; echo "==> figures"; cat .tools/k8s/figures.txt; exit $$status

e2e-k8s-short: install k8s-up k8s-images
	@mkdir -p .tools/k8s && : > .tools/k8s/figures.txt
	@$(K8S_PYTEST) $(K8S_SHORT) $(PYTEST_ARGS); status=$$?; echo "==> figures"; cat .tools/k8s/figures.txt; exit $$status

bench: venv
	$(BIN)/python bench/storage.py

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache .headwater-dev

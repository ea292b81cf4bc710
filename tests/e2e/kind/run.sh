#!/usr/bin/env bash
# The kind scenario in one command (tests/e2e/kind/test_kind_scenario.py): creates a kind
# cluster, builds and loads the image, installs the chart, applies a Topic, produces and
# consumes from a pod, upgrades (the operator rolls the brokers) and runs a Spark job.
#
#   tests/e2e/kind/run.sh                      # or: make e2e-kind
#   HEADWATER_KIND_CLUSTER=mine tests/e2e/kind/run.sh   # reuse an existing kind cluster
#   HEADWATER_KIND_KEEP=1 ...                  # keep the cluster it created, for a look
#   HEADWATER_BASE_IMAGE=local/python:3.11-slim-bookworm ...   # air-gapped base image
#
# Skips, saying why, where kind, docker (a running engine), kubectl or helm is missing.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PATH="$PWD/.tools/bin:$PATH"
exec .venv/bin/pytest tests/e2e/kind -m kind -v -rs "$@"

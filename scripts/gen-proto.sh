#!/usr/bin/env bash
# Generates Python modules from proto/headwater/v1/*.proto into node/headwater/v1/.
#   gen-proto.sh node      regenerate in place
#   gen-proto.sh --check   regenerate into a temp dir and fail if the committed code differs
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
export PATH="$PWD/.venv/bin:$PATH"
shopt -s nullglob
protos=(proto/headwater/v1/*.proto)
if [ "${#protos[@]}" -eq 0 ]; then echo "no protos yet"; exit 0; fi
gen() {
    local out="$1"
    mkdir -p "$out/headwater/v1"
    "$PYTHON" -m grpc_tools.protoc -Iproto --python_out="$out" --grpc_python_out="$out" \
        --mypy_out="$out" --mypy_grpc_out="$out" "${protos[@]}"
    touch "$out/headwater/v1/__init__.py"
}
if [ "${1:-}" = "--check" ]; then
    tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
    gen "$tmp"
    if ! diff -r -q "$tmp/headwater/v1" node/headwater/v1 -x __pycache__; then
        echo "generated proto code is stale: run 'make proto'" >&2; exit 1
    fi
    echo "generated proto code is up to date"
else
    gen node
fi

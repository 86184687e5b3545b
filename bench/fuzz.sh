#!/usr/bin/env bash
# The long API fuzz: the same schemathesis test as the suite (tests/app/test_fuzz.py: a real
# server on loopback over a seeded SQLite copy, every operation, with and without an API key),
# with a larger example budget per operation and variant (default 200; the suite uses 12).
#   bench/fuzz.sh [EXAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
export GPUCAST_FUZZ_EXAMPLES="${1:-200}"
start=$(date +%s)
"$PYTHON" -m pytest tests/app/test_fuzz.py -p no:logging -p no:cacheprovider -q -s
echo "fuzz: ${GPUCAST_FUZZ_EXAMPLES} examples per operation variant, $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# The long API fuzz: the same schemathesis test as the suite (tests/app/test_fuzz.py: a real
# server on loopback over a freshly seeded database, every operation, with and without an API
# key), with a larger example budget per operation and variant (default 200; the suite uses 12).
#   bench/fuzz.sh [EXAMPLES]
#   GPUCAST_FUZZ_DATABASE=sqlite|postgresql|both   which database the server uses (default sqlite)
# PostgreSQL needs GPUCAST_TEST_POSTGRES_URL, an empty database the run may wipe, e.g.
#   GPUCAST_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/gpucast_fuzz \
#     GPUCAST_FUZZ_DATABASE=postgresql bench/fuzz.sh 100
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
export GPUCAST_FUZZ_EXAMPLES="${1:-200}"
database="${GPUCAST_FUZZ_DATABASE:-sqlite}"
case "$database" in
    sqlite) select="sqlite" ;;
    postgres | postgresql) select="postgres" ;;
    both) select="sqlite or postgres" ;;
    *) echo "GPUCAST_FUZZ_DATABASE must be sqlite, postgresql or both, not '$database'" >&2; exit 2 ;;
esac
if [[ "$select" == *postgres* && -z "${GPUCAST_TEST_POSTGRES_URL:-}" ]]; then
    # the test would skip, and a skipped run must not read as a clean one
    echo "GPUCAST_FUZZ_DATABASE=$database needs GPUCAST_TEST_POSTGRES_URL" >&2
    exit 2
fi
start=$(date +%s)
"$PYTHON" -m pytest tests/app/test_fuzz.py -k "test_fuzz_every_operation and ($select)" \
    -p no:logging -p no:cacheprovider -q -s -rs
echo "fuzz: ${GPUCAST_FUZZ_EXAMPLES} examples per operation variant on ${database}," \
    "$(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# End-to-end JetStream checks with the official Python client (nats-py): starts
# the server with `-js -sd <tmpdir>` and runs tests/e2e/jetstream_py.py.
#
# Usage:
#   tests/e2e/jetstream_py.sh                          # tests target/release/jetraft
#   SERVER_BIN=nats-server tests/e2e/jetstream_py.sh   # tests the reference server
#
# Environment:
#   SERVER_BIN  server to test: a path (relative = relative to the repo root)
#               or a bare command name on PATH. Default target/release/jetraft.
#               Started as `$SERVER_BIN -a 127.0.0.1 -p <port> -js -sd <tmpdir>`.
#   PYTHON      interpreter with nats-py installed (default python3).
#   CI          if "true", missing nats-py is a failure instead of a skip.
#   KEEP_TMP    if set, keep the temp dir with the server log.
#   NATS_E2E_ONLY  run only the Python checks whose name contains this text.
#
# Ends with "N passed, M failed" (the Python checks plus the server start);
# exits non-zero on any failure.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}
PY_TIMEOUT=400 # bound for the whole Python run (each check has its own 20 s bound)

if ! "$PYTHON" -c 'import nats, nats.errors, nats.js' >/dev/null 2>&1; then
    skip_banner "SKIP: nats-py not installed for $PYTHON (pip install nats-py)"
    skip_exit "nats-py is required when CI=true"
fi

require_server
KEEP_LOGS=${KEEP_TMP:+1}
setup_tmp jetraft-e2e-js-py

echo "== nats-py JetStream e2e: server=$SERVER python=$("$PYTHON" --version 2>&1) nats-py=$("$PYTHON" -m pip show nats-py 2>/dev/null | sed -n 's/^Version: //p')"

mkdir -p "$TMP/store"
if start_server js -js -sd "$TMP/store"; then
    pass "server starts with -js -sd on 127.0.0.1:$SERVER_PORT"
    export NATS_E2E_URL="nats://127.0.0.1:$SERVER_PORT"
else
    fail "server starts with -js -sd <dir>"
    report
    exit 1
fi

run_python_checks "$HERE/jetstream_py.py" "$PY_TIMEOUT"

report
((FAILED == 0))

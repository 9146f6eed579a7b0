#!/usr/bin/env bash
# End-to-end checks with the official Python client (nats-py): starts three
# servers (plain, --user/--pass, --auth token) and runs tests/e2e/nats_py.py.
#
# Usage:
#   tests/e2e/nats_py.sh                          # tests target/release/jetraft
#   SERVER_BIN=nats-server tests/e2e/nats_py.sh   # tests the reference server
#
# Environment:
#   SERVER_BIN  server to test: a path (relative = relative to the repo root)
#               or a bare command name on PATH. Default target/release/jetraft.
#   PYTHON      interpreter with nats-py installed (default python3).
#   CI          if "true", missing nats-py is a failure instead of a skip.
#   KEEP_TMP    if set, keep the temp dir with the server logs.
#
# Ends with "N passed, M failed" (the Python checks plus the server starts);
# exits non-zero on any failure.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}
PY_TIMEOUT=300 # bound for the whole Python run (each check has its own 15 s bound)

if ! "$PYTHON" -c 'import nats, nats.errors' >/dev/null 2>&1; then
    skip_banner "SKIP: nats-py not installed for $PYTHON (pip install nats-py)"
    skip_exit "nats-py is required when CI=true"
fi

require_server
KEEP_LOGS=${KEEP_TMP:+1}
setup_tmp jetraft-e2e-py

echo "== nats-py e2e: server=$SERVER python=$("$PYTHON" --version 2>&1) nats-py=$("$PYTHON" -m pip show nats-py 2>/dev/null | sed -n 's/^Version: //p')"

if start_server plain; then
    pass "server starts (plain) on 127.0.0.1:$SERVER_PORT"
    export NATS_E2E_URL="nats://127.0.0.1:$SERVER_PORT"
else
    fail "server starts (plain)"
    report
    exit 1
fi
export NATS_E2E_USER=py_user NATS_E2E_PASS='py-s3cret' NATS_E2E_TOKEN='py-tok-123'
if start_server userpass --user "$NATS_E2E_USER" --pass "$NATS_E2E_PASS"; then
    pass "server starts with --user/--pass"
    export NATS_E2E_AUTH_URL="nats://127.0.0.1:$SERVER_PORT"
else
    fail "server starts with --user/--pass"
fi
if start_server token --auth "$NATS_E2E_TOKEN"; then
    pass "server starts with --auth <token>"
    export NATS_E2E_TOKEN_URL="nats://127.0.0.1:$SERVER_PORT"
else
    fail "server starts with --auth <token>"
fi

run_python_checks "$HERE/nats_py.py" "$PY_TIMEOUT"

report
((FAILED == 0))

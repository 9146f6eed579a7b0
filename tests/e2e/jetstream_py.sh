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

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-python3}
PY_TIMEOUT=400 # bound for the whole Python run (each check has its own 20 s bound)

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS: $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL: $*"; }

if ! "$PYTHON" -c 'import nats, nats.errors, nats.js' >/dev/null 2>&1; then
    echo "############################################################"
    echo "SKIP: nats-py not installed for $PYTHON (pip install nats-py)"
    echo "############################################################"
    if [[ ${CI:-} == true ]]; then
        echo "FAIL: nats-py is required when CI=true"
        echo "0 passed, 1 failed"
        exit 1
    fi
    echo "0 passed, 0 failed"
    exit 0
fi

resolve_server_bin() {
    local b=${SERVER_BIN:-target/release/jetraft}
    if [[ $b == */* ]]; then
        [[ $b == /* ]] || b="$REPO_ROOT/$b"
        [[ -x $b ]] || return 1
        echo "$b"
    else
        command -v "$b"
    fi
}
if ! SERVER=$(resolve_server_bin); then
    fail "server binary '${SERVER_BIN:-target/release/jetraft}' not found or not executable (build it, or set SERVER_BIN)"
    echo "$PASSED passed, $FAILED failed"
    exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/jetraft-e2e-js-py.XXXXXX")
PIDS=()
alive() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}
stop_pid() { _stop_pid "$@" 2>/dev/null; } # also hides bash's "Killed" job notice
_stop_pid() {
    local pid=$1 i
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    alive "$pid" && kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local p
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    if [[ -n ${KEEP_TMP:-} ]]; then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    "$PYTHON" -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}
# start_server NAME [flags...] -> SERVER_PORT
start_server() {
    local name=$1 port pid i
    shift
    port=$(free_port)
    "$SERVER" -a 127.0.0.1 -p "$port" "$@" >"$TMP/$name.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    SERVER_PORT=$port
    for ((i = 0; i < 100; i++)); do # up to 10 s
        alive "$pid" || break
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "---- $name log ----"
    tail -n 20 "$TMP/$name.log" || true
    return 1
}

echo "== nats-py JetStream e2e: server=$SERVER python=$("$PYTHON" --version 2>&1) nats-py=$("$PYTHON" -m pip show nats-py 2>/dev/null | sed -n 's/^Version: //p')"

mkdir -p "$TMP/store"
if start_server js -js -sd "$TMP/store"; then
    pass "server starts with -js -sd on 127.0.0.1:$SERVER_PORT"
    export NATS_E2E_URL="nats://127.0.0.1:$SERVER_PORT"
else
    fail "server starts with -js -sd <dir>"
    echo "$PASSED passed, $FAILED failed"
    exit 1
fi

rc=0
timeout "$PY_TIMEOUT" "$PYTHON" -u "$HERE/jetstream_py.py" | tee "$TMP/py.out" || rc=$?
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$TMP/py.out" | tail -n 1 || true)
if [[ -n $summary ]]; then
    PASSED=$((PASSED + $(awk '{print $1}' <<<"$summary")))
    FAILED=$((FAILED + $(awk '{print $3}' <<<"$summary")))
else
    fail "jetstream_py.py produced no summary (exit $rc)"
fi
if [[ $rc != 0 && $FAILED == 0 ]]; then
    fail "jetstream_py.py exited $rc"
fi

echo "$PASSED passed, $FAILED failed"
((FAILED == 0))

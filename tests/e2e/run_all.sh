#!/usr/bin/env bash
# Runs every end-to-end suite against one server binary:
#   tests/e2e/nats_cli.sh, tests/e2e/nats_py.sh, tests/e2e/jetstream_cli.sh,
#   tests/e2e/jetstream_py.sh, tests/e2e/jetstream_cluster.sh, tests/e2e/docker_cluster.sh
#   (the compose cluster in containers; skips without a Docker engine), bench/core.sh --smoke,
#   bench/jetstream.sh --smoke, bench/cluster.sh --smoke, bench/scale.sh --smoke,
#   bench/store.sh --smoke, bench/store.sh --smoke --streams 20, bench/store.sh --smoke --replicas 3
# and prints a final "N passed, M failed" summing the checks of all of them.
# Exits non-zero if any suite fails (or prints no summary).
#
#   tests/e2e/run_all.sh                         # SERVER_BIN=target/release/jetraft
#   SERVER_BIN=nats-server tests/e2e/run_all.sh  # validate the suites themselves
#
# SERVER_BIN, NATS_BIN, NATS_SERVER_BIN, PYTHON and CI are passed through.
# SUITE_TIMEOUT (default 600 s) bounds each suite.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
export SERVER_BIN=${SERVER_BIN:-target/release/jetraft}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-600}

SUITES=(
    "nats CLI e2e|$HERE/nats_cli.sh"
    "nats-py e2e|$HERE/nats_py.sh"
    "JetStream nats CLI e2e|$HERE/jetstream_cli.sh"
    "JetStream nats-py e2e|$HERE/jetstream_py.sh"
    "JetStream cluster nats CLI e2e|$HERE/jetstream_cluster.sh"
    "Docker compose cluster e2e|$HERE/docker_cluster.sh"
    "core bench (smoke)|$REPO_ROOT/bench/core.sh --smoke"
    "JetStream bench (smoke)|$REPO_ROOT/bench/jetstream.sh --smoke"
    "cluster bench (smoke)|$REPO_ROOT/bench/cluster.sh --smoke"
    "scale bench (smoke)|$REPO_ROOT/bench/scale.sh --smoke"
    "store bench (smoke)|$REPO_ROOT/bench/store.sh --smoke"
    "store bench, 20 streams (smoke)|$REPO_ROOT/bench/store.sh --smoke --streams 20"
    "store bench, R3 (smoke)|$REPO_ROOT/bench/store.sh --smoke --replicas 3"
)

TOTAL_PASSED=0
TOTAL_FAILED=0
SUITE_LINES=()
any_failed=0
LOG=$(mktemp "${TMPDIR:-/tmp}/jetraft-run-all.XXXXXX")
trap 'rm -f "$LOG"' EXIT

echo "== run_all: SERVER_BIN=$SERVER_BIN"
for s in "${SUITES[@]}"; do
    name=${s%%|*}
    cmd=${s#*|}
    echo
    echo "################ $name: $cmd"
    rc=0
    # word splitting of $cmd is intended (script + its flags; no spaces in paths assumed)
    # shellcheck disable=SC2086
    (cd "$REPO_ROOT" && timeout "$SUITE_TIMEOUT" $cmd) 2>&1 | tee "$LOG" || rc=$?
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$LOG" | tail -n 1 || true)
    p=0 f=0
    if [[ -n $summary ]]; then
        p=$(awk '{print $1}' <<<"$summary")
        f=$(awk '{print $3}' <<<"$summary")
    fi
    if [[ -z $summary ]] || ((rc != 0 && f == 0)); then
        f=$((f + 1)) # a crash / timeout / missing summary counts as one failure
    fi
    TOTAL_PASSED=$((TOTAL_PASSED + p))
    TOTAL_FAILED=$((TOTAL_FAILED + f))
    if ((rc != 0 || f != 0)); then
        any_failed=1
        SUITE_LINES+=("FAIL: $name (exit $rc, $p passed, $f failed)")
    else
        SUITE_LINES+=("PASS: $name ($p passed)")
    fi
done

echo
echo "################ summary (SERVER_BIN=$SERVER_BIN)"
printf '%s\n' "${SUITE_LINES[@]}"
echo "$TOTAL_PASSED passed, $TOTAL_FAILED failed"
((any_failed == 0))

#!/usr/bin/env bash
# bench/mirror.sh: how long a new copy takes (one node): the origin is filled with N messages
# first, then the copy created; timed from the create until the copy's info shows N messages.
#   mirror     a limits origin and a mirror of it (read through the API on jetraft)
#   workqueue  a work-queue origin and a stream sourcing it, through a durable flow-control
#              consumer on both servers (ADR 0032): also timed until the origin is empty
# nats-server runs the same steps first. Every wait is bounded.
# Usage: N=10000 MODES="mirror workqueue" JETRAFT_BIN=target/release/jetraft bench/mirror.sh
# (from the repo root; needs nats-server and the nats CLI). Fixed ports 14732/14733.
set -u
N=${N:-10000}
MODES=${MODES:-mirror workqueue}

messages() {
    nats $1 stream info "$2" --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["state"]["messages"])'
}

# wait_messages SERVER STREAM COUNT: polls (every 0.1 s, at most 120 s) until STREAM holds COUNT.
wait_messages() {
    local got=
    for _ in $(seq 1200); do
        got=$(messages "$1" "$2")
        [[ $got == "$3" ]] && break
        sleep 0.1
    done
    echo "$got"
}

bench() {
    local name=$1 bin=$2 port=$3 mode=$4 dir
    dir=$(mktemp -d)
    "$bin" -a 127.0.0.1 -p "$port" -js -sd "$dir" >"$dir.log" 2>&1 &
    local pid=$!
    for _ in $(seq 50); do nats --no-context --server "127.0.0.1:$port" stream ls >/dev/null 2>&1 && break; sleep 0.1; done
    local s="--no-context --server 127.0.0.1:$port"
    local retention=limits
    [[ $mode == workqueue ]] && retention=work
    nats $s stream add ORIG --subjects "orig.*" --retention "$retention" --defaults >/dev/null
    nats $s pub orig.a --count "$N" "message {{Count}}" >/dev/null 2>&1
    wait_messages "$s" ORIG "$N" >/dev/null
    local start=$(date +%s.%N)
    if [[ $mode == workqueue ]]; then
        nats $s stream add COPY --source ORIG --defaults >/dev/null
    else
        nats $s stream add COPY --mirror ORIG --defaults >/dev/null
    fi
    local got=$(wait_messages "$s" COPY "$N")
    local copied=$(date +%s.%N)
    local report="$name: $mode of $N messages: $got copied in $(python3 -c "print(round($copied-$start,2))") s"
    if [[ $mode == workqueue ]]; then
        local left=$(wait_messages "$s" ORIG 0)
        local drained=$(date +%s.%N)
        report+=", origin down to $left in $(python3 -c "print(round($drained-$start,2))") s"
    fi
    echo "$report"
    kill "$pid"; wait "$pid" 2>/dev/null
    rm -rf "$dir" "$dir.log"
}
trap 'kill $(jobs -p) 2>/dev/null' EXIT
for mode in $MODES; do
    bench nats-server nats-server 14732 "$mode"
    bench jetraft "${JETRAFT_BIN:-target/release/jetraft}" 14733 "$mode"
done

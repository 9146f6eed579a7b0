#!/usr/bin/env bash
# bench/mirror.sh: how long a new mirror takes to copy N messages (one node): the origin is
# filled first, then the mirror created; timed from the create until the mirror's info shows
# N messages. nats-server runs the same steps first. Every wait is bounded.
# Usage: N=10000 JETRAFT_BIN=target/release/jetraft bench/mirror.sh (from the repo root;
# needs nats-server and the nats CLI). Fixed ports 14732/14733.
set -u
N=${N:-10000}
bench() {
    local name=$1 bin=$2 port=$3 dir
    dir=$(mktemp -d)
    "$bin" -a 127.0.0.1 -p "$port" -js -sd "$dir" >"$dir.log" 2>&1 &
    local pid=$!
    for _ in $(seq 50); do nats --no-context --server "127.0.0.1:$port" stream ls >/dev/null 2>&1 && break; sleep 0.1; done
    local s="--no-context --server 127.0.0.1:$port"
    nats $s stream add ORIG --subjects "orig.*" --defaults >/dev/null
    nats $s pub orig.a --count "$N" "message {{Count}}" >/dev/null 2>&1
    for _ in $(seq 600); do
        [[ $(nats $s stream info ORIG --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["state"]["messages"])') == "$N" ]] && break
        sleep 0.1
    done
    local start=$(date +%s.%N)
    nats $s stream add MIR --mirror ORIG --defaults >/dev/null
    local got=0
    for _ in $(seq 1200); do
        got=$(nats $s stream info MIR --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["state"]["messages"])')
        [[ $got == "$N" ]] && break
        sleep 0.1
    done
    local end=$(date +%s.%N)
    echo "$name: mirror of $N messages: $got copied in $(python3 -c "print(round($end-$start,2))") s"
    kill "$pid"; wait "$pid" 2>/dev/null
    rm -rf "$dir"
}
trap 'kill $(jobs -p) 2>/dev/null' EXIT
bench nats-server nats-server 14732
bench jetraft "${JETRAFT_BIN:-target/release/jetraft}" 14733

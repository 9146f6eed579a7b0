#!/usr/bin/env bash
# Per-message TTLs at scale: one server, file storage, R1. Publishes N messages with
# `Nats-TTL: TTL` seconds (bench/ttl.py, a window of unacknowledged publishes), reports
# the server's RSS and CPU seconds after the publish, then waits for every message to
# expire and reports when the stream was empty, the CPU seconds the expiry took and the
# RSS after it. Same client, same steps, for every server given.
#
#   bench/ttl.sh [--msgs N] [--ttl SECONDS] SERVER_BIN...
#
# A SERVER_BIN named nats-server* is started as nats-server (-js -sd), anything else as
# jetraft. Ports from 25000 (helper range). Bounded: every wait has a timeout.
set -euo pipefail

MSGS=1000000
TTL=60
while [[ $# -gt 0 ]]; do
    case "$1" in
    --msgs) MSGS="$2"; shift 2 ;;
    --ttl) TTL="$2"; shift 2 ;;
    *) break ;;
    esac
done
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$1/stat"; }

PORT=25010
echo "| server | msgs | publish | RSS after publish | CPU after publish | empty after (TTL ${TTL} s) | expiry CPU | RSS after expiry |"
echo "|---|---|---|---|---|---|---|---|"
for bin in "$@"; do
    PORT=$((PORT + 1))
    dir=$(mktemp -d)
    case "$(basename "$bin")" in
    nats-server*) "$bin" -a 127.0.0.1 -p "$PORT" -js -sd "$dir/store" >"$dir/server.log" 2>&1 & ;;
    *) "$bin" -a 127.0.0.1 -p "$PORT" --jetstream --store_dir "$dir/store" >"$dir/server.log" 2>&1 & ;;
    esac
    pid=$!
    sleep 0.2
    for _ in $(seq 100); do
        (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
        sleep 0.1
    done
    out=$(timeout 900 python3 "$HERE/ttl.py" --url "nats://127.0.0.1:$PORT" --msgs "$MSGS" \
        --ttl "$TTL" 2>&1 | tail -1)
    rss_pub=$(rss_mb "$pid")
    cpu_pub=$(cpu_s "$pid")
    started=$(grep -o 'started_at [0-9.]*' <<<"$out" | cut -d' ' -f2 || true)
    empty=$(timeout 900 python3 "$HERE/ttl.py" --url "nats://127.0.0.1:$PORT" --only-wait \
        --wait $((TTL * 4 + 120)) 2>&1 | tail -1)
    empty_at=$(grep -o 'empty_at [0-9.]*' <<<"$empty" | cut -d' ' -f2 || true)
    after="none"
    [[ -n "$empty_at" && -n "$started" ]] && after=$(echo "$empty_at - $started" | bc)
    rss_end=$(rss_mb "$pid")
    cpu_end=$(cpu_s "$pid")
    published=$(grep -o 'in [0-9.]* s' <<<"$out" || echo "$out")
    echo "| $(basename "$bin") | $MSGS | $published | $rss_pub MB | $cpu_pub s | $after s | $(echo "$cpu_end - $cpu_pub" | bc) s | $rss_end MB |"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
done

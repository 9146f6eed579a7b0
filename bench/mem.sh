#!/usr/bin/env bash
# Memory of a stream: one server, file storage, R1. Publishes N messages of SIZE bytes
# (`nats bench js pub async`), then reports the server's RSS, its store on disk, a `kill -9`
# and restart (time from the process start until `stream info` answers with every message),
# the RSS after it, a durable pull consume of the whole stream (msgs/s), and the RSS after
# that. Same client, same steps, for every server given.
#
#   bench/mem.sh [--msgs N] [--size BYTES] [--cache BYTES] SERVER_BIN...
#
# A SERVER_BIN named nats-server* is started as nats-server (-js -sd), anything else as
# jetraft (--jetstream --store_dir, and --js_cache_bytes when --cache is given). Prints one
# markdown row per server. Bounded: every wait has a timeout.
set -euo pipefail

MSGS=500000
SIZE=128
CACHE=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    --msgs) MSGS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --cache) CACHE="$2"; shift 2 ;;
    *) break ;;
    esac
done
NATS="${NATS_BIN:-$(command -v nats || echo "$HOME/go/bin/nats")}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
now() { date +%s.%N; }

start_server() { # BIN PORT DIR LOG -> pid
    local bin="$1" port="$2" dir="$3" log="$4"
    if [[ "$(basename "$bin")" == nats-server* ]]; then
        "$bin" -js -sd "$dir" -p "$port" -a 127.0.0.1 >"$log" 2>&1 &
    else
        local extra=()
        [[ -n "$CACHE" ]] && extra=(--js_cache_bytes "$CACHE")
        "$bin" --jetstream --store_dir "$dir" -p "$port" -a 127.0.0.1 "${extra[@]}" >"$log" 2>&1 &
    fi
    echo $!
}

wait_for_stream() { # URL WHAT -> waits until stream M answers with every message (300 s)
    local deadline=$(($(date +%s) + 300))
    while (($(date +%s) < deadline)); do
        if "$NATS" --no-context --server "$1" stream info M --json 2>/dev/null |
            python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['state']['messages']==$MSGS else 1)" 2>/dev/null; then
            return 0
        fi
        sleep 0.02
    done
    echo "$2: stream never held $MSGS messages:" >&2
    "$NATS" --no-context --server "$1" stream info M --json >&2 || true
    return 1
}

measure() { # BIN
    local bin="$1" dir port url pid t0 t1 rss_pub rss_restart rss_read disk restart_s pub_rate read_rate
    dir=$(mktemp -d)
    port=$(free_port)
    url="nats://127.0.0.1:$port"
    pid=$(start_server "$bin" "$port" "$dir/store" "$dir/log1")
    local deadline=$(($(date +%s) + 30))
    until "$NATS" --no-context --server "$url" account info >/dev/null 2>&1; do
        (($(date +%s) < deadline)) || { echo "server did not start" >&2; cat "$dir/log1" >&2; return 1; }
        sleep 0.05
    done
    pub_rate=$(timeout 900 "$NATS" --no-context --server "$url" bench js pub async js.mem --stream M --create \
        --storage file --replicas 1 --clients 1 --msgs "$MSGS" --size "$SIZE" --no-progress 2>&1 |
        grep -oE '[0-9,]+ msgs/sec' | head -1 | tr -d ', msgs/sec')
    wait_for_stream "$url" "after publish" || { tail -20 "$dir/log1" >&2; return 1; }
    sleep 2 # let the write-behind and the compactor settle before reading RSS
    rss_pub=$(rss_mb "$pid")
    disk=$(du -sm "$dir/store" | cut -f1)
    kill -9 "$pid"
    # Not this shell's child (started in a command substitution): wait for it to be gone.
    while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
    t0=$(now)
    pid=$(start_server "$bin" "$port" "$dir/store" "$dir/log2")
    wait_for_stream "$url" "after restart" || { tail -20 "$dir/log2" >&2; return 1; }
    t1=$(now)
    restart_s=$(python3 -c "print(f'{$t1-$t0:.2f}')")
    rss_restart=$(rss_mb "$pid")
    read_rate=$(timeout 900 "$NATS" --no-context --server "$url" bench js fetch --stream M --acks explicit \
        --clients 1 --msgs "$MSGS" --size "$SIZE" --no-progress 2>&1 |
        grep -oE '[0-9,]+ msgs/sec' | head -1 | tr -d ', msgs/sec')
    rss_read=$(rss_mb "$pid")
    kill "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -rf "$dir"
    echo "| $(basename "$bin") | $MSGS x $SIZE B | $rss_pub MB | $disk MB | $restart_s s | $rss_restart MB | $rss_read MB | $pub_rate | $read_rate |"
}

echo "| server | stream | RSS after publish | disk | kill -9 → serving | RSS after restart | RSS after consume | publish msgs/s | consume msgs/s |"
echo "|---|---|---|---|---|---|---|---|---|"
for bin in "$@"; do
    measure "$bin"
done

#!/usr/bin/env bash
# JetStream side by side: the same `nats bench js` workloads against nats-server
# (default settings), nats-server with `sync_interval: always`, and jetraft, each
# started on free loopback ports with a fresh store dir. See bench/README.md.
#
#   bench/jetstream.sh [--msgs N] [--sync-msgs N] [--runs R] [--smoke] [--timeout SECS] [--keep-logs]
#
#   --msgs N       messages for the async publish (and so for the pull consume
#                  that reads them back) (default 100000)
#   --sync-msgs N  messages for the sync publish latency workload (default 2000)
#   --runs R       repetitions per server, reported as the median; the servers
#                  rotate who goes first (default 3)
#   --smoke        2000 async msgs, 200 sync, 1 run unless --runs: only proves
#                  the script works (CI)
#   --timeout S    bound for each nats bench process (default 600, smoke 60)
#   --keep-logs    keep the temp dir with all server and nats bench output
#
# Environment:
#   SERVER_BIN       jetraft binary (default target/release/jetraft, relative to
#                    the repo root); a bare name is looked up on PATH.
#   NATS_SERVER_BIN  reference server (default nats-server on PATH; 2.15.x expected)
#   NATS_BIN         nats CLI (default nats on PATH, else $(go env GOPATH)/bin/nats)
#   CI               if "true", a missing nats CLI is a failure instead of a skip
#
# Prints a markdown table (workload | nats-server default | nats-server
# sync_interval=always | jetraft | jetraft/default | jetraft/always), sync
# publish p50/p99 latency rows, jetraft's WAL fsyncs per message (from /varz),
# the machine and the exact commands; then "N passed, M failed" where each
# server start and each (workload, server, run) that completed and checked out
# is a pass.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MSGS=100000
SYNC_MSGS=2000
SIZE=128
BATCH=256 # async publish: outstanding acks per batch
parse_bench_args msgs=MSGS sync-msgs=SYNC_MSGS -- "$@"
# --smoke counts; RUNS; RUN_TIMEOUT bounds every nats bench call
bench_defaults 60 600 MSGS=2000 SYNC_MSGS=200

# ------------------------------------------------------------- binaries ----
require_nats_cli
resolve_bench_servers

# ------------------------------------------------------------ processes ----
setup_tmp jetraft-jsbench

varz() { curl -fsS --max-time 2 "http://127.0.0.1:$1/varz" 2>/dev/null || true; }

SERVER_KEYS=(ref refsync jr)
declare -A NAME=([ref]="nats-server default" [refsync]="nats-server sync_interval=always" [jr]="$JR_LABEL")
declare -A PORT=() MON=()
# every server process is bounded too: generous, but finite
SERVER_BOUND=$((RUNS * 3 * (RUN_TIMEOUT + 60) + 600))
url_of() { echo "nats://127.0.0.1:${PORT[$1]}"; } # url_of KEY
NC() { nats_at "$(url_of "$1")" "${@:2}"; }      # NC KEY ARGS...: the nats CLI against server KEY

# start_bench_server KEY -> PORT[KEY], MON[KEY]; waits until JetStream answers
start_bench_server() {
    local key=$1 port mon pid dir=$TMP/store-$1
    { read -r port; read -r mon; } < <(free_ports 2)
    mkdir -p "$dir"
    case $key in
    ref) set -- "$REF_BIN" -a 127.0.0.1 -p "$port" -m "$mon" -js -sd "$dir" ;;
    refsync)
        cat >"$TMP/refsync.conf" <<EOF
jetstream {
  store_dir: "$dir"
  sync_interval: always
}
EOF
        set -- "$REF_BIN" -c "$TMP/refsync.conf" -a 127.0.0.1 -p "$port" -m "$mon"
        ;;
    jr) set -- "$JR_BIN" -a 127.0.0.1 -p "$port" -m "$mon" -js -sd "$dir" ;;
    esac
    spawn "$TMP/server-$key.log" timeout -k 5 "$SERVER_BOUND" "$@"
    pid=$SPAWNED_PID
    track_server_child "$pid" || true
    PORT[$key]=$port
    MON[$key]=$mon
    if ! wait_port "$pid" "$port"; then
        show_tail "$TMP/server-$key.log" 20 || true
        return 1
    fi
    wait_js_info "$(url_of "$key")" 30 0.5 "$pid" && return 0
    echo "      $key: JetStream never answered \$JS.API.INFO (last reply: ${JS_INFO_REPLY:-none})"
    show_tail "$TMP/server-$key.log" 20 || true
    return 1
}

# wal_counters KEY -> "fsyncs appends batches writes" from /varz jetstream.wal, or nothing
wal_counters() {
    json_get "$(varz "${MON[$1]}")" \
        '" ".join(str(int(d["jetstream"]["wal"][k])) for k in ("fsyncs", "appends", "batches", "writes"))'
}

# ------------------------------------------------------------ workloads ----
declare -A R=()     # R[wid:key] = space-separated values, run order
declare -A FSYNC=() # per run: "dfsyncs dappends dbatches dwrites"
WAL_MISSING=0

# run_async KEY RUN -> async publish into a fresh R1 file stream A<run>
run_async() {
    local key=$1 run=$2 st="A$2" subj="js.async.r$2" what="${NAME[$1]}: async publish (run $2)" out before after
    out="$TMP/async-$key-r$run.out"
    [[ $key == jr ]] && before=$(wal_counters jr)
    run_bench "$(url_of "$key")" "$out" js pub async "$subj" --stream "$st" --create --storage file --replicas 1 \
        --clients 1 --msgs "$MSGS" --size "$SIZE" --batch "$BATCH"
    [[ $key == jr ]] && after=$(wal_counters jr)
    bench_rate "$what" "$out" || return 1
    check_stream_msgs "$what" "$(url_of "$key")" "$st" || return 1
    R[async:$key]+="$RATE "
    pass "$what: $(commas "$RATE") msgs/s, stream holds $STREAM_MSGS"
    if [[ $key == jr ]]; then
        if [[ -n $before && -n $after ]]; then
            local b a
            read -r -a b <<<"$before"
            read -r -a a <<<"$after"
            FSYNC[$run]="$((a[0] - b[0])) $((a[1] - b[1])) $((a[2] - b[2])) $((a[3] - b[3]))"
        else
            WAL_MISSING=1
        fi
    fi
}

# run_fetch KEY RUN -> durable pull consumer (fetch), explicit acks, of stream A<run>
run_fetch() {
    local key=$1 run=$2 st="A$2" what="${NAME[$1]}: fetch + explicit ack (run $2)" out
    out="$TMP/fetch-$key-r$run.out"
    run_bench "$(url_of "$key")" "$out" js fetch --stream "$st" --acks explicit --clients 1 --msgs "$MSGS" --size "$SIZE"
    bench_rate "$what" "$out" || return 1
    check_acked "$what" "$(url_of "$key")" "$st" || return 1
    R[fetch:$key]+="$RATE "
    pass "$what: $(commas "$RATE") msgs/s, ack floor $ACK_FLOOR"
}

# run_sync KEY RUN -> sync publish into a fresh R1 file stream S<run>
run_sync() {
    local key=$1 run=$2 st="S$2" subj="js.sync.r$2" what="${NAME[$1]}: sync publish (run $2)" out
    out="$TMP/sync-$key-r$run.out"
    run_bench "$(url_of "$key")" "$out" js pub sync "$subj" --stream "$st" --create --storage file --replicas 1 \
        --clients 1 --msgs "$SYNC_MSGS" --size "$SIZE"
    bench_sync_stats "$what" "$out" || return 1
    R[sync:$key]+="$RATE "
    R[p50:$key]+="$P50 "
    R[p99:$key]+="$P99 "
    pass "$what: $(commas "$RATE") msgs/s, p50 ${P50} µs, p99 ${P99} µs"
}

drop_streams() { # not measured; keeps later runs from carrying earlier streams
    local key=$1 run=$2 st
    for st in "A$run" "S$run"; do
        NC "$key" stream rm -f "$st" >"$TMP/rm-$key-$st.out" 2>&1 ||
            echo "      NOTE: ${NAME[$key]}: deleting stream $st failed: $(tail -n 1 "$TMP/rm-$key-$st.out")"
    done
}

# ------------------------------------------------------------------ run ----
echo "== jetstream bench: msgs=$MSGS sync-msgs=$SYNC_MSGS size=$SIZE batch=$BATCH runs=$RUNS smoke=$SMOKE timeout=${RUN_TIMEOUT}s"
echo "   reference:  $REF_BIN ($REF_VERSION)"
echo "   under test: $JR_BIN ($JR_VERSION)"
echo "   nats CLI:   $NATS ($NATS_VERSION)"
for key in "${SERVER_KEYS[@]}"; do
    if start_bench_server "$key"; then
        pass "${NAME[$key]} listening on 127.0.0.1:${PORT[$key]} (monitoring :${MON[$key]}), JetStream ready"
    else
        fail "${NAME[$key]} did not start"
        report
        exit 1
    fi
done
# the config key really took effect: nats-server reports it in /varz
sa=$(json_get "$(varz "${MON[refsync]}")" 'd["jetstream"]["config"].get("sync_always", False)')
if [[ $sa == True ]]; then
    pass "nats-server sync_interval=always: /varz jetstream.config.sync_always is true"
else
    fail "nats-server sync_interval=always: /varz jetstream.config.sync_always is '${sa:-missing}'"
fi
sa=$(json_get "$(varz "${MON[ref]}")" 'd["jetstream"]["config"].get("sync_always", False)')
[[ $sa == False ]] || echo "WARNING: nats-server default reports sync_always=$sa"

for ((run = 1; run <= RUNS; run++)); do
    # rotate who goes first: run 1 ref refsync jr, run 2 refsync jr ref, ...
    order=()
    for ((i = 0; i < 3; i++)); do order+=("${SERVER_KEYS[$(((run - 1 + i) % 3))]}"); done
    echo "-- run $run/$RUNS: ${order[*]}"
    for key in "${order[@]}"; do
        if run_async "$key" "$run"; then
            run_fetch "$key" "$run" || true
        else
            fail "${NAME[$key]}: fetch + explicit ack (run $run): skipped, the async publish failed"
        fi
        run_sync "$key" "$run" || true
        drop_streams "$key" "$run"
    done
done

# ---------------------------------------------------------------- report ----
# id | label
ROWSPEC=(
    "async|JetStream async publish, R1 file stream, 128 B, batch $BATCH (msgs/s)"
    "sync|JetStream sync publish, R1 file stream, 128 B (msgs/s)"
    "p50|sync publish latency p50 (µs, lower is better)"
    "p99|sync publish latency p99 (µs, lower is better)"
    "fetch|pull consumer (fetch), explicit acks, reading back the async stream (msgs/s)"
)
spec_rows ref refsync jr

fsync_line="n/a"
fsync_runs=""
if ((${#FSYNC[@]})); then
    per=()
    for ((run = 1; run <= RUNS; run++)); do
        [[ -n ${FSYNC[$run]:-} ]] || continue
        read -r df da db dw <<<"${FSYNC[$run]}"
        v=$(awk -v f="$df" -v n="$MSGS" 'BEGIN{printf "%.4f", f/n}')
        per+=("$v")
        fsync_runs+="${fsync_runs:+; }run $run: Δfsyncs=$df Δappends=$da Δbatches=$db Δwrites=$dw → $v fsyncs/msg, $(awk -v f="$df" -v n="$MSGS" 'BEGIN{ if (f > 0) printf "%.1f", n/f; else printf "∞" }') msgs/fsync"
    done
    fsync_line=$(median "${per[@]}")
fi
if ((WAL_MISSING)); then
    echo "NOTE: $JR_LABEL's /varz has no jetstream.wal counters (this binary predates them, or SERVER_BIN is not jetraft): fsyncs/message is n/a"
fi

fs=$(store_fs "$TMP")
echo
echo "### JetStream (median of $RUNS run(s); async publish $(commas "$MSGS") msgs, sync publish $(commas "$SYNC_MSGS") msgs)"
echo
md_table "| workload | nats-server default | nats-server sync_interval=always | $JR_LABEL | $JR_LABEL / default | $JR_LABEL / always |" \
    "|---|---:|---:|---:|---:|---:|" "${ROWS[@]}"
echo
echo "$JR_LABEL WAL fsyncs per message during the async publish (Δ /varz jetstream.wal.fsyncs ÷ $(commas "$MSGS") msgs, median): $fsync_line"
[[ -n $fsync_runs ]] && echo "  ($fsync_runs)"
all_runs_table "All runs (in run order; the servers rotate who goes first):" \
    "| workload | nats-server default | nats-server sync_interval=always | $JR_LABEL |" "|---|---|---|---|"
echo
machine_line "; store dirs on ${fs:-unknown fs} (shared by all three servers, clients on the same machine)"
echo "Servers (each on free loopback ports, fresh store dir, started once, up for all runs):"
echo "  - nats-server default:               $REF_BIN -a 127.0.0.1 -p <port> -m <http_port> -js -sd <dir>    ($REF_VERSION)"
echo "  - nats-server sync_interval=always:  $REF_BIN -c <conf> -a 127.0.0.1 -p <port> -m <http_port>    with <conf> = jetstream { store_dir: \"<dir>\", sync_interval: always }"
echo "  - $JR_LABEL:                           $JR_BIN -a 127.0.0.1 -p <port> -m <http_port> -js -sd <dir>    (${JR_VERSION:-no --version})"
echo "Client: $NATS ($NATS_VERSION); every call is nats --no-context --server nats://127.0.0.1:<port> bench js ... --no-progress"
echo "Per server and run r (in this order; streams A<r> and S<r> are deleted afterwards):"
echo "  1. bench js pub async js.async.r<r> --stream A<r> --create --storage file --replicas 1 --clients 1 --msgs $MSGS --size $SIZE --batch $BATCH"
echo "     ($JR_LABEL: GET /varz before and after; then stream info checks A<r> holds $MSGS messages)"
echo "  2. bench js fetch --stream A<r> --acks explicit --clients 1 --msgs $MSGS --size $SIZE    (durable consumer nats-bench, fetch batch 500; then consumer info checks ack floor = $MSGS, 0 pending)"
echo "  3. bench js pub sync js.sync.r<r> --stream S<r> --create --storage file --replicas 1 --clients 1 --msgs $SYNC_MSGS --size $SIZE    (msgs/s, P50/P99 of its per-message latencies)"
command_line
((SMOKE)) && echo "(smoke run: tiny message counts, numbers are meaningless)"

# server-side complaints, for the record (not counted)
for key in "${SERVER_KEYS[@]}"; do
    n=$(grep -cE '\[(ERR|WRN|FTL)\]| ERROR | WARN |panicked' "$TMP/server-$key.log" 2>/dev/null || true)
    if ((${n:-0} > 0)); then
        echo
        echo "${NAME[$key]} logged $n error/warning line(s); first distinct ones:"
        grep -E '\[(ERR|WRN|FTL)\]| ERROR | WARN |panicked' "$TMP/server-$key.log" |
            sed -E 's/^[0-9TZ:. -]+//; s/^\[[0-9]+\] [0-9\/]+ [0-9:.]+ //' | sort | uniq -c | sort -rn | head -n 8 | sed 's/^/  /'
    fi
done
bench_finish

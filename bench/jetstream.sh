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

source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
ORIG_ARGS=("$@")

MSGS=100000
SYNC_MSGS=2000
SMOKE=0
RUNS=""
RUN_TIMEOUT=""
KEEP_LOGS=0
SIZE=128
BATCH=256 # async publish: outstanding acks per batch
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case $1 in
    --msgs) MSGS=${2:?--msgs needs a number}; shift 2 ;;
    --msgs=*) MSGS=${1#*=}; shift ;;
    --sync-msgs) SYNC_MSGS=${2:?--sync-msgs needs a number}; shift 2 ;;
    --sync-msgs=*) SYNC_MSGS=${1#*=}; shift ;;
    --smoke) SMOKE=1; shift ;;
    --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
    --runs=*) RUNS=${1#*=}; shift ;;
    --timeout) RUN_TIMEOUT=${2:?--timeout needs seconds}; shift 2 ;;
    --timeout=*) RUN_TIMEOUT=${1#*=}; shift ;;
    --keep-logs) KEEP_LOGS=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
    esac
done
if ((SMOKE)); then
    MSGS=2000
    SYNC_MSGS=200
    RUNS=${RUNS:-1}
fi
RUNS=${RUNS:-3}
[[ $MSGS =~ ^[1-9][0-9]*$ && $SYNC_MSGS =~ ^[1-9][0-9]*$ && $RUNS =~ ^[1-9][0-9]*$ ]] ||
    { echo "--msgs/--sync-msgs/--runs must be positive integers" >&2; exit 2; }
[[ -n $RUN_TIMEOUT ]] || { if ((SMOKE)); then RUN_TIMEOUT=60; else RUN_TIMEOUT=600; fi; }
[[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "--timeout must be a positive integer" >&2; exit 2; }

# ------------------------------------------------------------- binaries ----
if ! NATS=$(find_nats); then
    skip_banner "SKIP: nats CLI not installed" "      go install github.com/nats-io/natscli/nats@v0.5.0"
    skip_exit
fi
resolve_bench_servers
NATS_VERSION=$(timeout 10 "$NATS" --version 2>&1 | head -n 1 || true)

# ------------------------------------------------------------ processes ----
setup_tmp jetraft-jsbench
# Servers run as `timeout BOUND server ...` so that even a SIGKILLed script
# leaves nothing running for long; SRV_CHILD maps the timeout wrapper to the
# server itself, which is stopped first (TERM, then KILL after 5 s).
declare -A SRV_CHILD=()
stop_server_pid() {
    local wrapper=$1 child=${SRV_CHILD[$1]:-}
    [[ -n $child ]] && stop_pid "$child"
    stop_pid "$wrapper"
}
# replaces lib.sh's cleanup (which the EXIT trap calls): servers are stopped
# through stop_server_pid
cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        if [[ -n ${SRV_CHILD[$p]:-} ]]; then stop_server_pid "$p"; else stop_pid "$p"; fi
    done
    if ((KEEP_LOGS)); then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}

# json_get JSON PYEXPR: evaluates PYEXPR with d = the parsed JSON; prints
# nothing if the JSON does not parse or the expression fails
json_get() {
    python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[1])
    v = eval(sys.argv[2])
    if v is not None:
        print(v)
except Exception:
    pass' "$1" "$2" 2>/dev/null || true
}
varz() { curl -fsS --max-time 2 "http://127.0.0.1:$1/varz" 2>/dev/null || true; }

SERVER_KEYS=(ref refsync jr)
declare -A NAME=([ref]="nats-server default" [refsync]="nats-server sync_interval=always" [jr]="$JR_LABEL")
declare -A PORT=() MON=() WRAPPER=() SERVER_CMD=()
# every server process is bounded too: generous, but finite
SERVER_BOUND=$((RUNS * 3 * (RUN_TIMEOUT + 60) + 600))
NC() { # NC KEY ARGS...: the nats CLI against server KEY, with a short request timeout
    local key=$1
    shift
    timeout -k 5 30 "$NATS" --no-context --server "nats://127.0.0.1:${PORT[$key]}" --timeout 5s "$@"
}

# start_bench_server KEY -> PORT[KEY], MON[KEY]
start_bench_server() {
    local key=$1 port mon pid i child dir=$TMP/store-$1 r
    port=$(free_port)
    mon=$(free_port)
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
    SERVER_CMD[$key]="$*"
    timeout -k 5 "$SERVER_BOUND" "$@" >"$TMP/server-$key.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    WRAPPER[$key]=$pid
    for ((i = 0; i < 50; i++)); do # the server under the wrapper
        child=$(pgrep -P "$pid" | head -n 1 || true)
        [[ -n $child ]] && break
        alive "$pid" || break
        sleep 0.05
    done
    SRV_CHILD[$pid]=${child:-}
    PORT[$key]=$port
    MON[$key]=$mon
    if ! wait_port "$pid" "$port"; then
        tail -n 20 "$TMP/server-$key.log" | sed 's/^/      | /' || true
        return 1
    fi
    # JetStream ready: the account info request is answered without an error
    for ((i = 0; i < 60; i++)); do # up to ~30 s
        alive "$pid" || break
        r=$(NC "$key" req '$JS.API.INFO' '' --raw 2>/dev/null || true)
        if [[ $r == *account_info_response* && $r != *'"error"'* ]]; then return 0; fi
        sleep 0.5
    done
    echo "      $key: JetStream never answered \$JS.API.INFO (last reply: ${r:-none})"
    tail -n 20 "$TMP/server-$key.log" | sed 's/^/      | /' || true
    return 1
}

rate_of() { # last "stats: 1,234 msgs/sec" in a nats bench output
    grep -oE 'stats: [0-9,]+ msgs/sec' "$1" 2>/dev/null | tail -n 1 | grep -oE '[0-9,]+' | tr -d , || true
}
pct_of() { # pct_of FILE P50|P99 -> microseconds (decimal, no commas)
    grep -E 'stats: [0-9,]+ msgs/sec' "$1" 2>/dev/null | tail -n 1 |
        grep -oE "$2: [0-9,.]+us" | sed -E 's/^[^:]*: //; s/us$//' | tr -d , || true
}
show_tail() { sed 's/^/      | /' "$1" | tail -n "${2:-8}"; }

# run_bench KEY OUT ARGS...: a bounded `nats bench js ...`; BENCH_RC
BENCH_RC=0
run_bench() {
    local key=$1 out=$2
    shift 2
    BENCH_RC=0
    timeout -k 5 "$RUN_TIMEOUT" "$NATS" --no-context --server "nats://127.0.0.1:${PORT[$key]}" \
        bench js "$@" --no-progress >"$out" 2>&1 || BENCH_RC=$?
}

# wal_counters KEY -> "fsyncs appends batches writes" from /varz jetstream.wal, or nothing
wal_counters() {
    json_get "$(varz "${MON[$1]}")" \
        '" ".join(str(int(d["jetstream"]["wal"][k])) for k in ("fsyncs", "appends", "batches", "writes"))'
}

# ------------------------------------------------------------ workloads ----
declare -A R=()       # R[wid:key] = space-separated values, run order
declare -A FSYNC=()   # per run: "dfsyncs dappends dbatches dwrites"
WAL_MISSING=0

# run_async KEY RUN -> async publish into a fresh R1 file stream A<run>
run_async() {
    local key=$1 run=$2 st="A$2" subj="js.async.r$2" out before after n rate
    out="$TMP/async-$key-r$run.out"
    [[ $key == jr ]] && before=$(wal_counters jr)
    run_bench "$key" "$out" pub async "$subj" --stream "$st" --create --storage file --replicas 1 \
        --clients 1 --msgs "$MSGS" --size "$SIZE" --batch "$BATCH"
    [[ $key == jr ]] && after=$(wal_counters jr)
    if ((BENCH_RC != 0)); then
        fail "${NAME[$key]}: async publish (run $run): nats bench exited $BENCH_RC"
        show_tail "$out"
        return 1
    fi
    rate=$(rate_of "$out")
    [[ -n $rate ]] || { fail "${NAME[$key]}: async publish (run $run): no msgs/sec in output"; show_tail "$out"; return 1; }
    n=$(json_get "$(NC "$key" stream info "$st" --json 2>/dev/null || true)" 'd["state"]["messages"]')
    if [[ $n != "$MSGS" ]]; then
        fail "${NAME[$key]}: async publish (run $run): stream $st holds ${n:-?} messages, expected $MSGS"
        return 1
    fi
    R[async:$key]+="$rate "
    pass "${NAME[$key]}: async publish (run $run): $(commas "$rate") msgs/s, stream holds $n"
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
    local key=$1 run=$2 st="A$2" out rate i ci floor pending
    out="$TMP/fetch-$key-r$run.out"
    run_bench "$key" "$out" fetch --stream "$st" --acks explicit --clients 1 --msgs "$MSGS" --size "$SIZE"
    if ((BENCH_RC != 0)); then
        fail "${NAME[$key]}: fetch + explicit ack (run $run): nats bench exited $BENCH_RC"
        show_tail "$out"
        return 1
    fi
    rate=$(rate_of "$out")
    [[ -n $rate ]] || { fail "${NAME[$key]}: fetch + explicit ack (run $run): no msgs/sec in output"; show_tail "$out"; return 1; }
    # the acks are sent asynchronously: wait (bounded) until the server has
    # applied all of them (the consumer goes away 10 s after it goes idle)
    for ((i = 0; i < 25; i++)); do
        ci=$(NC "$key" consumer info "$st" nats-bench --json 2>/dev/null || true)
        floor=$(json_get "$ci" 'd["ack_floor"]["stream_seq"]')
        pending=$(json_get "$ci" 'd["num_ack_pending"]')
        [[ $floor == "$MSGS" && $pending == 0 ]] && break
        sleep 0.2
    done
    if [[ $floor != "$MSGS" || $pending != 0 ]]; then
        fail "${NAME[$key]}: fetch + explicit ack (run $run): ack floor ${floor:-?}/$MSGS, ${pending:-?} acks pending"
        return 1
    fi
    R[fetch:$key]+="$rate "
    pass "${NAME[$key]}: fetch + explicit ack (run $run): $(commas "$rate") msgs/s, ack floor $floor"
}

# run_sync KEY RUN -> sync publish into a fresh R1 file stream S<run>
run_sync() {
    local key=$1 run=$2 st="S$2" subj="js.sync.r$2" out rate p50 p99
    out="$TMP/sync-$key-r$run.out"
    run_bench "$key" "$out" pub sync "$subj" --stream "$st" --create --storage file --replicas 1 \
        --clients 1 --msgs "$SYNC_MSGS" --size "$SIZE"
    if ((BENCH_RC != 0)); then
        fail "${NAME[$key]}: sync publish (run $run): nats bench exited $BENCH_RC"
        show_tail "$out"
        return 1
    fi
    rate=$(rate_of "$out")
    p50=$(pct_of "$out" P50)
    p99=$(pct_of "$out" P99)
    if [[ -z $rate || -z $p50 || -z $p99 ]]; then
        fail "${NAME[$key]}: sync publish (run $run): no msgs/sec or P50/P99 in output"
        show_tail "$out"
        return 1
    fi
    R[sync:$key]+="$rate "
    R[p50:$key]+="$p50 "
    R[p99:$key]+="$p99 "
    pass "${NAME[$key]}: sync publish (run $run): $(commas "$rate") msgs/s, p50 ${p50} µs, p99 ${p99} µs"
}

drop_streams() { # not measured; keeps later runs from carrying earlier streams
    local key=$1 run=$2 st
    for st in "A$run" "S$run"; do
        NC "$key" stream rm -f "$st" >"$TMP/rm-$key-$st.out" 2>&1 ||
            echo "      NOTE: ${NAME[$key]}: deleting stream $st failed: $(tail -n 1 "$TMP/rm-$key-$st.out")"
    done
}

commas() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }
median() { # median of the numeric arguments (lower middle for an even count); nothing if none
    (($#)) || return 0
    printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'
}
runs_cell() { # every run's value, in run order
    local v out=""
    for v in "$@"; do out+="${out:+, }$(commas "$v")"; done
    echo "${out:-FAIL}"
}
cell() { if [[ -n $1 ]]; then commas "$1"; else echo FAIL; fi; }
ratio() { # ratio A B = A/B with 2 decimals, n/a if either is missing
    if [[ -n $1 && -n $2 && $2 != 0 && $2 != 0.0 ]]; then awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; else echo n/a; fi
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
ROWS=()
ALLRUNS=()
for spec in "${ROWSPEC[@]}"; do
    IFS='|' read -r wid label <<<"$spec"
    ref=$(median ${R[$wid:ref]:-}) rs=$(median ${R[$wid:refsync]:-}) jr=$(median ${R[$wid:jr]:-})
    ROWS+=("| $label | $(cell "$ref") | $(cell "$rs") | $(cell "$jr") | $(ratio "$jr" "$ref") | $(ratio "$jr" "$rs") |")
    ALLRUNS+=("| $label | $(runs_cell ${R[$wid:ref]:-}) | $(runs_cell ${R[$wid:refsync]:-}) | $(runs_cell ${R[$wid:jr]:-}) |")
done

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

cpu=$(grep -m1 -E '^(model name|Model|cpu model)' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
fs=$(df -PT "$TMP" 2>/dev/null | awk 'NR==2{print $2" on "$1}' || true)
echo
echo "### JetStream (median of $RUNS run(s); async publish $(commas "$MSGS") msgs, sync publish $(commas "$SYNC_MSGS") msgs)"
echo
echo "| workload | nats-server default | nats-server sync_interval=always | $JR_LABEL | $JR_LABEL / default | $JR_LABEL / always |"
echo "|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${ROWS[@]}"
echo
echo "$JR_LABEL WAL fsyncs per message during the async publish (Δ /varz jetstream.wal.fsyncs ÷ $(commas "$MSGS") msgs, median): $fsync_line"
[[ -n $fsync_runs ]] && echo "  ($fsync_runs)"
if ((RUNS > 1)); then
    echo
    echo "All runs (in run order; the servers rotate who goes first):"
    echo
    echo "| workload | nats-server default | nats-server sync_interval=always | $JR_LABEL |"
    echo "|---|---|---|---|"
    printf '%s\n' "${ALLRUNS[@]}"
fi
echo
echo "Machine: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr); store dirs on ${fs:-unknown fs} (shared by all three servers, clients on the same machine)"
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
envs=""
[[ -n ${SERVER_BIN:-} ]] && envs+="SERVER_BIN=$(printf %q "$SERVER_BIN") "
[[ -n ${NATS_SERVER_BIN:-} ]] && envs+="NATS_SERVER_BIN=$(printf %q "$NATS_SERVER_BIN") "
cmd="${envs}bench/jetstream.sh"
((${#ORIG_ARGS[@]})) && cmd+=" $(printf '%q ' "${ORIG_ARGS[@]}")"
echo "Command (from the repo root): ${cmd% }"
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
echo
report
((FAILED == 0))

#!/usr/bin/env bash
# Three-node clusters side by side: a 3-node jetraft cluster against a 3-node
# nats-server 2.15 cluster (default settings), same run, same client, R3 file
# streams, everything on free loopback ports. See bench/README.md.
#
#   bench/cluster.sh [--msgs N] [--sync-msgs N] [--runs R] [--smoke] [--timeout SECS] [--keep-logs]
#
#   --msgs N       messages for the async publish (and for the pull consume
#                  that reads them back) (default 100000)
#   --sync-msgs N  messages for the sync publish latency workload (default 2000)
#   --runs R       repetitions per server, reported as the median; every run
#                  starts a fresh cluster; the servers alternate who goes
#                  first (default 3)
#   --smoke        2000 async msgs, 200 sync, 1 run unless --runs: only proves
#                  the script works (CI)
#   --timeout S    bound for each nats bench / failover client (default 600, smoke 90)
#   --keep-logs    keep the temp dir with all server and client output
#
# Environment:
#   SERVER_BIN       jetraft binary (default target/release/jetraft, relative to
#                    the repo root); a bare name is looked up on PATH.
#   NATS_SERVER_BIN  reference server (default nats-server on PATH; 2.15.x expected)
#   NATS_BIN         nats CLI (default nats on PATH, else $(go env GOPATH)/bin/nats)
#   PYTHON           python3 with nats-py, for bench/failover_gap.py (default python3)
#   CI               if "true", a missing nats CLI / nats-py is a failure instead of a skip
#
# Per server and run: start 3 nodes (n1 n2 n3, each with the full route list),
# then, with the client connected to the node leading the stream in question:
#   1. nats bench js pub async into a fresh R3 file stream A<r> (128 B, --batch 256)
#   2. nats bench js fetch of A<r> with explicit acks
#   3. nats bench js pub sync into a fresh R3 file stream S<r> (msgs/s, p50, p99)
#   4. failover gap: bench/failover_gap.py publishes synchronously into R3 stream
#      F<r> (Nats-Msg-Id, retry every 20 ms) through the two followers and
#      kill -9's the leader (jetraft: found with /jsz; nats-server: with
#      `nats stream info --json` cluster.leader); reported: seconds from the
#      kill to the next PubAck.
# Prints a markdown table (workload | nats-server | jetraft | jetraft/nats-server),
# the machine and the exact commands; then "N passed, M failed" where each
# cluster start and each (workload, server, run) that completed and checked out
# is a pass.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
ORIG_ARGS=("$@")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

MSGS=100000
SYNC_MSGS=2000
SMOKE=0
RUNS=""
RUN_TIMEOUT=""
KEEP_LOGS=0
SIZE=128
BATCH=256
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
[[ -n $RUN_TIMEOUT ]] || { if ((SMOKE)); then RUN_TIMEOUT=90; else RUN_TIMEOUT=600; fi; }
[[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "--timeout must be a positive integer" >&2; exit 2; }

# ------------------------------------------------------------- binaries ----
if ! NATS=$(find_nats); then
    skip_banner "SKIP: nats CLI not installed" "      go install github.com/nats-io/natscli/nats@v0.5.0"
    skip_exit "nats CLI is required when CI=true"
fi
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import nats' 2>/dev/null; then
    skip_banner "SKIP: nats-py not installed for $PYTHON" "      pip install nats-py"
    skip_exit "nats-py is required when CI=true"
fi
resolve_bench_servers
NATS_VERSION=$(timeout 10 "$NATS" --version 2>&1 | head -n 1 || true)

# ------------------------------------------------------------ processes ----
setup_tmp jetraft-clbench
# Nodes run as `timeout BOUND server ...` so that even a SIGKILLed script
# leaves nothing running for long; SRV_CHILD maps the wrapper to the server
# itself (the PID that kill -9 targets), which is stopped first.
declare -A SRV_CHILD=()
stop_server_pid() {
    local wrapper=$1 child=${SRV_CHILD[$1]:-}
    [[ -n $child ]] && stop_pid "$child"
    stop_pid "$wrapper"
}
cleanup() { # replaces lib.sh's (the EXIT trap calls it)
    local p
    for p in "${PIDS[@]}"; do
        if [[ -n ${SRV_CHILD[$p]:-} ]]; then stop_server_pid "$p"; else stop_pid "$p"; fi
    done
    if ((KEEP_LOGS)); then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}

json_get() { # json_get JSON PYEXPR (d = parsed JSON); prints nothing on any error
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

KEYS=(ref jr)
declare -A NAME=([ref]="nats-server" [jr]="$JR_LABEL")
declare -A BIN=([ref]="$REF_BIN" [jr]="$JR_BIN")
# per node "KEY:I": client port, monitor port, cluster port, wrapper pid, server pid
declare -A CPORT=() HPORT=() CLPORT=() WRAP=() CHILD=()
SERVER_BOUND=$((4 * RUN_TIMEOUT + 600))
NODES=(1 2 3)
url_of() { echo "nats://127.0.0.1:${CPORT[$1:$2]}"; } # url_of KEY I
NC() {                                                 # NC KEY I ARGS...: bounded nats CLI against node I
    local key=$1 i=$2
    shift 2
    timeout -k 5 30 "$NATS" --no-context --server "$(url_of "$key" "$i")" --timeout 5s "$@"
}
jsz() { curl -fsS --max-time 2 "http://127.0.0.1:${HPORT[$1:$2]}/jsz?streams=true" 2>/dev/null || true; }
# jsz_meta_leader KEY I: meta leader as node I sees it (jetraft meta_leader, nats-server meta_cluster.leader)
jsz_meta_leader() {
    json_get "$(jsz "$1" "$2")" 'd["meta_leader"] if "meta_leader" in d else d["meta_cluster"]["leader"]'
}
# jsz_last_seq KEY I STREAM: node I's local replica last_seq (jetraft: streams[]; nats-server: account_details[].stream_detail[])
jsz_last_seq() {
    json_get "$(jsz "$1" "$2")" "next(s['last_seq'] for s in d['streams'] if s['name'] == '$3') if isinstance(d.get('streams'), list) else next(s['state']['last_seq'] for a in d['account_details'] for s in a.get('stream_detail') or [] if s['name'] == '$3')"
}

# start_cluster KEY RUN: 3 nodes, wait for client ports, meta leader, $JS.API.INFO
start_cluster() {
    local key=$1 run=$2 i routes pid child k dir r deadline ml
    for i in "${NODES[@]}"; do
        CPORT[$key:$i]=$(free_port)
        HPORT[$key:$i]=$(free_port)
        CLPORT[$key:$i]=$(free_port)
    done
    routes="nats-route://127.0.0.1:${CLPORT[$key:1]},nats-route://127.0.0.1:${CLPORT[$key:2]},nats-route://127.0.0.1:${CLPORT[$key:3]}"
    CLUSTER_CMD[$key]="${BIN[$key]} -a 127.0.0.1 -p <port> -m <http_port> -js -sd <dir> -n n<i> --cluster_name ${key}bench --cluster nats://127.0.0.1:<cluster_port> --routes $(sed -E 's/:[0-9]+/:<cp>/g' <<<"$routes")"
    for i in "${NODES[@]}"; do
        dir=$TMP/$key-r$run/n$i
        mkdir -p "$dir"
        timeout -k 5 "$SERVER_BOUND" "${BIN[$key]}" -a 127.0.0.1 -p "${CPORT[$key:$i]}" -m "${HPORT[$key:$i]}" \
            -js -sd "$dir" -n "n$i" --cluster_name "${key}bench" --cluster "nats://127.0.0.1:${CLPORT[$key:$i]}" \
            --routes "$routes" >"$TMP/$key-r$run-n$i.log" 2>&1 &
        pid=$!
        # no "Killed" job notice when the failover kill -9's the server (the
        # wrapper re-raises the signal); bash still reaps it
        disown "$pid" 2>/dev/null || true
        PIDS+=("$pid")
        WRAP[$key:$i]=$pid
    done
    # a node's startup blocks until every route answered: all three started, now wait
    for i in "${NODES[@]}"; do
        pid=${WRAP[$key:$i]}
        deadline=$((SECONDS + 30))
        until (exec 3<>"/dev/tcp/127.0.0.1/${CPORT[$key:$i]}") 2>/dev/null; do
            if ! alive "$pid" || ((SECONDS >= deadline)); then
                echo "      $key n$i: client port ${CPORT[$key:$i]} not accepting"
                tail -n 20 "$TMP/$key-r$run-n$i.log" | sed 's/^/      | /' || true
                return 1
            fi
            sleep 0.1
        done
        # the server under the wrapper (a PATH shim execs into it, same PID)
        child=$(pgrep -P "$pid" | head -n 1 || true)
        [[ -n $child ]] || { echo "      $key n$i: no server process under wrapper $pid"; return 1; }
        SRV_CHILD[$pid]=$child
        CHILD[$key:$i]=$child
    done
    deadline=$((SECONDS + 30))
    while :; do
        ml=()
        for i in "${NODES[@]}"; do ml+=("$(jsz_meta_leader "$key" "$i")"); done
        [[ -n ${ml[0]} && ${ml[0]} == "${ml[1]}" && ${ml[0]} == "${ml[2]}" ]] && break
        if ((SECONDS >= deadline)); then
            echo "      $key: no agreed meta leader within 30 s ('${ml[*]}')"
            return 1
        fi
        sleep 0.2
    done
    for i in "${NODES[@]}"; do
        deadline=$((SECONDS + 30))
        while :; do
            r=$(NC "$key" "$i" req '$JS.API.INFO' '' --raw 2>/dev/null || true)
            [[ $r == *account_info_response* && $r != *'"error"'* ]] && break
            if ((SECONDS >= deadline)); then
                echo "      $key n$i: JetStream never answered \$JS.API.INFO (last reply: ${r:-none})"
                return 1
            fi
            sleep 0.3
        done
    done
    META_LEADER[$key]=${ml[0]}
}
stop_cluster() {
    local key=$1 i
    for i in "${NODES[@]}"; do
        [[ -n ${WRAP[$key:$i]:-} ]] && stop_server_pid "${WRAP[$key:$i]}"
    done
}

# create_r3 KEY STREAM SUBJECT: via n1, retried (bounded) while placement settles
create_r3() {
    local key=$1 st=$2 subj=$3 out deadline=$((SECONDS + 30))
    while :; do
        if out=$(NC "$key" 1 stream add "$st" --subjects "$subj" --storage file --retention limits \
            --replicas 3 --defaults 2>&1) && grep -q "Stream $st was created" <<<"$out"; then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            echo "      ${NAME[$key]}: stream add $st --replicas 3 failed:"
            tail -n 5 <<<"$out" | sed 's/^/      | /'
            return 1
        fi
        sleep 0.5
    done
}
# stream_leader KEY STREAM -> LEADER_NODE (1..3): jetraft from /jsz (the node whose
# replica says leader), nats-server from `nats stream info --json` cluster.leader
LEADER_NODE=
stream_leader() {
    local key=$1 st=$2 deadline=$((SECONDS + 20)) i n name
    LEADER_NODE=
    while :; do
        if [[ $key == jr ]]; then
            n=0
            for i in "${NODES[@]}"; do
                alive "${CHILD[$key:$i]}" || continue
                if [[ $(json_get "$(jsz "$key" "$i")" "next(s['leader'] for s in d['streams'] if s['name'] == '$st')") == True ]]; then
                    n=$((n + 1))
                    LEADER_NODE=$i
                fi
            done
            ((n == 1)) && return 0
            LEADER_NODE=
        else
            for i in "${NODES[@]}"; do
                alive "${CHILD[$key:$i]}" || continue
                name=$(json_get "$(NC "$key" "$i" stream info "$st" --json 2>/dev/null || true)" 'd["cluster"]["leader"]')
                if [[ $name =~ ^n[123]$ ]]; then
                    LEADER_NODE=${name#n}
                    return 0
                fi
                break
            done
        fi
        ((SECONDS >= deadline)) && return 1
        sleep 0.2
    done
}

rate_of() { grep -oE 'stats: [0-9,]+ msgs/sec' "$1" 2>/dev/null | tail -n 1 | grep -oE '[0-9,]+' | tr -d , || true; }
pct_of() {
    grep -E 'stats: [0-9,]+ msgs/sec' "$1" 2>/dev/null | tail -n 1 |
        grep -oE "$2: [0-9,.]+us" | sed -E 's/^[^:]*: //; s/us$//' | tr -d , || true
}
show_tail() { sed 's/^/      | /' "$1" | tail -n "${2:-8}"; }
BENCH_RC=0
run_bench() { # run_bench KEY NODE OUT ARGS...
    local key=$1 node=$2 out=$3
    shift 3
    BENCH_RC=0
    timeout -k 5 "$RUN_TIMEOUT" "$NATS" --no-context --server "$(url_of "$key" "$node")" \
        bench js "$@" --no-progress >"$out" 2>&1 || BENCH_RC=$?
}

declare -A R=()  # R[wid:key] = values in run order
declare -A FO=() # failover details per key:run
declare -A CLUSTER_CMD=() META_LEADER=()
CLIENT_NOTE=()

# run_async KEY RUN
run_async() {
    local key=$1 run=$2 st="A$2" subj="js.async.r$2" out rate n ln i seqs ok
    out="$TMP/async-$key-r$run.out"
    create_r3 "$key" "$st" "$subj" || { fail "${NAME[$key]}: async publish (run $run): stream add $st failed"; return 1; }
    stream_leader "$key" "$st" || { fail "${NAME[$key]}: async publish (run $run): no leader for $st"; return 1; }
    ln=$LEADER_NODE
    A_NODE=$ln
    CLIENT_NOTE+=("${NAME[$key]} run $run: A$run leader n$ln")
    run_bench "$key" "$ln" "$out" pub async "$subj" --stream "$st" --clients 1 --msgs "$MSGS" --size "$SIZE" --batch "$BATCH"
    if ((BENCH_RC != 0)); then
        fail "${NAME[$key]}: async publish (run $run): nats bench exited $BENCH_RC"
        show_tail "$out"
        return 1
    fi
    rate=$(rate_of "$out")
    [[ -n $rate ]] || { fail "${NAME[$key]}: async publish (run $run): no msgs/sec in output"; show_tail "$out"; return 1; }
    n=$(json_get "$(NC "$key" "$ln" stream info "$st" --json 2>/dev/null || true)" 'd["state"]["messages"]')
    if [[ $n != "$MSGS" ]]; then
        fail "${NAME[$key]}: async publish (run $run): stream $st holds ${n:-?} messages, expected $MSGS"
        return 1
    fi
    R[async:$key]+="$rate "
    pass "${NAME[$key]}: async publish into R3 $st via leader n$ln (run $run): $(commas "$rate") msgs/s, stream holds $n"
    # every replica gets there (bounded): local last_seq on all three nodes
    for ((i = 0; i < 150; i++)); do
        seqs=() ok=1
        for n in "${NODES[@]}"; do
            seqs+=("$(jsz_last_seq "$key" "$n" "$st")")
            [[ ${seqs[-1]} == "$MSGS" ]] || ok=0
        done
        ((ok)) && break
        sleep 0.2
    done
    if ((ok)); then
        pass "${NAME[$key]}: all three replicas of $st at last_seq $MSGS (/jsz)"
    else
        fail "${NAME[$key]}: replicas of $st not at last_seq $MSGS after 30 s (/jsz n1..n3: ${seqs[*]})"
    fi
}

# run_fetch KEY RUN (client on the node that led A<r>)
run_fetch() {
    local key=$1 run=$2 st="A$2" out rate i ci floor pending
    out="$TMP/fetch-$key-r$run.out"
    run_bench "$key" "$A_NODE" "$out" fetch --stream "$st" --acks explicit --clients 1 --msgs "$MSGS" --size "$SIZE"
    if ((BENCH_RC != 0)); then
        fail "${NAME[$key]}: fetch + explicit ack (run $run): nats bench exited $BENCH_RC"
        show_tail "$out"
        return 1
    fi
    rate=$(rate_of "$out")
    [[ -n $rate ]] || { fail "${NAME[$key]}: fetch + explicit ack (run $run): no msgs/sec in output"; show_tail "$out"; return 1; }
    for ((i = 0; i < 25; i++)); do
        ci=$(NC "$key" "$A_NODE" consumer info "$st" nats-bench --json 2>/dev/null || true)
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
    pass "${NAME[$key]}: fetch + explicit ack of R3 $st via n$A_NODE (run $run): $(commas "$rate") msgs/s, ack floor $floor"
}

# run_sync KEY RUN
run_sync() {
    local key=$1 run=$2 st="S$2" subj="js.sync.r$2" out rate p50 p99 ln
    out="$TMP/sync-$key-r$run.out"
    create_r3 "$key" "$st" "$subj" || { fail "${NAME[$key]}: sync publish (run $run): stream add $st failed"; return 1; }
    stream_leader "$key" "$st" || { fail "${NAME[$key]}: sync publish (run $run): no leader for $st"; return 1; }
    ln=$LEADER_NODE
    run_bench "$key" "$ln" "$out" pub sync "$subj" --stream "$st" --clients 1 --msgs "$SYNC_MSGS" --size "$SIZE"
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
    pass "${NAME[$key]}: sync publish into R3 $st via leader n$ln (run $run): $(commas "$rate") msgs/s, p50 ${p50} µs, p99 ${p99} µs"
}

# run_failover KEY RUN: kill -9 of F<r>'s leader under a sync publisher on the followers
run_failover() {
    local key=$1 run=$2 st="F$2" subj="js.fo.r$2" out err ln pid urls n res gap
    out="$TMP/failover-$key-r$run.json"
    err="$TMP/failover-$key-r$run.err"
    create_r3 "$key" "$st" "$subj" || { fail "${NAME[$key]}: failover (run $run): stream add $st failed"; return 1; }
    stream_leader "$key" "$st" || { fail "${NAME[$key]}: failover (run $run): no leader for $st"; return 1; }
    ln=$LEADER_NODE
    pid=${CHILD[$key:$ln]}
    urls=
    for n in "${NODES[@]}"; do [[ $n == "$ln" ]] || urls+="${urls:+,}$(url_of "$key" "$n")"; done
    timeout -k 5 "$RUN_TIMEOUT" "$PYTHON" -u "$HERE/failover_gap.py" --servers "$urls" --stream "$st" \
        --subject "$subj" --kill-pid "$pid" --warmup-s 1.0 --after 50 --attempt-timeout 0.25 \
        --retry-every 0.02 --max-gap 30 --deadline $((RUN_TIMEOUT > 100 ? 90 : RUN_TIMEOUT - 10)) \
        >"$out" 2>"$err" || true
    res=$(tail -n 1 "$out" 2>/dev/null || true)
    if alive "$pid"; then
        fail "${NAME[$key]}: failover (run $run): leader n$ln (pid $pid) still alive"
        return 1
    fi
    gap=$(json_get "$res" '"%.3f" % d["gap_s"] if d["ok"] else None')
    if [[ -z $gap ]]; then
        fail "${NAME[$key]}: failover (run $run): killed leader n$ln: $(json_get "$res" 'd["error"]' || true)${res:+ ($res)}"
        sed 's/^/      | /' "$err" | tail -n 5
        return 1
    fi
    R[gap:$key]+="$gap "
    FO[$key:$run]="leader n$ln killed, new leader $(json_get "$res" 'd["new_leader"]'), $(json_get "$res" 'd["failed_attempts"]') failed attempts $(json_get "$res" 'json.dumps(d["errors"])'), $(json_get "$res" 'd["acked"]') acked = stream messages $(json_get "$res" 'd["stream_messages"]'); pre-kill sync p50 $(json_get "$res" 'd["pre_kill_p50_ms"]') ms"
    pass "${NAME[$key]}: failover (run $run): kill -9 of $st's leader n$ln → next PubAck after ${gap} s; ${FO[$key:$run]}"
}

commas() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }
median() {
    (($#)) || return 0
    printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'
}
runs_cell() {
    local v out=""
    for v in "$@"; do out+="${out:+, }$(commas "$v")"; done
    echo "${out:-FAIL}"
}
cell() { if [[ -n $1 ]]; then commas "$1"; else echo FAIL; fi; }
ratio() {
    if [[ -n $1 && -n $2 && $2 != 0 && $2 != 0.0 && $2 != 0.000 ]]; then awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; else echo n/a; fi
}

# ------------------------------------------------------------------ run ----
echo "== cluster bench: 3 nodes each; msgs=$MSGS sync-msgs=$SYNC_MSGS size=$SIZE batch=$BATCH runs=$RUNS smoke=$SMOKE timeout=${RUN_TIMEOUT}s"
echo "   reference:  $REF_BIN ($REF_VERSION)"
echo "   under test: $JR_BIN ($JR_VERSION)"
echo "   nats CLI:   $NATS ($NATS_VERSION); failover client: $PYTHON $HERE/failover_gap.py (nats-py $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("nats-py"))' 2>/dev/null || echo '?'))"

for ((run = 1; run <= RUNS; run++)); do
    if ((run % 2)); then order=(ref jr); else order=(jr ref); fi
    echo "-- run $run/$RUNS: ${order[*]}"
    for key in "${order[@]}"; do
        if start_cluster "$key" "$run"; then
            pass "${NAME[$key]}: 3-node cluster up (run $run), meta leader ${META_LEADER[$key]}, JetStream answers on all nodes"
        else
            fail "${NAME[$key]}: 3-node cluster did not come up (run $run)"
            stop_cluster "$key"
            continue
        fi
        if run_async "$key" "$run"; then
            run_fetch "$key" "$run" || true
        else
            fail "${NAME[$key]}: fetch + explicit ack (run $run): skipped, the async publish failed"
        fi
        run_sync "$key" "$run" || true
        run_failover "$key" "$run" || true
        stop_cluster "$key"
    done
done

# ---------------------------------------------------------------- report ----
ROWSPEC=(
    "async|JetStream async publish, R3 file stream, 128 B, batch $BATCH (msgs/s)"
    "fetch|pull consumer (fetch), explicit acks, reading back the async stream (msgs/s)"
    "sync|JetStream sync publish, R3 file stream, 128 B (msgs/s)"
    "p50|sync publish latency p50 (µs, lower is better)"
    "p99|sync publish latency p99 (µs, lower is better)"
    "gap|failover: kill -9 of the stream leader → next PubAck (s, lower is better)"
)
ROWS=()
ALLRUNS=()
for spec in "${ROWSPEC[@]}"; do
    IFS='|' read -r wid label <<<"$spec"
    ref=$(median ${R[$wid:ref]:-}) jr=$(median ${R[$wid:jr]:-})
    ROWS+=("| $label | $(cell "$ref") | $(cell "$jr") | $(ratio "$jr" "$ref") |")
    ALLRUNS+=("| $label | $(runs_cell ${R[$wid:ref]:-}) | $(runs_cell ${R[$wid:jr]:-}) |")
done

cpu=$(grep -m1 -E '^(model name|Model|cpu model)' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
fs=$(df -PT "$TMP" 2>/dev/null | awk 'NR==2{print $2" on "$1}' || true)
echo
echo "### 3-node cluster, R3 file streams (median of $RUNS run(s); async publish $(commas "$MSGS") msgs, sync publish $(commas "$SYNC_MSGS") msgs)"
echo
echo "| workload | nats-server 3 nodes | $JR_LABEL 3 nodes | $JR_LABEL / nats-server |"
echo "|---|---:|---:|---:|"
printf '%s\n' "${ROWS[@]}"
if ((RUNS > 1)); then
    echo
    echo "All runs (in run order; the servers alternate who goes first):"
    echo
    echo "| workload | nats-server | $JR_LABEL |"
    echo "|---|---|---|"
    printf '%s\n' "${ALLRUNS[@]}"
fi
echo
echo "Failover runs:"
for ((run = 1; run <= RUNS; run++)); do
    for key in "${KEYS[@]}"; do
        echo "  - ${NAME[$key]} run $run: ${FO[$key:$run]:-FAIL}; gap $(awk -v r="$run" '{print $r}' <<<"${R[gap:$key]:-}")"
    done
done
echo "Client placement (the bench client connects to the node leading the stream): ${CLIENT_NOTE[*]:-none}"
echo
echo "Machine: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr); store dirs on ${fs:-unknown fs}; all six nodes and the clients share the machine (one cluster runs at a time)"
echo "Clusters (fresh per run, free loopback ports, node i = n<i>, each with the same 3-route list incl. itself):"
for key in "${KEYS[@]}"; do
    echo "  - ${NAME[$key]}: ${CLUSTER_CMD[$key]:-not started}"
done
echo "  nats-server: $REF_VERSION, default settings (acks before fsync; sync_interval 2 min); $JR_LABEL: ${JR_VERSION:-no --version} (acks after a quorum fsync)"
echo "Client: $NATS ($NATS_VERSION); every call is nats --no-context --server nats://127.0.0.1:<port of the stream leader> bench js ... --no-progress"
echo "Per server and run r (in this order):"
echo "  0. nats stream add <X> --subjects <subj> --storage file --retention limits --replicas 3 --defaults   (via n1, for X = A<r>, S<r>, F<r>)"
echo "  1. bench js pub async js.async.r<r> --stream A<r> --clients 1 --msgs $MSGS --size $SIZE --batch $BATCH   (then: stream info = $MSGS msgs; /jsz last_seq = $MSGS on all 3 nodes)"
echo "  2. bench js fetch --stream A<r> --acks explicit --clients 1 --msgs $MSGS --size $SIZE   (then: consumer info ack floor = $MSGS, 0 pending)"
echo "  3. bench js pub sync js.sync.r<r> --stream S<r> --clients 1 --msgs $SYNC_MSGS --size $SIZE   (msgs/s, P50/P99)"
echo "  4. $PYTHON bench/failover_gap.py --servers <the 2 followers> --stream F<r> --subject js.fo.r<r> --kill-pid <leader pid> --warmup-s 1.0 --after 50 --attempt-timeout 0.25 --retry-every 0.02"
echo "     (leader: $JR_LABEL /jsz streams[].leader; nats-server: nats stream info F<r> --json → cluster.leader; gap = kill → first PubAck of an attempt sent after the kill;"
echo "      then the stream must hold exactly the acked ids, deduplicated by Nats-Msg-Id)"
envs=""
[[ -n ${SERVER_BIN:-} ]] && envs+="SERVER_BIN=$(printf %q "$SERVER_BIN") "
[[ -n ${NATS_SERVER_BIN:-} ]] && envs+="NATS_SERVER_BIN=$(printf %q "$NATS_SERVER_BIN") "
cmd="${envs}bench/cluster.sh"
((${#ORIG_ARGS[@]})) && cmd+=" $(printf '%q ' "${ORIG_ARGS[@]}")"
echo "Command (from the repo root): ${cmd% }"
((SMOKE)) && echo "(smoke run: tiny message counts, numbers are meaningless)"

for key in "${KEYS[@]}"; do
    n=$(cat "$TMP/$key"-r*-n*.log 2>/dev/null | grep -cE 'panicked|\[FTL\]' || true)
    if ((${n:-0} > 0)); then
        echo
        echo "${NAME[$key]} logged $n panic/fatal line(s):"
        cat "$TMP/$key"-r*-n*.log | grep -E 'panicked|\[FTL\]' | sort | uniq -c | sort -rn | head -n 8 | sed 's/^/  /'
    fi
done
echo
report
((FAILED == 0))

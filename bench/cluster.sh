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

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

MSGS=100000
SYNC_MSGS=2000
SIZE=128
BATCH=256
parse_bench_args msgs=MSGS sync-msgs=SYNC_MSGS -- "$@"
# --smoke counts; RUNS; RUN_TIMEOUT bounds every nats bench call
bench_defaults 90 600 MSGS=2000 SYNC_MSGS=200

# ------------------------------------------------------------- binaries ----
require_nats_cli "nats CLI is required when CI=true"
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import nats' 2>/dev/null; then
    skip_banner "SKIP: nats-py not installed for $PYTHON" "      pip install nats-py"
    skip_exit "nats-py is required when CI=true"
fi
resolve_bench_servers

# ------------------------------------------------------------ processes ----
setup_tmp jetraft-clbench

KEYS=(ref jr)
declare -A NAME=([ref]="nats-server" [jr]="$JR_LABEL")
declare -A BIN=([ref]="$REF_BIN" [jr]="$JR_BIN")
# per node "KEY:I": client port, monitor port, cluster port, wrapper pid, server pid
declare -A CPORT=() HPORT=() CLPORT=() WRAP=() CHILD=()
SERVER_BOUND=$((4 * RUN_TIMEOUT + 600))
NODES=(1 2 3)
url_of() { echo "nats://127.0.0.1:${CPORT[$1:$2]}"; } # url_of KEY I
NC() { nats_at "$(url_of "$1" "$2")" "${@:3}"; }      # NC KEY I ARGS...: bounded nats CLI against node I
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
    local key=$1 run=$2 i routes pid dir deadline ml ports
    mapfile -t ports < <(free_ports $((3 * ${#NODES[@]})))
    for i in "${NODES[@]}"; do
        CPORT[$key:$i]=${ports[3 * (i - 1)]}
        HPORT[$key:$i]=${ports[3 * (i - 1) + 1]}
        CLPORT[$key:$i]=${ports[3 * (i - 1) + 2]}
    done
    routes="nats-route://127.0.0.1:${CLPORT[$key:1]},nats-route://127.0.0.1:${CLPORT[$key:2]},nats-route://127.0.0.1:${CLPORT[$key:3]}"
    CLUSTER_CMD[$key]="${BIN[$key]} -a 127.0.0.1 -p <port> -m <http_port> -js -sd <dir> -n n<i> --cluster_name ${key}bench --cluster nats://127.0.0.1:<cluster_port> --routes $(sed -E 's/:[0-9]+/:<cp>/g' <<<"$routes")"
    for i in "${NODES[@]}"; do
        dir=$TMP/$key-r$run/n$i
        mkdir -p "$dir"
        spawn "$TMP/$key-r$run-n$i.log" timeout -k 5 "$SERVER_BOUND" "${BIN[$key]}" -a 127.0.0.1 \
            -p "${CPORT[$key:$i]}" -m "${HPORT[$key:$i]}" -js -sd "$dir" -n "n$i" \
            --cluster_name "${key}bench" --cluster "nats://127.0.0.1:${CLPORT[$key:$i]}" --routes "$routes"
        # no "Killed" job notice when the failover kill -9's the server (the
        # wrapper re-raises the signal); bash still reaps it
        disown "$SPAWNED_PID" 2>/dev/null || true
        WRAP[$key:$i]=$SPAWNED_PID
    done
    # a node's startup blocks until every route answered: all three started, now wait
    for i in "${NODES[@]}"; do
        pid=${WRAP[$key:$i]}
        if ! wait_port "$pid" "${CPORT[$key:$i]}" 30; then
            echo "      $key n$i: client port ${CPORT[$key:$i]} not accepting"
            show_tail "$TMP/$key-r$run-n$i.log" 20 || true
            return 1
        fi
        # the server under the wrapper (a PATH shim execs into it, same PID)
        track_server_child "$pid" || { echo "      $key n$i: no server process under wrapper $pid"; return 1; }
        CHILD[$key:$i]=${SRV_CHILD[$pid]}
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
        if ! wait_js_info "$(url_of "$key" "$i")" 30 0.3; then
            echo "      $key n$i: JetStream never answered \$JS.API.INFO (last reply: ${JS_INFO_REPLY:-none})"
            return 1
        fi
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
# new_r3_stream WHAT KEY STREAM SUBJECT: create_r3, then LEADER_NODE; else fail WHAT
new_r3_stream() {
    local what=$1 key=$2 st=$3 subj=$4
    create_r3 "$key" "$st" "$subj" || { fail "$what: stream add $st failed"; return 1; }
    stream_leader "$key" "$st" || { fail "$what: no leader for $st"; return 1; }
}

declare -A R=()  # R[wid:key] = values in run order
declare -A FO=() # failover details per key:run
declare -A CLUSTER_CMD=() META_LEADER=()
CLIENT_NOTE=()

# run_async KEY RUN
run_async() {
    local key=$1 run=$2 st="A$2" subj="js.async.r$2" what="${NAME[$1]}: async publish (run $2)" out n ln i seqs ok
    out="$TMP/async-$key-r$run.out"
    new_r3_stream "$what" "$key" "$st" "$subj" || return 1
    ln=$LEADER_NODE
    A_NODE=$ln
    CLIENT_NOTE+=("${NAME[$key]} run $run: A$run leader n$ln")
    run_bench "$(url_of "$key" "$ln")" "$out" js pub async "$subj" --stream "$st" --clients 1 --msgs "$MSGS" --size "$SIZE" --batch "$BATCH"
    bench_rate "$what" "$out" || return 1
    check_stream_msgs "$what" "$(url_of "$key" "$ln")" "$st" || return 1
    R[async:$key]+="$RATE "
    pass "${NAME[$key]}: async publish into R3 $st via leader n$ln (run $run): $(commas "$RATE") msgs/s, stream holds $STREAM_MSGS"
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
    local key=$1 run=$2 st="A$2" what="${NAME[$1]}: fetch + explicit ack (run $2)" out
    out="$TMP/fetch-$key-r$run.out"
    run_bench "$(url_of "$key" "$A_NODE")" "$out" js fetch --stream "$st" --acks explicit --clients 1 --msgs "$MSGS" --size "$SIZE"
    bench_rate "$what" "$out" || return 1
    check_acked "$what" "$(url_of "$key" "$A_NODE")" "$st" || return 1
    R[fetch:$key]+="$RATE "
    pass "${NAME[$key]}: fetch + explicit ack of R3 $st via n$A_NODE (run $run): $(commas "$RATE") msgs/s, ack floor $ACK_FLOOR"
}

# run_sync KEY RUN
run_sync() {
    local key=$1 run=$2 st="S$2" subj="js.sync.r$2" what="${NAME[$1]}: sync publish (run $2)" out ln
    out="$TMP/sync-$key-r$run.out"
    new_r3_stream "$what" "$key" "$st" "$subj" || return 1
    ln=$LEADER_NODE
    run_bench "$(url_of "$key" "$ln")" "$out" js pub sync "$subj" --stream "$st" --clients 1 --msgs "$SYNC_MSGS" --size "$SIZE"
    bench_sync_stats "$what" "$out" || return 1
    R[sync:$key]+="$RATE "
    R[p50:$key]+="$P50 "
    R[p99:$key]+="$P99 "
    pass "${NAME[$key]}: sync publish into R3 $st via leader n$ln (run $run): $(commas "$RATE") msgs/s, p50 ${P50} µs, p99 ${P99} µs"
}

# run_failover KEY RUN: kill -9 of F<r>'s leader under a sync publisher on the followers
run_failover() {
    local key=$1 run=$2 st="F$2" subj="js.fo.r$2" what="${NAME[$1]}: failover (run $2)" out err ln pid urls n res gap
    out="$TMP/failover-$key-r$run.json"
    err="$TMP/failover-$key-r$run.err"
    new_r3_stream "$what" "$key" "$st" "$subj" || return 1
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
        fail "$what: leader n$ln (pid $pid) still alive"
        return 1
    fi
    gap=$(json_get "$res" '"%.3f" % d["gap_s"] if d["ok"] else None')
    if [[ -z $gap ]]; then
        fail "$what: killed leader n$ln: $(json_get "$res" 'd["error"]' || true)${res:+ ($res)}"
        sed 's/^/      | /' "$err" | tail -n 5
        return 1
    fi
    R[gap:$key]+="$gap "
    FO[$key:$run]="leader n$ln killed, new leader $(json_get "$res" 'd["new_leader"]'), $(json_get "$res" 'd["failed_attempts"]') failed attempts $(json_get "$res" 'json.dumps(d["errors"])'), $(json_get "$res" 'd["acked"]') acked = stream messages $(json_get "$res" 'd["stream_messages"]'); pre-kill sync p50 $(json_get "$res" 'd["pre_kill_p50_ms"]') ms"
    pass "$what: kill -9 of $st's leader n$ln → next PubAck after ${gap} s; ${FO[$key:$run]}"
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
spec_rows ref jr

fs=$(store_fs "$TMP")
echo
echo "### 3-node cluster, R3 file streams (median of $RUNS run(s); async publish $(commas "$MSGS") msgs, sync publish $(commas "$SYNC_MSGS") msgs)"
echo
md_table "| workload | nats-server 3 nodes | $JR_LABEL 3 nodes | $JR_LABEL / nats-server |" "|---|---:|---:|---:|" "${ROWS[@]}"
all_runs_table "All runs (in run order; the servers alternate who goes first):" \
    "| workload | nats-server | $JR_LABEL |" "|---|---|---|"
echo
echo "Failover runs:"
for ((run = 1; run <= RUNS; run++)); do
    for key in "${KEYS[@]}"; do
        echo "  - ${NAME[$key]} run $run: ${FO[$key:$run]:-FAIL}; gap $(awk -v r="$run" '{print $r}' <<<"${R[gap:$key]:-}")"
    done
done
echo "Client placement (the bench client connects to the node leading the stream): ${CLIENT_NOTE[*]:-none}"
echo
machine_line "; store dirs on ${fs:-unknown fs}; all six nodes and the clients share the machine (one cluster runs at a time)"
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
command_line
((SMOKE)) && echo "(smoke run: tiny message counts, numbers are meaningless)"

for key in "${KEYS[@]}"; do
    n=$(cat "$TMP/$key"-r*-n*.log 2>/dev/null | grep -cE 'panicked|\[FTL\]' || true)
    if ((${n:-0} > 0)); then
        echo
        echo "${NAME[$key]} logged $n panic/fatal line(s):"
        cat "$TMP/$key"-r*-n*.log | grep -E 'panicked|\[FTL\]' | sort | uniq -c | sort -rn | head -n 8 | sed 's/^/  /'
    fi
done
bench_finish

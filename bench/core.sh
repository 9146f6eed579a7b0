#!/usr/bin/env bash
# Core NATS throughput: the same `nats bench` workloads against nats-server and
# jetraft, started with the same flags on free loopback ports. See bench/README.md.
#
#   bench/core.sh [--msgs N] [--req-msgs N] [--runs R] [--smoke] [--timeout SECS] [--keep-logs]
#
#   --msgs N      messages per pub/sub workload (default 1000000)
#   --req-msgs N  round trips for request/reply (default 50000)
#   --runs R      repetitions per workload and server, reported as the median;
#                 the two servers alternate going first (default 3)
#   --smoke       1000 msgs, 1 run unless --runs: only proves the script works (CI)
#   --timeout S   bound for each nats bench process (default 300, smoke 30)
#   --keep-logs   keep the temp dir with all server and nats bench output
#
# Environment:
#   SERVER_BIN       jetraft binary (default target/release/jetraft, relative to
#                    the repo root); a bare name is looked up on PATH.
#   NATS_SERVER_BIN  reference server (default nats-server on PATH; 2.15.x expected)
#   NATS_BIN         nats CLI (default nats on PATH, else $(go env GOPATH)/bin/nats)
#   CI               if "true", a missing nats CLI is a failure instead of a skip
#
# Prints a markdown table (workload | nats-server msgs/s | jetraft msgs/s |
# ratio), the machine, and the exact commands; then "N passed, M failed"
# where each (workload, server) run that completed is a pass.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MSGS=1000000
REQ_MSGS=50000
parse_bench_args msgs=MSGS req-msgs=REQ_MSGS -- "$@"
# --smoke counts; RUNS; RUN_TIMEOUT bounds every single nats bench process
bench_defaults 30 300 MSGS=1000 REQ_MSGS=1000

# ------------------------------------------------------------- binaries ----
require_nats_cli
resolve_bench_servers

# ------------------------------------------------------------ processes ----
setup_tmp jetraft-bench

declare -A PORT=() MON=() MONMODE=()
url_of() { echo "nats://127.0.0.1:${PORT[$1]}"; } # url_of KEY

# start_bench_server KEY BIN -> PORT[KEY], MON[KEY], MONMODE[KEY]
start_bench_server() {
    local key=$1 bin=$2 port mon i mode=none attempt
    for attempt in 1 2 3; do
        { read -r port; read -r mon; } < <(free_ports 2)
        spawn "$TMP/server-$key.log" "$bin" -a 127.0.0.1 -p "$port" -m "$mon"
        wait_port "$SPAWNED_PID" "$port" && break
        # Another process took a port between free_ports and the bind: pick others.
        if ((attempt < 3)) && grep -q "Address already in use" "$TMP/server-$key.log"; then
            continue
        fi
        tail -n 20 "$TMP/server-$key.log" || true
        return 1
    done
    # monitoring lets us see the subscribers' SUBs arrive (see wait_subs);
    # BENCH_READINESS=fallback forces the no-monitoring path (for testing it)
    for ((i = 0; i < 30; i++)); do # up to 3 s for the HTTP listener
        [[ ${BENCH_READINESS:-} == fallback ]] && break
        if [[ -n $(mon_subs "$mon" connz) ]]; then mode=connz; break; fi
        if [[ -n $(mon_subs "$mon" subsz) ]]; then mode=subsz; break; fi
        if [[ -n $(mon_subs "$mon" varz) ]]; then mode=varz; break; fi
        sleep 0.1
    done
    PORT[$key]=$port
    MON[$key]=$mon
    MONMODE[$key]=$mode
}
# mon_subs MONPORT connz|subsz|varz -> number of subscriptions, or nothing.
# Only differences matter (a baseline is taken before each subscriber starts).
mon_subs() {
    local body expr
    body=$(curl -fsS --max-time 2 "http://127.0.0.1:$1/$2?limit=100000" 2>/dev/null) || return 0
    case $2 in
    connz) expr='sum(int(c.get("subscriptions", 0)) for c in d["connections"])' ;;
    subsz) expr='int(d["num_subscriptions"])' ;;
    *) expr='int(d["subscriptions"])' ;;
    esac
    json_get "$body" "$expr"
}

# Readiness of `nats bench sub`: its "Starting ... subscriber" line is logged
# before it subscribes, so it proves nothing. With monitoring (/connz, /subsz
# or /varz "subscriptions"; both servers get -m) we wait until the server
# counts the new SUBs.
# Without monitoring we fall back to "all clients logged + connected", and a
# lost-message run is retried (see run_pubsub).
# wait_subs KEY BASELINE CLIENTS BGPID OUTFILE
wait_subs() {
    local key=$1 base=$2 clients=$3 bg=$4 out=$5 i n child
    if [[ ${MONMODE[$key]} != none ]]; then
        for ((i = 0; i < 200; i++)); do # up to 10 s
            alive "$bg" || return 1
            n=$(mon_subs "${MON[$key]}" "${MONMODE[$key]}")
            [[ -n $n ]] && ((n >= base + clients)) && return 0
            sleep 0.05
        done
        return 1
    fi
    for ((i = 0; i < 200; i++)); do # up to 10 s
        alive "$bg" || return 1
        child=$(pgrep -P "$bg" | head -n 1 || true)
        if [[ -n $child ]] && (($(grep -c 'Starting Core NATS subscriber, expecting' "$out" || true) >= clients)) &&
            (($(ss -Htnp state established "( dport = :${PORT[$key]} )" 2>/dev/null | grep -c "pid=$child," || true) >= clients)); then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# run_pubsub KEY WID SIZE CLIENTS -> RESULT (subscriber-side msgs/s), PUBRESULT
run_pubsub() {
    local key=$1 wid=$2 size=$3 clients=$4 attempt url subj base sub_pid sub_out pub_out
    url=$(url_of "$key")
    RESULT="" PUBRESULT=""
    for attempt in 1 2; do
        subj="bench.$wid.$key.$attempt"
        sub_out="$TMP/$wid-$key-$attempt-sub.out"
        pub_out="$TMP/$wid-$key-$attempt-pub.out"
        base=0
        [[ ${MONMODE[$key]} != none ]] && base=$(mon_subs "${MON[$key]}" "${MONMODE[$key]}")
        spawn "$sub_out" timeout "$RUN_TIMEOUT" "$NATS" --no-context --server "$url" bench sub "$subj" \
            --clients "$clients" --msgs "$MSGS" --size "$size" --no-progress
        sub_pid=$SPAWNED_PID
        if ! wait_subs "$key" "${base:-0}" "$clients" "$sub_pid" "$sub_out"; then
            echo "      $key/$wid attempt $attempt: subscribers never became ready"
            sed 's/^/      | /' "$sub_out" | tail -n 5
            stop_pid "$sub_pid"
            continue
        fi
        run_bench "$url" "$pub_out" pub "$subj" --clients "$clients" --msgs "$MSGS" --size "$size"
        if ((BENCH_RC != 0)); then
            echo "      $key/$wid attempt $attempt: publisher exited $BENCH_RC"
            sed 's/^/      | /' "$pub_out" | tail -n 5
            stop_pid "$sub_pid"
            continue
        fi
        wait_exit "$sub_pid" "$RUN_TIMEOUT" "$sub_out" 'Disconnected due to'
        if ((WAIT_RC == 125)); then
            # the server dropped a subscriber (e.g. slow consumer): messages are
            # lost for good, so waiting or retrying is pointless
            echo "      $key/$wid: the server disconnected a subscriber; run abandoned"
            grep -m 3 'Disconnected due to' "$sub_out" | sed 's/^/      | /' || true
            grep -i 'slow consumer' "$TMP/server-$key.log" | tail -n 3 | sed 's/^/      | server: /' || true
            return 1
        fi
        if ((WAIT_RC != 0)); then
            echo "      $key/$wid attempt $attempt: subscriber exited $WAIT_RC (messages lost or too slow)"
            sed 's/^/      | /' "$sub_out" | tail -n 5
            continue
        fi
        RESULT=$(rate_of "$sub_out")
        PUBRESULT=$(rate_of "$pub_out")
        [[ -n $RESULT ]] && return 0
        echo "      $key/$wid attempt $attempt: no msgs/sec in subscriber output"
    done
    return 1
}

# run_reqrep KEY WID SIZE -> RESULT (requester msgs/s = round trips/s)
run_reqrep() {
    local key=$1 wid=$2 size=$3 url subj srv_pid srv_out req_out i ready=0 r
    url=$(url_of "$key")
    RESULT="" PUBRESULT=""
    subj="bench.$wid.$key"
    srv_out="$TMP/$wid-$key-serve.out"
    req_out="$TMP/$wid-$key-request.out"
    spawn "$srv_out" timeout "$RUN_TIMEOUT" "$NATS" --no-context --server "$url" bench service serve "$subj" \
        --clients 1 --size "$size" --no-progress
    srv_pid=$SPAWNED_PID
    # readiness: the service answers a real request ("ok"); not counted anywhere
    for ((i = 0; i < 50; i++)); do # up to ~50 probes, each bounded by 1 s
        alive "$srv_pid" || break
        r=$(timeout 5 "$NATS" --no-context --server "$url" --timeout 1s request "$subj" probe --raw 2>/dev/null || true)
        if [[ $r == ok* ]]; then ready=1; break; fi
        sleep 0.1
    done
    if ((!ready)); then
        echo "      $key/$wid: service never answered"
        sed 's/^/      | /' "$srv_out" | tail -n 5
        stop_pid "$srv_pid"
        return 1
    fi
    run_bench "$url" "$req_out" service request "$subj" --clients 1 --msgs "$REQ_MSGS" --size "$size"
    stop_pid "$srv_pid"
    if ((BENCH_RC != 0)); then
        echo "      $key/$wid: requester exited $BENCH_RC"
        sed 's/^/      | /' "$req_out" | tail -n 5
        return 1
    fi
    RESULT=$(rate_of "$req_out")
    [[ -n $RESULT ]]
}

# ------------------------------------------------------------------ run ----
echo "== core bench: msgs=$MSGS req-msgs=$REQ_MSGS runs=$RUNS smoke=$SMOKE timeout=${RUN_TIMEOUT}s"
echo "   reference: $REF_BIN ($REF_VERSION)"
echo "   under test: $JR_BIN ($JR_VERSION)"
echo "   nats CLI:  $NATS ($NATS_VERSION)"
declare -A BIN=([ref]="$REF_BIN" [jr]="$JR_BIN")
for key in ref jr; do
    if start_bench_server "$key" "${BIN[$key]}"; then
        pass "$key server (${BIN[$key]}) listening on 127.0.0.1:${PORT[$key]} (monitoring: ${MONMODE[$key]})"
    else
        fail "$key server (${BIN[$key]}) did not start"
        report
        exit 1
    fi
done
[[ ${MONMODE[jr]} == none ]] &&
    echo "NOTE: $JR_LABEL has no /connz, /subsz or /varz subscriptions; subscriber readiness is best-effort (log line + TCP connect), failed runs are retried once"

# id | label | kind | size | clients
WORKLOADS=(
    "p1s1-128|1 pub → 1 sub, 128 B|pubsub|128|1"
    "p1s1-16|1 pub → 1 sub, 16 B|pubsub|16|1"
    "p4s4-128|4 pubs → 4 subs, 128 B|pubsub|128|4"
    "reqrep-128|request/reply, 1 requester ↔ 1 service, 128 B|reqrep|128|1"
)
declare -A R=() # R[WID:KEY] subscriber/requester rates, R[pub-WID:KEY] publisher rates
ROWS=()
PUBROWS=()
ALLRUNS=()
CMDS=()
for w in "${WORKLOADS[@]}"; do
    IFS='|' read -r wid label kind size clients <<<"$w"
    if [[ $kind == pubsub ]]; then
        CMDS+=("$label: nats --server URL bench sub SUBJ --clients $clients --msgs $MSGS --size $size --no-progress &  nats --server URL bench pub SUBJ --clients $clients --msgs $MSGS --size $size --no-progress")
    else
        CMDS+=("$label: nats --server URL bench service serve SUBJ --clients 1 --size $size --no-progress &  nats --server URL bench service request SUBJ --clients 1 --msgs $REQ_MSGS --size $size --no-progress")
    fi
    for ((run = 1; run <= RUNS; run++)); do
        order="ref jr"
        ((run % 2 == 0)) && order="jr ref" # alternate who goes first
        for key in $order; do
            name=nats-server
            [[ $key == jr ]] && name=$JR_LABEL
            tag="$label"
            ((RUNS > 1)) && tag+=" (run $run/$RUNS)"
            ok=0
            if [[ $kind == pubsub ]]; then
                run_pubsub "$key" "$wid-r$run" "$size" "$clients" && ok=1
            else
                run_reqrep "$key" "$wid-r$run" "$size" && ok=1
            fi
            if ((ok)); then
                R[$wid:$key]+="$RESULT "
                [[ -n $PUBRESULT ]] && R[pub-$wid:$key]+="$PUBRESULT "
                pass "$name: $tag: $(commas "$RESULT") msgs/s"
            else
                fail "$name: $tag"
            fi
        done
    done
    ALLRUNS+=("$(runs_row "$label" "$wid" ref jr)")
    ROWS+=("$(median_row "$label" "$wid" ref jr)")
    if [[ $kind == pubsub ]]; then
        PUBROWS+=("$(median_row "$label" "pub-$wid" ref jr)")
    fi
done

echo
echo "### Core NATS throughput (median of $RUNS run(s); msgs/s; pub/sub = messages delivered to all subscribers per second, request/reply = round trips per second)"
echo
md_table "| workload | nats-server msgs/s | $JR_LABEL msgs/s | ratio ($JR_LABEL/nats-server) |" "|---|---:|---:|---:|" "${ROWS[@]}"
echo
echo "Publisher-side rates (msgs/s published, all publishers together):"
echo
md_table "| workload | nats-server msgs/s | $JR_LABEL msgs/s | ratio |" "|---|---:|---:|---:|" "${PUBROWS[@]}"
all_runs_table "All runs (msgs/s, in run order; the servers alternate going first):" \
    "| workload | nats-server runs | $JR_LABEL runs |" "|---|---|---|"
echo
machine_line
echo "Servers: nats-server = $REF_BIN ($REF_VERSION); $JR_LABEL = $JR_BIN (${JR_VERSION:-no --version}); both run as: <bin> -a 127.0.0.1 -p <port> -m <http_port>"
echo "Client: $NATS ($NATS_VERSION); subscriber(s) started first in the background, publisher/requester in the foreground"
command_line
echo "Per workload:"
printf '  - %s\n' "${CMDS[@]}"
((SMOKE)) && echo "(smoke run: tiny message counts, numbers are meaningless)"
bench_finish

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

source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
ORIG_ARGS=("$@")

MSGS=1000000
REQ_MSGS=50000
SMOKE=0
RUNS=""
RUN_TIMEOUT=""
KEEP_LOGS=0
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; }
while (($#)); do
    case $1 in
    --msgs) MSGS=${2:?--msgs needs a number}; shift 2 ;;
    --msgs=*) MSGS=${1#*=}; shift ;;
    --req-msgs) REQ_MSGS=${2:?--req-msgs needs a number}; shift 2 ;;
    --req-msgs=*) REQ_MSGS=${1#*=}; shift ;;
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
    MSGS=1000
    REQ_MSGS=1000
    RUNS=${RUNS:-1}
fi
RUNS=${RUNS:-3}
[[ $MSGS =~ ^[1-9][0-9]*$ && $REQ_MSGS =~ ^[1-9][0-9]*$ && $RUNS =~ ^[1-9][0-9]*$ ]] ||
    { echo "--msgs/--req-msgs/--runs must be positive integers" >&2; exit 2; }
# bound for every single nats bench process
[[ -n $RUN_TIMEOUT ]] || { if ((SMOKE)); then RUN_TIMEOUT=30; else RUN_TIMEOUT=300; fi; }

# ------------------------------------------------------------- binaries ----
if ! NATS=$(find_nats); then
    skip_banner "SKIP: nats CLI not installed" "      go install github.com/nats-io/natscli/nats@v0.5.0"
    skip_exit
fi
resolve_bench_servers

# ------------------------------------------------------------ processes ----
setup_tmp jetraft-bench

# wait_sub PID SECS OUT: like wait_exit for a `nats bench sub`, but gives up
# at once (WAIT_RC=125) when the client logs a disconnect.
wait_sub() {
    local pid=$1 secs=$2 out=$3 i
    WAIT_RC=0
    for ((i = 0; i < secs * 20; i++)); do
        alive "$pid" || break
        if grep -q 'Disconnected due to' "$out" 2>/dev/null; then
            stop_pid "$pid"
            WAIT_RC=125
            return 0
        fi
        sleep 0.05
    done
    if alive "$pid"; then
        stop_pid "$pid"
        WAIT_RC=124
        return 0
    fi
    wait "$pid" 2>/dev/null || WAIT_RC=$?
}
# start_bench_server KEY BIN -> sets PORT_<KEY>, MON_<KEY>, MONMODE_<KEY>
start_bench_server() {
    local key=$1 bin=$2 port mon pid i mode=none
    port=$(free_port)
    mon=$(free_port)
    "$bin" -a 127.0.0.1 -p "$port" -m "$mon" >"$TMP/server-$key.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    if ! wait_port "$pid" "$port"; then
        tail -n 20 "$TMP/server-$key.log" || true
        return 1
    fi
    # monitoring lets us see the subscribers' SUBs arrive (see wait_subs);
    # BENCH_READINESS=fallback forces the no-monitoring path (for testing it)
    for ((i = 0; i < 30; i++)); do # up to 3 s for the HTTP listener
        [[ ${BENCH_READINESS:-} == fallback ]] && break
        if [[ -n $(mon_subs "$mon" connz) ]]; then mode=connz; break; fi
        if [[ -n $(mon_subs "$mon" subsz) ]]; then mode=subsz; break; fi
        if [[ -n $(mon_subs "$mon" varz) ]]; then mode=varz; break; fi
        sleep 0.1
    done
    printf -v "PORT_$key" %s "$port"
    printf -v "MON_$key" %s "$mon"
    printf -v "MONMODE_$key" %s "$mode"
}
# mon_subs MONPORT connz|subsz|varz -> number of subscriptions, or nothing.
# Only differences matter (a baseline is taken before each subscriber starts).
mon_subs() {
    local body
    body=$(curl -fsS --max-time 2 "http://127.0.0.1:$1/$2?limit=100000" 2>/dev/null) || return 0
    python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[2])
    if sys.argv[1] == "connz":
        print(sum(int(c.get("subscriptions", 0)) for c in d["connections"]))
    elif sys.argv[1] == "subsz":
        print(int(d["num_subscriptions"]))
    else:
        print(int(d["subscriptions"]))
except Exception:
    pass' "$2" "$body"
}

# Readiness of `nats bench sub`: its "Starting ... subscriber" line is logged
# before it subscribes, so it proves nothing. With monitoring (/connz, /subsz
# or /varz "subscriptions"; both servers get -m) we wait until the server
# counts the new SUBs.
# Without monitoring we fall back to "all clients logged + connected", and a
# lost-message run is retried (see run_pubsub).
# wait_subs KEY BASELINE CLIENTS BGPID OUTFILE
wait_subs() {
    local key=$1 base=$2 clients=$3 bg=$4 out=$5 i n child mon mode
    mon=MON_$key mode=MONMODE_$key
    mon=${!mon} mode=${!mode}
    if [[ $mode != none ]]; then
        for ((i = 0; i < 200; i++)); do # up to 10 s
            alive "$bg" || return 1
            n=$(mon_subs "$mon" "$mode")
            [[ -n $n ]] && ((n >= base + clients)) && return 0
            sleep 0.05
        done
        return 1
    fi
    local port=PORT_$key
    port=${!port}
    for ((i = 0; i < 200; i++)); do # up to 10 s
        alive "$bg" || return 1
        child=$(pgrep -P "$bg" | head -n 1 || true)
        if [[ -n $child ]] && (($(grep -c 'Starting Core NATS subscriber, expecting' "$out" || true) >= clients)) &&
            (($(ss -Htnp state established "( dport = :$port )" 2>/dev/null | grep -c "pid=$child," || true) >= clients)); then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

rate_of() { # last "stats: 1,234 msgs/sec" in a nats bench output (aggregate if several)
    grep -oE 'stats: [0-9,]+ msgs/sec' "$1" 2>/dev/null | tail -n 1 | grep -oE '[0-9,]+' | tr -d , || true
}

# run_pubsub KEY WID SIZE CLIENTS -> RESULT (subscriber-side msgs/s), PUBRESULT
run_pubsub() {
    local key=$1 wid=$2 size=$3 clients=$4 attempt url subj base sub_pid sub_out pub_out rc mon mode
    url=PORT_$key
    url="nats://127.0.0.1:${!url}"
    mon=MON_$key mode=MONMODE_$key
    RESULT="" PUBRESULT=""
    for attempt in 1 2; do
        subj="bench.$wid.$key.$attempt"
        sub_out="$TMP/$wid-$key-$attempt-sub.out"
        pub_out="$TMP/$wid-$key-$attempt-pub.out"
        base=0
        [[ ${!mode} != none ]] && base=$(mon_subs "${!mon}" "${!mode}")
        timeout "$RUN_TIMEOUT" "$NATS" --no-context --server "$url" bench sub "$subj" \
            --clients "$clients" --msgs "$MSGS" --size "$size" --no-progress >"$sub_out" 2>&1 &
        sub_pid=$!
        PIDS+=("$sub_pid")
        if ! wait_subs "$key" "${base:-0}" "$clients" "$sub_pid" "$sub_out"; then
            echo "      $key/$wid attempt $attempt: subscribers never became ready"
            sed 's/^/      | /' "$sub_out" | tail -n 5
            stop_pid "$sub_pid"
            continue
        fi
        rc=0
        timeout "$RUN_TIMEOUT" "$NATS" --no-context --server "$url" bench pub "$subj" \
            --clients "$clients" --msgs "$MSGS" --size "$size" --no-progress >"$pub_out" 2>&1 || rc=$?
        if ((rc != 0)); then
            echo "      $key/$wid attempt $attempt: publisher exited $rc"
            sed 's/^/      | /' "$pub_out" | tail -n 5
            stop_pid "$sub_pid"
            continue
        fi
        wait_sub "$sub_pid" "$RUN_TIMEOUT" "$sub_out"
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
    local key=$1 wid=$2 size=$3 url subj srv_pid srv_out req_out i rc ready=0 r
    url=PORT_$key
    url="nats://127.0.0.1:${!url}"
    RESULT="" PUBRESULT=""
    subj="bench.$wid.$key"
    srv_out="$TMP/$wid-$key-serve.out"
    req_out="$TMP/$wid-$key-request.out"
    timeout "$RUN_TIMEOUT" "$NATS" --no-context --server "$url" bench service serve "$subj" \
        --clients 1 --size "$size" --no-progress >"$srv_out" 2>&1 &
    srv_pid=$!
    PIDS+=("$srv_pid")
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
    rc=0
    timeout "$RUN_TIMEOUT" "$NATS" --no-context --server "$url" bench service request "$subj" \
        --clients 1 --msgs "$REQ_MSGS" --size "$size" --no-progress >"$req_out" 2>&1 || rc=$?
    stop_pid "$srv_pid"
    if ((rc != 0)); then
        echo "      $key/$wid: requester exited $rc"
        sed 's/^/      | /' "$req_out" | tail -n 5
        return 1
    fi
    RESULT=$(rate_of "$req_out")
    [[ -n $RESULT ]]
}

commas() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }
median() { # median of the integer arguments (lower middle for an even count); nothing if none
    (($#)) || return 0
    printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'
}
runs_cell() { # every run's value, in run order
    local v out=""
    for v in "$@"; do out+="${out:+, }$(commas "$v")"; done
    echo "${out:-FAIL}"
}
cell() { if [[ -n $1 ]]; then commas "$1"; else echo FAIL; fi; }
ratio() { # ratio A B = A/B with 2 decimals, n/a if either is missing
    if [[ -n $1 && -n $2 && $2 != 0 ]]; then awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; else echo n/a; fi
}

# ------------------------------------------------------------------ run ----
echo "== core bench: msgs=$MSGS req-msgs=$REQ_MSGS runs=$RUNS smoke=$SMOKE timeout=${RUN_TIMEOUT}s"
echo "   reference: $REF_BIN ($REF_VERSION)"
echo "   under test: $JR_BIN ($JR_VERSION)"
echo "   nats CLI:  $NATS ($("$NATS" --version 2>&1))"
for key in ref jr; do
    bin=REF_BIN
    [[ $key == jr ]] && bin=JR_BIN
    if start_bench_server "$key" "${!bin}"; then
        p=PORT_$key m=MONMODE_$key
        pass "$key server (${!bin}) listening on 127.0.0.1:${!p} (monitoring: ${!m})"
    else
        fail "$key server (${!bin}) did not start"
        report
        exit 1
    fi
done
[[ $MONMODE_jr == none ]] &&
    echo "NOTE: $JR_LABEL has no /connz, /subsz or /varz subscriptions; subscriber readiness is best-effort (log line + TCP connect), failed runs are retried once"

# id | label | kind | size | clients
WORKLOADS=(
    "p1s1-128|1 pub → 1 sub, 128 B|pubsub|128|1"
    "p1s1-16|1 pub → 1 sub, 16 B|pubsub|16|1"
    "p4s4-128|4 pubs → 4 subs, 128 B|pubsub|128|4"
    "reqrep-128|request/reply, 1 requester ↔ 1 service, 128 B|reqrep|128|1"
)
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
    declare -A R=() P=()
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
                R[$key]+="$RESULT "
                [[ -n $PUBRESULT ]] && P[$key]+="$PUBRESULT "
                pass "$name: $tag: $(commas "$RESULT") msgs/s"
            else
                fail "$name: $tag"
            fi
        done
    done
    ref=$(median ${R[ref]:-}) jr=$(median ${R[jr]:-})
    ALLRUNS+=("| $label | $(runs_cell ${R[ref]:-}) | $(runs_cell ${R[jr]:-}) |")
    ROWS+=("| $label | $(cell "$ref") | $(cell "$jr") | $(ratio "$jr" "$ref") |")
    if [[ $kind == pubsub ]]; then
        ref=$(median ${P[ref]:-}) jr=$(median ${P[jr]:-})
        PUBROWS+=("| $label | $(cell "$ref") | $(cell "$jr") | $(ratio "$jr" "$ref") |")
    fi
    unset R P
done

cpu=$(grep -m1 -E '^(model name|Model|cpu model)' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
echo
echo "### Core NATS throughput (median of $RUNS run(s); msgs/s; pub/sub = messages delivered to all subscribers per second, request/reply = round trips per second)"
echo
echo "| workload | nats-server msgs/s | $JR_LABEL msgs/s | ratio ($JR_LABEL/nats-server) |"
echo "|---|---:|---:|---:|"
printf '%s\n' "${ROWS[@]}"
echo
echo "Publisher-side rates (msgs/s published, all publishers together):"
echo
echo "| workload | nats-server msgs/s | $JR_LABEL msgs/s | ratio |"
echo "|---|---:|---:|---:|"
printf '%s\n' "${PUBROWS[@]}"
if ((RUNS > 1)); then
    echo
    echo "All runs (msgs/s, in run order; the servers alternate going first):"
    echo
    echo "| workload | nats-server runs | $JR_LABEL runs |"
    echo "|---|---|---|"
    printf '%s\n' "${ALLRUNS[@]}"
fi
echo
echo "Machine: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr)"
echo "Servers: nats-server = $REF_BIN ($REF_VERSION); $JR_LABEL = $JR_BIN (${JR_VERSION:-no --version}); both run as: <bin> -a 127.0.0.1 -p <port> -m <http_port>"
echo "Client: $NATS ($("$NATS" --version 2>&1)); subscriber(s) started first in the background, publisher/requester in the foreground"
envs=""
[[ -n ${SERVER_BIN:-} ]] && envs+="SERVER_BIN=$(printf %q "$SERVER_BIN") "
[[ -n ${NATS_SERVER_BIN:-} ]] && envs+="NATS_SERVER_BIN=$(printf %q "$NATS_SERVER_BIN") "
cmd="${envs}bench/core.sh"
(( ${#ORIG_ARGS[@]} )) && cmd+=" $(printf '%q ' "${ORIG_ARGS[@]}")"
echo "Command (from the repo root): ${cmd% }"
echo "Per workload:"
printf '  - %s\n' "${CMDS[@]}"
((SMOKE)) && echo "(smoke run: tiny message counts, numbers are meaningless)"
echo
report
((FAILED == 0))

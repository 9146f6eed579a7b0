#!/usr/bin/env bash
# bench/storm.sh [--streams N] [--pause S] [--load L] [--publish-limit S] [--smoke] [--keep-logs]
#
# An election storm, provoked on a three-node jetraft cluster (issue 15, ADR 0013). One client
# (bench/storm.py, nats-py) creates N R3 streams one after another. 8 s later (every group
# quiet), L busy loops load the machine and node n1 is stopped (SIGSTOP) for S s, then resumed:
# its peers count it dead and the replicas of the groups it led stand for election. With the
# loops still running, the client publishes one message to each stream, retrying each until it
# is acknowledged, for at most --publish-limit s. The loops end; 10 s later the nodes' CPU is
# read over 10 s; the vote requests that timed out are counted in the nodes' logs; a second
# round of publishes, without load, says whether the cluster recovered.
#
# Defaults: 3000 streams, a 3 s pause, 12 loops, 120 s; --smoke: 60 streams, 2 loops, 30 s.
# SERVER_BIN picks the binary (default target/release/jetraft): run it once per build to
# compare builds. Checks: the nodes started, every stream was created, every stream
# acknowledged its publish in the second round (if not, the streams left are named and each
# node's /jsz and /routez saved beside its log). Ends with "N passed, M failed"; exits non-zero
# if a check failed. Every process it starts is bounded in time and stopped by PID.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STREAMS=3000 PAUSE=3 LOAD=12 PUBLISH_LIMIT=120
parse_bench_args streams=STREAMS pause=PAUSE load=LOAD publish-limit=PUBLISH_LIMIT -- "$@"
bench_defaults 60 900 STREAMS=60 LOAD=2 PUBLISH_LIMIT=30
PY=${PYTHON:-python3}
"$PY" -c 'import nats' 2>/dev/null || skip_exit "nats-py is not installed ($PY)"
require_server
setup_tmp jetraft-storm
cd "$REPO_ROOT"

mapfile -t ports < <(free_ports 9)
routes="nats-route://127.0.0.1:${ports[3]},nats-route://127.0.0.1:${ports[4]},nats-route://127.0.0.1:${ports[5]}"
declare -a NODE
for i in 0 1 2; do
    spawn "$TMP/n$i.log" timeout -k 5 1800 "$SERVER" -a 127.0.0.1 -p "${ports[$i]}" \
        -m "${ports[$((6 + i))]}" -js -sd "$TMP/n$i" -n "n$i" --cluster_name storm \
        --cluster "nats://127.0.0.1:${ports[$((3 + i))]}" --routes "$routes"
    track_server_child "$SPAWNED_PID" || true
    NODE[i]=${SRV_CHILD[$SPAWNED_PID]:-}
done
URL="nats://127.0.0.1:${ports[0]}"
require_nats_cli "the nats CLI is needed to see the cluster up"
if wait_js_info "$URL" 60 0.5 && [[ -n ${NODE[1]} ]]; then
    pass "three nodes started"
else
    fail "three nodes started"
    bench_finish
    exit 1
fi

cpu_ticks() { # utime + stime of the three nodes
    local total=0 pid
    for pid in "${NODE[@]}"; do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}
vote_timeouts() { cat "$TMP"/n*.log | grep -c "when Vote" || true; }

created=$(timeout -k 5 1000 "$PY" bench/storm.py create --url "$URL" --streams "$STREAMS")
echo "$created"
if [[ $created == "created $STREAMS/$STREAMS "* ]]; then pass "$STREAMS streams created"; else fail "$STREAMS streams created"; fi
sleep 8

loops=()
for ((i = 0; i < LOAD; i++)); do
    timeout -k 1 $((PUBLISH_LIMIT + 30)) sh -c 'while :; do :; done' &
    loops+=("$!")
    PIDS+=("$!")
done
votes_before=$(vote_timeouts)
kill -STOP "${NODE[1]}"
sleep "$PAUSE"
kill -CONT "${NODE[1]}"
ticks=$(cpu_ticks)
under_load=$(timeout -k 5 $((PUBLISH_LIMIT + 30)) "$PY" bench/storm.py publish --url "$URL" \
    --streams "$STREAMS" --limit "$PUBLISH_LIMIT")
busy=$(($(cpu_ticks) - ticks))
for pid in "${loops[@]}"; do stop_pid "$pid"; done
sleep 10
ticks=$(cpu_ticks)
sleep 10
idle=$(($(cpu_ticks) - ticks))
votes=$(($(vote_timeouts) - votes_before))
after=$(timeout -k 5 90 "$PY" bench/storm.py publish --url "$URL" --streams "$STREAMS" --limit 60)
tck=$(getconf CLK_TCK)

echo
echo "### An election storm: $STREAMS R3 streams, n1 stopped ${PAUSE} s under $LOAD busy loops"
echo
echo "| | |"
echo "|---|---|"
echo "| one publish to each, loops running, from the resume | ${under_load} |"
echo "| CPU of the three nodes meanwhile | $((busy / tck)) core-seconds |"
echo "| vote requests timed out (all nodes) | $votes |"
echo "| idle CPU, all nodes, 10 s after the load | $((idle * 100 / tck / 10)) % of one core |"
echo "| one publish to each, no load | ${after} |"
echo
if [[ $after == "acked $STREAMS/$STREAMS "* ]]; then
    pass "every stream acknowledged a publish after the storm"
else
    fail "every stream acknowledged a publish after the storm"
    for i in 0 1 2; do # what each node makes of its groups and routes, for the logs
        for page in jsz routez; do
            curl -fsS --max-time 5 "http://127.0.0.1:${ports[$((6 + i))]}/$page" \
                >"$TMP/$page-n$i.json" 2>/dev/null || true
        done
    done
    echo "each node's /jsz and /routez are saved beside its log ($TMP; --keep-logs keeps them)"
fi
machine_line
echo "Server: $SERVER ($("$SERVER" --version 2>/dev/null || echo '?'))"
command_line
bench_finish

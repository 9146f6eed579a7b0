#!/usr/bin/env bash
# End-to-end checks of a three-node cluster with the real `nats` CLI (natscli
# v0.5.0): three server processes on free loopback ports (started the way
# deploy/local-cluster.sh does), then
#   1. the seeds' ORDERS workflow with `--replicas 3`: stream add, consumer add,
#      `nats pub` through a node that does not lead the stream, `nats consumer
#      next` through the third node, `nats stream info` (Leader: + two Replica:
#      lines), `nats consumer info`, `nats consumer cluster step-down` (jetraft
#      moves the stream's leadership: a consumer's leader is its stream's);
#   2. core NATS across nodes: sub on one node / pub on another, reply on one
#      node / request on another, a queue group with members on two nodes;
#   3. failover: `kill -9` of the stream leader (found with /jsz), an acked
#      `nats pub --jetstream` (with a Nats-Msg-Id, retried) through a survivor,
#      `nats stream info` shows a new leader and the message count, the killed
#      node restarts with the same flags and data dir, and all three nodes'
#      /jsz converge on the same last_seq; the consumer goes on from its ack
#      floor;
#   4. `nats stream rm -f ORDERS`.
# Every wait is bounded; only this script's own server PIDs are stopped.
#
# Usage:
#   tests/e2e/jetstream_cluster.sh                        # tests target/release/jetraft
#   SERVER_BIN=nats-server tests/e2e/jetstream_cluster.sh # validates the script on nats-server
#
# Environment:
#   SERVER_BIN  server to test (default target/release/jetraft; relative paths
#               are relative to the repo root, bare names are looked up on PATH).
#               Node i (1..3) is started as
#               `$SERVER_BIN -a 127.0.0.1 -p <port_i> -m <http_i> -js -sd <tmp>/n<i>
#                -n n<i> --cluster_name <name> --cluster nats://127.0.0.1:<cport_i>
#                --routes nats-route://127.0.0.1:<cport_1>,...,<cport_3>`
#               (every node gets the same route list, itself included).
#   NATS_BIN    nats CLI (default: `nats` on PATH, else $(go env GOPATH)/bin/nats).
#   CI          if "true", a missing nats CLI is a failure instead of a skip.
#   KEEP_TMP    if set, the temp dir with server/client logs is kept.
#
# /jsz: jetraft's lists every local stream replica ({"meta_leader", "streams":
# [{"name", "leader", "messages", "last_seq", ...}]}); nats-server's is read
# with ?streams=true (account_details[].stream_detail[]: cluster.leader,
# state). Either shape is understood, so the script also runs on nats-server.
#
# natscli validates every JetStream API reply against the JSON schemas unless
# NOVALIDATE is set; this script unsets it and greps all output for
# "is not a valid" at the end.
#
# Prints one PASS/FAIL line per check and ends with "N passed, M failed".
# Exits non-zero if any check failed.
set -euo pipefail
unset NOVALIDATE

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FG_TIMEOUT=20 # upper bound (s) for any foreground nats invocation

if ! NATS_BIN=$(find_nats); then
    skip_banner "SKIP: nats CLI not installed" "      go install github.com/nats-io/natscli/nats@v0.5.0"
    skip_exit "nats CLI is required when CI=true"
fi

require_server
KEEP_LOGS=${KEEP_TMP:+1}
setup_tmp jetraft-e2e-js-cluster
# background nats clients (sub/reply) are in PIDS too: cleanup stops them

# ------------------------------------------------------------- cluster ----
CLUSTER_NAME=jrtest$$
declare -A CPORT=() HPORT=() CLPORT=() NODE_PID=()
NODES=(1 2 3)
mapfile -t ports < <(free_ports $((3 * ${#NODES[@]})))
for i in "${NODES[@]}"; do
    CPORT[$i]=${ports[3 * (i - 1)]}
    HPORT[$i]=${ports[3 * (i - 1) + 1]}
    CLPORT[$i]=${ports[3 * (i - 1) + 2]}
done
ROUTES="nats-route://127.0.0.1:${CLPORT[1]},nats-route://127.0.0.1:${CLPORT[2]},nats-route://127.0.0.1:${CLPORT[3]}"

# start_node I: start node I in the background (log appended to $TMP/nI.log)
start_node() {
    local i=$1
    mkdir -p "$TMP/n$i"
    "$SERVER" -a 127.0.0.1 -p "${CPORT[$i]}" -m "${HPORT[$i]}" -js -sd "$TMP/n$i" -n "n$i" \
        --cluster_name "$CLUSTER_NAME" --cluster "nats://127.0.0.1:${CLPORT[$i]}" \
        --routes "$ROUTES" >>"$TMP/n$i.log" 2>&1 &
    NODE_PID[$i]=$!
    PIDS+=("${NODE_PID[$i]}")
}
# wait_client_port I SECS: node I accepts TCP on its client port
wait_client_port() {
    local i=$1 secs=$2 deadline=$((SECONDS + $2))
    while ((SECONDS < deadline)); do
        alive "${NODE_PID[$i]}" || return 1
        if (exec 3<>"/dev/tcp/127.0.0.1/${CPORT[$i]}") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}
node_log_tail() { echo "---- n$1 log ----"; tail -n "${2:-20}" "$TMP/n$1.log" 2>/dev/null | sed 's/^/      | /' || true; }

jsz() { curl -fsS --max-time 2 "http://127.0.0.1:${HPORT[$1]}/jsz?streams=true" 2>/dev/null || true; }
# jsz_meta_leader I: the meta leader's name as node I sees it (empty if none)
jsz_meta_leader() {
    python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[1])
except Exception:
    sys.exit(0)
v = d.get("meta_leader")
if v is None:
    v = (d.get("meta_cluster") or {}).get("leader", "")
print(v or "")' "$(jsz "$1")" 2>/dev/null || true
}
# jsz_stream I STREAM: "<leader 0|1> <messages> <last_seq>" of node I's replica, empty if none
# (nats-server: leader = cluster.leader is this node's name, n<I>)
jsz_stream() {
    python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[1])
except Exception:
    sys.exit(0)
name, me = sys.argv[2], sys.argv[3]
if isinstance(d.get("streams"), list):  # jetraft
    for s in d.get("streams") or []:
        if s.get("name") == name:
            print(int(bool(s.get("leader"))), s.get("messages", 0), s.get("last_seq", 0))
            break
else:  # nats-server: /jsz?streams=true
    for a in d.get("account_details") or []:
        for s in a.get("stream_detail") or []:
            if s.get("name") == name:
                st = s.get("state") or {}
                lead = (s.get("cluster") or {}).get("leader", "")
                print(int(lead == me and me != ""), st.get("messages", 0), st.get("last_seq", 0))
                sys.exit(0)' "$(jsz "$1")" "$2" "n$1" 2>/dev/null || true
}
# stream_leader STREAM [SECS] -> LEADER (node index) from /jsz of the live nodes, when exactly one claims it
LEADER=
stream_leader() {
    local st=$1 deadline=$((SECONDS + ${2:-15})) i n cand
    while :; do
        n=0 cand=
        for i in "${NODES[@]}"; do
            alive "${NODE_PID[$i]}" || continue
            if [[ $(jsz_stream "$i" "$st") == 1\ * ]]; then
                n=$((n + 1))
                cand=$i
            fi
        done
        if ((n == 1)); then LEADER=$cand; return 0; fi
        ((SECONDS >= deadline)) && { LEADER=; return 1; }
        sleep 0.2
    done
}

URL=
ALL_OUT=$TMP/all-nats-output.log
url_of() { echo "nats://127.0.0.1:${CPORT[$1]}"; }
# nats_ ARGS...: one bounded nats invocation against $URL
nats_() { timeout "$FG_TIMEOUT" "$NATS_BIN" --no-context --server "$URL" "$@"; }
# run ARGS... / on NODE ARGS...: nats_ with stdout+stderr in $OUT and the exit code in $RC
OUT=
RC=0
run() {
    RC=0
    OUT=$(nats_ "$@" 2>&1) || RC=$?
    { echo "\$ nats --server $URL $*"; echo "$OUT"; echo "(exit $RC)"; } >>"$ALL_OUT"
}
on() {
    URL=$(url_of "$1")
    shift
    run "$@"
}
# poll_on SECS PATTERN NODE ARGS...: repeat `on NODE ARGS` (every 0.2 s) until
# its output matches the extended regex PATTERN; returns 1 if it never did
poll_on() {
    local secs=$1 pat=$2 deadline
    shift 2
    deadline=$((SECONDS + secs))
    while :; do
        on "$@"
        [[ $RC == 0 ]] && grep -qE -- "$pat" <<<"$OUT" && return 0
        ((SECONDS >= deadline)) && return 1
        sleep 0.2
    done
}
has() { grep -qF -- "$1" <<<"$OUT"; }
has_re() { grep -qE -- "$1" <<<"$OUT"; }
has_line() { grep -qxF -- "$1" <<<"$OUT"; }
show() { sed 's/^/      | /' <<<"$OUT" | head -n 60; }
fails_with() { fail "$1 (exit $RC)"; show; }
others() { # others I...: the node indexes not given, in order
    local i j skip
    for i in "${NODES[@]}"; do
        skip=0
        for j in "$@"; do [[ $i == "$j" ]] && skip=1; done
        ((skip)) || echo "$i"
    done
}

echo "== JetStream cluster nats CLI e2e: server=$SERVER nats=$NATS_BIN ($("$NATS_BIN" --version 2>&1))"
echo "   client ports ${CPORT[1]},${CPORT[2]},${CPORT[3]}; monitor ${HPORT[1]},${HPORT[2]},${HPORT[3]}; cluster ${CLPORT[1]},${CLPORT[2]},${CLPORT[3]}"

# A node's startup blocks until every route answered: start all three, then wait.
for i in "${NODES[@]}"; do start_node "$i"; done
up=1
for i in "${NODES[@]}"; do
    if ! wait_client_port "$i" 30; then
        up=0
        node_log_tail "$i"
    fi
done
if ((up)); then
    pass "3 nodes started (n1 n2 n3, same route list) and accept TCP on their client ports"
else
    fail "3-node cluster did not come up (client ports not accepting within 30 s)"
    report
    exit 1
fi

# meta leader: every node names the same one
deadline=$((SECONDS + 30))
while :; do
    ml=()
    for i in "${NODES[@]}"; do ml+=("$(jsz_meta_leader "$i")"); done
    [[ -n ${ml[0]} && ${ml[0]} == "${ml[1]}" && ${ml[0]} == "${ml[2]}" ]] && break
    ((SECONDS >= deadline)) && break
    sleep 0.2
done
if [[ -n ${ml[0]} && ${ml[0]} == "${ml[1]}" && ${ml[0]} == "${ml[2]}" ]]; then
    pass "/jsz of all three nodes names the same meta leader (${ml[0]})"
else
    fail "no agreed meta leader within 30 s (/jsz meta leaders: '${ml[0]}' '${ml[1]}' '${ml[2]}')"
    for i in "${NODES[@]}"; do node_log_tail "$i" 10; done
    report
    exit 1
fi
# JetStream answers on every node
ok=1
for i in "${NODES[@]}"; do
    if ! poll_on 20 'account_info_response' "$i" req '$JS.API.INFO' '' || has '"error"'; then
        ok=0
        fails_with "\$JS.API.INFO on n$i"
    fi
done
((ok)) && pass "\$JS.API.INFO answered without error on all three nodes"

# =================================================== seed: ORDERS, R3 ====
on 1 stream add ORDERS --subjects "orders.*" --storage file --retention limits --replicas 3 --defaults
if [[ $RC == 0 ]] && has_line "Stream ORDERS was created" && has "Information for Stream ORDERS created" &&
    has_re 'Subjects: orders\.\*$' && has_re 'Replicas: 3$' && has_re 'Storage: File$' &&
    has_re 'Retention: Limits$' && has_re 'Messages: 0$'; then
    pass "nats stream add ORDERS --subjects \"orders.*\" --storage file --retention limits --replicas 3 (via n1): Replicas: 3"
else
    fails_with "nats stream add ORDERS --replicas 3 (expected 'Stream ORDERS was created', Replicas: 3, File, Limits, Messages: 0)"
fi

if stream_leader ORDERS 15; then
    L=$LEADER
    read -r F1 F2 <<<"$(others "$L" | tr "\n" " ")"
    pass "/jsz: exactly one node leads ORDERS: n$L (followers n$F1, n$F2)"
else
    fail "/jsz: no single leader of ORDERS within 15 s"
    for i in "${NODES[@]}"; do echo "      | n$i /jsz: $(jsz "$i")"; done
    report
    exit 1
fi
# every node holds a replica
ok=1
for i in "${NODES[@]}"; do [[ -n $(jsz_stream "$i" ORDERS) ]] || ok=0; done
if ((ok)); then pass "/jsz: all three nodes hold a replica of ORDERS"; else fail "/jsz: some node holds no replica of ORDERS"; fi

on "$F1" consumer add ORDERS order-processor --pull --ack explicit --deliver all --defaults
if [[ $RC == 0 ]] && has "Information for Consumer ORDERS > order-processor created" &&
    has_re 'Pull Mode: true$' && has_re 'Deliver Policy: All$' && has_re 'Ack Policy: Explicit$'; then
    pass "nats consumer add ORDERS order-processor --pull --ack explicit --deliver all (via follower n$F1)"
else
    fails_with "nats consumer add ORDERS order-processor via n$F1"
fi

on "$F1" pub orders.new "Order #1234"
if [[ $RC == 0 ]] && has 'Published 11 bytes to "orders.new"'; then
    pass "nats pub orders.new \"Order #1234\" through follower n$F1"
else
    fails_with "nats pub orders.new via n$F1 (expected 'Published 11 bytes to \"orders.new\"')"
fi
if poll_on 10 'Messages: 1$' "$F2" stream info ORDERS && has_re 'Last Sequence: 1 @ '; then
    pass "nats stream info ORDERS (via n$F2): the plain publish through n$F1 was stored (Messages: 1)"
else
    fails_with "nats stream info ORDERS via n$F2 (expected Messages: 1, Last Sequence: 1)"
fi
on "$F1" pub --jetstream orders.new "Order #1235"
if [[ $RC == 0 ]] && has "Stored in Stream: ORDERS Sequence: 2"; then
    pass "nats pub --jetstream through follower n$F1: 'Stored in Stream: ORDERS Sequence: 2'"
else
    fails_with "nats pub --jetstream orders.new via n$F1 (expected 'Stored in Stream: ORDERS Sequence: 2')"
fi

on "$F2" consumer next ORDERS order-processor
if [[ $RC == 0 ]] && has_re 'subj: orders\.new / tries: 1 / cons seq: 1 / str seq: 1 / pending: 1$' &&
    has_line "Order #1234" && has_line "Acknowledged message"; then
    pass "nats consumer next ORDERS order-processor through the third node n$F2: 'Order #1234' (str seq 1), acked"
else
    fails_with "nats consumer next via n$F2 (expected tries: 1 / cons seq: 1 / str seq: 1 / pending: 1, 'Order #1234', 'Acknowledged message')"
fi

on "$F2" stream info ORDERS
nrep=$(grep -cE '^ *Replica: n[0-9]+,' <<<"$OUT" || true)
if [[ $RC == 0 ]] && has_re "Leader: n$L( |\$)" && ((nrep == 2)) && has_re "Replica: n$F1," &&
    has_re "Replica: n$F2," && has_re "Name: $CLUSTER_NAME\$" && has_re 'Messages: 2$'; then
    pass "nats stream info ORDERS: Cluster Information with 'Leader: n$L' and two 'Replica:' lines (n$F1, n$F2), Messages: 2"
else
    fails_with "nats stream info ORDERS (expected 'Name: $CLUSTER_NAME', 'Leader: n$L', 'Replica: n$F1,' and 'Replica: n$F2,', Messages: 2; saw $nrep Replica lines)"
fi

if poll_on 10 'Acknowledgment Floor: Consumer sequence: 1 Stream sequence: 1' "$L" consumer info ORDERS order-processor &&
    has "Information for Consumer ORDERS > order-processor created" &&
    has_re 'Last Delivered Message: Consumer sequence: 1 Stream sequence: 1' &&
    has_re 'Outstanding Acks: 0 out of maximum 1,000$' && has_re 'Unprocessed Messages: 1$'; then
    pass "nats consumer info ORDERS order-processor (via leader n$L): ack floor 1/1, Outstanding Acks: 0, Unprocessed Messages: 1"
else
    fails_with "nats consumer info ORDERS order-processor (expected ack floor 1/1, Outstanding Acks: 0, Unprocessed Messages: 1)"
fi
if has_re "Leader: n[0-9]" && has_re 'Replica: n[0-9]+,'; then
    pass "nats consumer info shows the consumer's cluster (Leader: and Replica: lines)"
else
    fails_with "nats consumer info (expected a Cluster Information block with Leader: and Replica: lines)"
fi

# natscli asks for the stepdown, then polls consumer info until another leader is named.
on "$F1" consumer cluster step-down ORDERS order-processor
if [[ $RC == 0 ]] && has "New leader elected"; then
    pass "nats consumer cluster step-down ORDERS order-processor (via n$F1): $(grep -o 'New leader elected.*' <<<"$OUT")"
else
    fails_with "nats consumer cluster step-down ORDERS order-processor (expected 'New leader elected')"
fi

# ================================================ core NATS across nodes ====
# bg_nats NODE OUTFILE ARGS...: a background nats client on NODE (bounded), PID in BG_PID
BG_PID=
bg_nats() {
    local node=$1 out=$2
    shift 2
    timeout -k 2 60 "$NATS_BIN" --no-context --server "$(url_of "$node")" "$@" >"$out" 2>&1 &
    BG_PID=$!
    PIDS+=("$BG_PID")
}
# ---- pub/sub: subscriber on n1, publisher on n2 ----
bg_nats 1 "$TMP/sub.out" sub core.hello --count 1 --raw
sub_pid=$BG_PID
# interest propagates asynchronously: publish (every 0.2 s, up to 10 s) until the subscriber got one
got=0
for ((i = 0; i < 50; i++)); do
    on 2 pub core.hello "hello-across-nodes"
    alive "$sub_pid" || { got=1; break; }
    sleep 0.2
    alive "$sub_pid" || { got=1; break; }
done
wait_exit "$sub_pid" 5
if ((got)) && ((WAIT_RC == 0)) && grep -qxF "hello-across-nodes" "$TMP/sub.out"; then
    pass "core pub/sub across nodes: nats sub on n1 received 'hello-across-nodes' published on n2"
else
    fail "core pub/sub across nodes: nats sub on n1 got nothing from n2 within 10 s (exit $WAIT_RC)"
    sed 's/^/      | /' "$TMP/sub.out" | head -n 20
fi

# ---- request/reply: responder on n2, requester on n3 ----
bg_nats 2 "$TMP/reply.out" reply core.echo "pong-from-n2"
rep_pid=$BG_PID
ok=0
for ((i = 0; i < 50; i++)); do
    on 3 --timeout 1s req core.echo "ping"
    if [[ $RC == 0 ]] && has_line "pong-from-n2"; then ok=1; break; fi
    sleep 0.2
done
if ((ok)); then
    pass "request/reply across nodes: nats req on n3 answered 'pong-from-n2' by nats reply on n2"
else
    fails_with "request/reply across nodes (nats req on n3 never answered by n2's nats reply within ~10 s)"
fi
stop_pid "$rep_pid"

# ---- queue group: members on n1 and n2, publisher on n3 ----
bg_nats 1 "$TMP/q1.out" sub core.work --queue workers --raw
q1=$BG_PID
bg_nats 2 "$TMP/q2.out" sub core.work --queue workers --raw
q2=$BG_PID
# readiness: probes from n3 until both members have received one (bounded)
ok=0
for ((i = 0; i < 100; i++)); do
    on 3 pub core.work "probe-$i"
    sleep 0.1
    if grep -q '^probe-' "$TMP/q1.out" && grep -q '^probe-' "$TMP/q2.out"; then ok=1; break; fi
done
if ((ok)); then
    pass "queue group across nodes: both members (n1, n2) receive messages published on n3"
else
    fail "queue group across nodes: after $i probes from n3, not both members got one (n1: $(grep -c '^probe-' "$TMP/q1.out" || true), n2: $(grep -c '^probe-' "$TMP/q2.out" || true))"
fi
on 3 pub core.work "job-{{Count}}" --count 40
if [[ $RC != 0 ]]; then fails_with "nats pub core.work --count 40 via n3"; fi
# bounded wait until 40 jobs arrived in total (or 5 s)
for ((i = 0; i < 50; i++)); do
    n=$(cat "$TMP/q1.out" "$TMP/q2.out" | grep -c '^job-' || true)
    ((n >= 40)) && break
    sleep 0.1
done
sleep 0.3 # a duplicate would show up here
stop_pid "$q1"
stop_pid "$q2"
n1=$(grep -c '^job-' "$TMP/q1.out" || true)
n2=$(grep -c '^job-' "$TMP/q2.out" || true)
uniq_n=$(cat "$TMP/q1.out" "$TMP/q2.out" | grep '^job-' | sort -u | wc -l)
if ((n1 + n2 == 40 && uniq_n == 40)); then
    pass "queue group across nodes: 40 messages from n3, each delivered to exactly one member (n1: $n1, n2: $n2)"
else
    fail "queue group across nodes: 40 published on n3, members got n1=$n1 n2=$n2 ($uniq_n distinct; want 40 in total, no duplicates)"
fi

# ================================================= failover (kill -9) ======
if stream_leader ORDERS 10; then
    L=$LEADER
    read -r S1 S2 <<<"$(others "$L" | tr "\n" " ")"
    pass "/jsz before the kill: n$L leads ORDERS"
else
    fail "/jsz: no single leader of ORDERS before the kill"
    report
    exit 1
fi
stop_pid "${NODE_PID[$L]}" KILL
t0=$(date +%s.%N)
if alive "${NODE_PID[$L]}"; then fail "kill -9 of n$L (pid ${NODE_PID[$L]}): still alive"; else pass "kill -9 of the stream leader n$L (pid ${NODE_PID[$L]})"; fi

# acked publish through a survivor, retried (same Nats-Msg-Id) for up to 20 s
ok=0 tries=0
deadline=$((SECONDS + 20))
while ((SECONDS < deadline)); do
    tries=$((tries + 1))
    on "$S1" --timeout 2s pub --jetstream -H "Nats-Msg-Id:failover-1" orders.new "Order #after-failover"
    if [[ $RC == 0 ]] && has "Stored in Stream: ORDERS Sequence: 3"; then ok=1; break; fi
    sleep 0.2
done
gap=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
if ((ok)); then
    pass "nats pub --jetstream via survivor n$S1 after the kill: 'Stored in Stream: ORDERS Sequence: 3' (attempt $tries, ${gap}s after the kill)"
else
    fails_with "nats pub --jetstream via n$S1 after killing n$L: no 'Sequence: 3' ack within 20 s ($tries attempts)"
fi

if poll_on 10 'Messages: 3$' "$S2" stream info ORDERS && has_re 'Leader: n[0-9]' && ! has_re "Leader: n$L( |\$)" &&
    has_re 'Last Sequence: 3 @ '; then
    nl=$(grep -oE 'Leader: n[0-9]+' <<<"$OUT" | head -n 1)
    pass "nats stream info ORDERS via n$S2 after the failover: new leader ($nl, was n$L), Messages: 3, Last Sequence: 3"
else
    fails_with "nats stream info via n$S2 after the failover (expected a Leader: other than n$L, Messages: 3, Last Sequence: 3)"
fi

# restart the killed node with the same flags and data dir
start_node "$L"
if wait_client_port "$L" 30; then
    pass "n$L restarts with the same flags and data dir"
else
    fail "n$L did not come back (client port not accepting within 30 s)"
    node_log_tail "$L"
fi
# all three /jsz replicas converge on last_seq 3
deadline=$((SECONDS + 30))
while :; do
    states=()
    conv=1
    for i in "${NODES[@]}"; do
        s=$(jsz_stream "$i" ORDERS)
        states+=("n$i:${s:-none}")
        [[ -n $s && ${s#* } == "3 3" ]] || conv=0
    done
    ((conv)) && break
    ((SECONDS >= deadline)) && break
    sleep 0.2
done
if ((conv)); then
    pass "/jsz of all three nodes converges: ORDERS messages 3, last_seq 3 on n1, n2, n3 (${states[*]})"
else
    fail "/jsz did not converge on last_seq 3 within 30 s after the restart (leader messages last_seq: ${states[*]})"
fi
if stream_leader ORDERS 10; then
    pass "/jsz after the restart: exactly one leader of ORDERS (n$LEADER)"
else
    fail "/jsz after the restart: no single leader of ORDERS"
fi

# the consumer goes on from its ack floor, through the restarted node
on "$L" consumer next ORDERS order-processor
if [[ $RC == 0 ]] && has_re 'str seq: 2 / pending: 1$' && has_line "Order #1235" && has_line "Acknowledged message"; then
    pass "nats consumer next via the restarted n$L: continues at str seq 2 ('Order #1235')"
else
    fails_with "nats consumer next via restarted n$L (expected str seq 2 / pending: 1, 'Order #1235')"
fi
on "$S1" consumer next ORDERS order-processor
if [[ $RC == 0 ]] && has_re 'str seq: 3 / pending: 0$' && has_line "Order #after-failover"; then
    pass "nats consumer next via n$S1: 'Order #after-failover' (str seq 3), stored once"
else
    fails_with "nats consumer next via n$S1 (expected str seq 3 / pending: 0, 'Order #after-failover')"
fi

# ============================================================ deletion ======
on "$S2" stream rm -f ORDERS
if [[ $RC == 0 ]]; then
    pass "nats stream rm -f ORDERS"
else
    fails_with "nats stream rm -f ORDERS"
fi
deadline=$((SECONDS + 10))
while :; do
    on "$L" stream ls -n
    [[ $RC == 0 ]] && ! has_line ORDERS && break
    ((SECONDS >= deadline)) && break
    sleep 0.2
done
if [[ $RC == 0 ]] && ! has_line ORDERS; then
    pass "nats stream ls -n (via n$L) no longer lists ORDERS"
else
    fails_with "nats stream ls -n after rm (ORDERS still listed)"
fi
deadline=$((SECONDS + 15))
while :; do
    left=
    for i in "${NODES[@]}"; do [[ -n $(jsz_stream "$i" ORDERS) ]] && left+=" n$i"; done
    [[ -z $left ]] && break
    ((SECONDS >= deadline)) && break
    sleep 0.2
done
if [[ -z $left ]]; then
    pass "/jsz: no node holds a replica of ORDERS any more"
else
    fail "/jsz: replicas of ORDERS still on$left 15 s after the delete"
fi

# ========================================== schema validation, overall ======
if grep -q "is not a valid" "$ALL_OUT"; then
    fail "natscli JSON-schema validation errors in some replies:"
    grep -B3 -A3 "is not a valid" "$ALL_OUT" | head -n 60 | sed 's/^/      | /'
else
    pass "no natscli schema-validation errors ('server response is not a valid ...') in any output"
fi
for i in "${NODES[@]}"; do
    if grep -q 'panicked' "$TMP/n$i.log" 2>/dev/null; then
        fail "n$i logged a panic"
        grep -m3 -A3 'panicked' "$TMP/n$i.log" | sed 's/^/      | /'
    fi
done

report
((FAILED == 0))

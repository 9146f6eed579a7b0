#!/usr/bin/env bash
# The three-node cluster of docker-compose.yml in containers, with a node killed (issue 18):
#   1. deploy/image.sh builds the scratch image from the server under test (a tag of its own);
#   2. the compose file's cluster comes up (a project, network, host ports and volumes of its
#      own: it runs beside a developer's `docker compose up` and the other suites), every
#      container healthy (/healthz), one meta leader;
#   3. the nats CLI creates ORDERS with --replicas 3 and publishes with acks;
#   4. failover: while a publisher goes on (every message retried with its Nats-Msg-Id until
#      acked), the stream leader's container gets `docker kill`; the survivors elect a leader
#      and acks resume (the gap from the kill to the first ack of a publish sent after it is
#      printed); `compose start` brings the node back, it rejoins, and every node's own
#      replica (each node's /jsz) holds exactly the acknowledged messages;
#   5. a rolling restart (`compose restart`, SIGTERM) of n1, n2, n3, one at a time, each back
#      and caught up before the next, under the load of two publishers: nothing acked lost,
#      nothing stored twice, all three replicas the same;
#   6. `compose down -v` removes the containers, the network and the volumes.
# Every wait is bounded; the EXIT trap takes the project down (volumes too) and removes the
# image, whatever failed.
#
# Usage:
#   tests/e2e/docker_cluster.sh              # packages target/release/jetraft (SERVER_BIN)
#   COMPOSE=docker-compose tests/e2e/docker_cluster.sh   # force Compose v1
#
# Environment:
#   SERVER_BIN  the jetraft binary to package (default target/release/jetraft); any other
#               server (run_all.sh's SERVER_BIN=nats-server) is skipped: the checks read
#               jetraft's per-replica /jsz.
#   COMPOSE     compose command (default: `docker compose` if the v2 plugin answers, else
#               `docker-compose`).
#   NATS_BIN    nats CLI (default: `nats` on PATH, else $(go env GOPATH)/bin/nats).
#   CI          if "true", a missing nats CLI is a failure instead of a skip. A missing Docker
#               engine is a loud SKIP (exit 0) everywhere: .ci/run starts one when it can.
#   KEEP_TMP    if set, the temp dir (publisher records, container logs) is kept.
#
# Prints one PASS/FAIL line per check and ends with "N passed, M failed".
set -euo pipefail
unset NOVALIDATE

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FG_TIMEOUT=20 # upper bound (s) for any foreground nats invocation
T_START=$SECONDS

skip_docker() {
    skip_banner "SKIP: $1" "      tests/e2e/docker_cluster.sh needs a Docker engine; .ci/run installs and starts one"
    echo "SKIP: docker cluster e2e ($1)"
    echo "0 passed, 0 failed"
    exit 0
}

if ! NATS_BIN=$(find_nats); then
    skip_banner "SKIP: nats CLI not installed" "      go install github.com/nats-io/natscli/nats@v0.5.0"
    skip_exit "nats CLI is required when CI=true"
fi
require_server
if [[ $("$SERVER" --version 2>&1 || true) != *jetraft* ]]; then
    echo "SKIP: docker cluster e2e runs jetraft only (SERVER_BIN=$SERVER)"
    echo "0 passed, 0 failed"
    exit 0
fi
command -v docker >/dev/null 2>&1 || skip_docker "no docker CLI"
timeout 20 docker info >/dev/null 2>&1 || skip_docker "no Docker engine answers (docker info failed)"
if [[ -n ${COMPOSE:-} ]]; then
    read -r -a COMPOSE_CMD <<<"$COMPOSE"
elif timeout 20 docker compose version >/dev/null 2>&1; then
    COMPOSE_CMD=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE_CMD=(docker-compose)
else
    skip_docker "neither 'docker compose' (v2) nor 'docker-compose' (v1) is installed"
fi
COMPOSE_VERSION=$(timeout 20 "${COMPOSE_CMD[@]}" version 2>/dev/null | head -n 1 || true)
V2=0
[[ ${COMPOSE_CMD[*]} == "docker compose" ]] && V2=1

KEEP_LOGS=${KEEP_TMP:+1}
setup_tmp jetraft-e2e-docker

# ------------------------------------------------- project, ports, network ----
PROJECT=jrdocker$$
IMAGE_TAG=jetraft:e2e-$$
NODES=(1 2 3)
declare -A CPORT=() HPORT=() CID=()
mapfile -t ports < <(free_ports 6)
for i in "${NODES[@]}"; do
    CPORT[$i]=${ports[2 * (i - 1)]}
    HPORT[$i]=${ports[2 * (i - 1) + 1]}
done
# A /24 that overlaps no Docker network and no host route: the compose default (172.28.42)
# may be a developer's running cluster, and Docker's own pools hand out 172.17-31.0.0/16.
pick_net() {
    local taken
    taken=$({
        docker network ls -q | xargs -r docker network inspect \
            --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}' 2>/dev/null
        ip -4 route 2>/dev/null | awk '{print $1}'
    } | tr ' ' '\n' | grep -E '^[0-9.]+(/[0-9]+)?$' || true)
    python3 -c '
import ipaddress, sys
taken = [ipaddress.ip_network(t, strict=False) for t in sys.argv[1].split()]
for third in range(200, 256):
    for second in (28, 29, 30, 31, 27, 26):
        net = ipaddress.ip_network(f"172.{second}.{third}.0/24")
        if not any(net.overlaps(t) for t in taken):
            print(f"172.{second}.{third}")
            sys.exit(0)
sys.exit(1)' "$taken"
}
NET=$(pick_net) || { fail "no free 172.x /24 for the test network"; report; exit 1; }
export JETRAFT_IMAGE=$IMAGE_TAG JETRAFT_NET=$NET
export JETRAFT_N1_PORT=${CPORT[1]} JETRAFT_N2_PORT=${CPORT[2]} JETRAFT_N3_PORT=${CPORT[3]}
export JETRAFT_N1_HTTP=${HPORT[1]} JETRAFT_N2_HTTP=${HPORT[2]} JETRAFT_N3_HTTP=${HPORT[3]}
ALL_URLS="nats://127.0.0.1:${CPORT[1]},nats://127.0.0.1:${CPORT[2]},nats://127.0.0.1:${CPORT[3]}"

# compose ARGS...: the compose command on this project, bounded
compose() {
    timeout -k 5 180 "${COMPOSE_CMD[@]}" --project-name "$PROJECT" \
        --file "$REPO_ROOT/docker-compose.yml" "$@"
}
UP=0 # set once `compose up` ran: the trap takes the project down
IMAGE_BUILT=0
teardown() {
    local rc=$?
    set +e
    local p
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    PIDS=()
    if ((UP)); then
        compose logs --no-color >"$TMP/compose.log" 2>&1
        if ((FAILED > 0)) || [[ $rc != 0 ]]; then
            echo "---- container logs (last 15 lines of each node) ----"
            for i in "${NODES[@]}"; do
                echo "      n$i:"
                compose logs --no-color --tail 15 "n$i" 2>&1 | sed 's/^/      | /'
            done
        fi
        compose down --volumes --remove-orphans --timeout 10 >/dev/null 2>&1 ||
            echo "teardown: compose down failed; left: $(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" | tr '\n' ' ')"
    fi
    ((IMAGE_BUILT)) && docker rmi -f "$IMAGE_TAG" >/dev/null 2>&1
    cleanup
}
trap teardown EXIT

echo "== docker cluster e2e: server=$SERVER nats=$NATS_BIN ($("$NATS_BIN" --version 2>&1))"
echo "   engine $(docker version --format '{{.Server.Version}}' 2>/dev/null), compose: ${COMPOSE_CMD[*]} ($COMPOSE_VERSION)"
echo "   project $PROJECT, network $NET.0/24, clients ${CPORT[*]}, monitoring ${HPORT[*]}"

# ------------------------------------------------------------------ helpers ----
ALL_OUT=$TMP/all-nats-output.log
OUT=
RC=0
URL=
url_of() { echo "nats://127.0.0.1:${CPORT[$1]}"; }
# on NODE ARGS...: one bounded nats invocation against NODE (or "all": the three URLs), output
# in $OUT, exit code in $RC
on() {
    if [[ $1 == all ]]; then URL=$ALL_URLS; else URL=$(url_of "$1"); fi
    shift
    RC=0
    OUT=$(timeout "$FG_TIMEOUT" "$NATS_BIN" --no-context --server "$URL" "$@" 2>&1) || RC=$?
    { echo "\$ nats --server $URL $*"; echo "$OUT"; echo "(exit $RC)"; } >>"$ALL_OUT"
}
has() { grep -qF -- "$1" <<<"$OUT"; }
has_re() { grep -qE -- "$1" <<<"$OUT"; }
show() { sed 's/^/      | /' <<<"$OUT" | head -n 40; }
fails_with() { fail "$1 (exit $RC)"; show; }

jsz_raw() { curl -fsS --max-time 2 "http://127.0.0.1:${HPORT[$1]}/jsz" 2>/dev/null || true; }
# jsz NODE [STREAM]: "<meta_leader|-> <leader 0|1> <messages> <bytes> <first_seq> <last_seq>"
# of NODE's own replica of STREAM (default ORDERS; the last five fields empty if it holds none);
# empty if NODE does not answer
jsz() {
    python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[1])
except Exception:
    sys.exit(0)
out = [d.get("meta_leader") or "-"]
for s in d.get("streams") or []:
    if s.get("name") == sys.argv[2]:
        out += [str(int(bool(s.get("leader")))), str(s.get("messages", 0)), str(s.get("bytes", 0)),
                str(s.get("first_seq", 0)), str(s.get("last_seq", 0))]
        break
print(" ".join(out))' "$(jsz_raw "$1")" "${2:-ORDERS}" 2>/dev/null || true
}
# stream_leader [SECS]: LEADER = the one node whose /jsz says it leads ORDERS (bounded)
LEADER=
stream_leader() {
    local deadline=$((SECONDS + ${1:-15})) i n cand f
    while :; do
        n=0 cand=
        for i in "${NODES[@]}"; do
            read -r -a f <<<"$(jsz "$i")"
            [[ ${f[1]:-} == 1 ]] && { n=$((n + 1)); cand=$i; }
        done
        ((n == 1)) && { LEADER=$cand; return 0; }
        ((SECONDS >= deadline)) && { LEADER=; return 1; }
        sleep 0.2
    done
}
health() { docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "${CID[$1]}" 2>/dev/null || echo gone; }
running() { [[ $(docker inspect --format '{{.State.Running}}' "${CID[$1]}" 2>/dev/null) == true ]]; }
# wait_healthy SECS NODE...: every NODE's container reports healthy
wait_healthy() {
    local deadline=$((SECONDS + $1)) i ok
    shift
    while :; do
        ok=1
        for i in "$@"; do [[ $(health "$i") == healthy ]] || ok=0; done
        ((ok)) && return 0
        ((SECONDS >= deadline)) && return 1
        sleep 0.3
    done
}
# wait_meta SECS: all three nodes name the same meta leader; META = its name
META=
wait_meta() {
    local deadline=$((SECONDS + $1)) i a b c
    while :; do
        a=$(jsz 1) b=$(jsz 2) c=$(jsz 3)
        a=${a%% *} b=${b%% *} c=${c%% *}
        if [[ -n $a && $a != - && $a == "$b" && $a == "$c" ]]; then META=$a; return 0; fi
        ((SECONDS >= deadline)) && { META="n1:'$a' n2:'$b' n3:'$c'"; return 1; }
        sleep 0.3
    done
}
# wait_caught_up SECS NODE SEQ: NODE's replica of ORDERS has applied up to SEQ at least
wait_caught_up() {
    local deadline=$((SECONDS + $1)) f
    while :; do
        read -r -a f <<<"$(jsz "$2")"
        [[ -n ${f[5]:-} ]] && ((f[5] >= $3)) && return 0
        ((SECONDS >= deadline)) && return 1
        sleep 0.2
    done
}

# ---- publishers: background loops of `nats pub --jetstream`, every message retried with its
# Nats-Msg-Id until acked (or PUB_RETRY_S s; then the publisher gives up and exits 1) ----
PUB_RETRY_S=45
# publisher NAME: publishes NAME-1, NAME-2, ... on orders.NAME-<i> (one subject per message:
# `nats stream subjects` then shows each stored message by its id); an acked one appends
# "<id> <seq> <t_sent> <t_acked> <attempts>" to $TMP/acked-NAME (t_sent: the acked attempt's
# start, epoch seconds); failed attempts go to $TMP/pubfail-NAME. Ends before the next message
# once $TMP/stop-NAME exists.
publisher() {
    local name=$1 i=0 t0 out rc deadline acked tries
    while [[ ! -e $TMP/stop-$name ]] && ((i < 100000)); do
        i=$((i + 1))
        deadline=$((SECONDS + PUB_RETRY_S))
        acked=0 tries=0
        while ((SECONDS < deadline)); do
            tries=$((tries + 1))
            t0=$EPOCHREALTIME
            rc=0
            out=$(timeout -k 2 10 "$NATS_BIN" --no-context --server "$ALL_URLS" --timeout 2s \
                pub --jetstream -H "Nats-Msg-Id:$name-$i" "orders.$name-$i" "order $name-$i" 2>&1) || rc=$?
            # natscli prints the sequence with thousands separators (1,234)
            if [[ $rc == 0 && $out =~ Stored\ in\ Stream:\ ORDERS\ Sequence:\ ([0-9,]+) ]]; then
                echo "$name-$i ${BASH_REMATCH[1]//,/} $t0 $EPOCHREALTIME $tries" >>"$TMP/acked-$name"
                acked=1
                break
            fi
            echo "$name-$i $t0 exit $rc: $(tr '\n' ' ' <<<"$out" | cut -c1-160)" >>"$TMP/pubfail-$name"
            sleep 0.1 # not a wait for a condition: a pause between retries of a failed publish
        done
        if ((!acked)); then
            echo "$name-$i: no ack within ${PUB_RETRY_S}s" >>"$TMP/pubfail-$name"
            exit 1
        fi
    done
}
declare -A PUB_PID=()
start_publisher() {
    : >"$TMP/acked-$1"
    publisher "$1" &
    PUB_PID[$1]=$!
    PIDS+=("${PUB_PID[$1]}")
}
lines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
acked_count() { lines "$TMP/acked-$1"; }
# wait_acks SECS NAME N: publisher NAME has N acked messages at least
wait_acks() {
    local deadline=$((SECONDS + $1))
    while (($(acked_count "$2") < $3)); do
        alive "${PUB_PID[$2]}" || return 1
        ((SECONDS >= deadline)) && return 1
        sleep 0.2
    done
}
# stop_publisher NAME: let NAME finish its message (bounded by PUB_RETRY_S) and stop; true if
# it ended with every message acked
stop_publisher() {
    touch "$TMP/stop-$1"
    wait_exit "${PUB_PID[$1]}" $((PUB_RETRY_S + 15))
    ((WAIT_RC == 0))
}

# check_exact LABEL: every acked message (all publishers so far) is stored once and nothing
# else is: the acked sequences are exactly 1..N, every node's own replica (its /jsz) has
# messages N, first_seq 1, last_seq N and the same bytes (waits up to 30 s for the replicas
# to converge), and `nats stream subjects` lists exactly the acked ids, once each
check_exact() {
    local label=$1 n nd i f deadline states conv bytes
    cat "$TMP"/acked-* 2>/dev/null | sort -k2,2n >"$TMP/acked.all"
    n=$(wc -l <"$TMP/acked.all")
    nd=$(awk '{print $2}' "$TMP/acked.all" | sort -un | wc -l)
    if ((n > 0 && nd == n)) && [[ $(awk '{print $2}' "$TMP/acked.all" | head -n 1) == 1 ]] &&
        [[ $(awk '{print $2}' "$TMP/acked.all" | tail -n 1) == "$n" ]]; then
        pass "$label: $n acked publishes, sequences exactly 1..$n (no gap, none acked twice)"
    else
        fail "$label: $n acked publishes but $nd distinct sequences ($(awk '{print $2}' "$TMP/acked.all" | head -n 1)..$(awk '{print $2}' "$TMP/acked.all" | tail -n 1))"
    fi
    deadline=$((SECONDS + 30))
    while :; do
        states=() conv=1 bytes=
        for i in "${NODES[@]}"; do
            read -r -a f <<<"$(jsz "$i")"
            states+=("n$i:${f[2]:-?}/${f[3]:-?}B/${f[4]:-?}..${f[5]:-?}")
            [[ ${f[2]:-} == "$n" && ${f[4]:-} == 1 && ${f[5]:-} == "$n" ]] || conv=0
            [[ -z $bytes ]] && bytes=${f[3]:-x}
            [[ ${f[3]:-y} == "$bytes" ]] || conv=0
        done
        ((conv)) && break
        ((SECONDS >= deadline)) && break
        sleep 0.3
    done
    if ((conv)); then
        pass "$label: every node's own replica (/jsz) holds exactly the $n acked messages, seqs 1..$n, $bytes bytes (${states[*]})"
    else
        fail "$label: the replicas (/jsz messages/bytes/first..last) are not all the $n acked messages within 30 s: ${states[*]}"
    fi
    on all stream subjects ORDERS 'orders.>' --json
    if [[ $RC == 0 ]] && python3 -c '
import json, sys
got = json.loads(sys.argv[1])
want = {"orders." + line.split()[0] for line in open(sys.argv[2])}
bad = {s: c for s, c in got.items() if c != 1}
sys.exit(0 if set(got) == want and not bad else 1)' "$OUT" "$TMP/acked.all" 2>/dev/null; then
        pass "$label: nats stream subjects ORDERS: exactly the $n acked ids, one message each"
    else
        fails_with "$label: nats stream subjects ORDERS (expected exactly the $n acked subjects, count 1 each)"
    fi
}

# =============================================================== image ====
t=$SECONDS
if out=$(IMAGE=$IMAGE_TAG JETRAFT_BIN=$SERVER timeout 300 bash "$REPO_ROOT/deploy/image.sh" 2>&1); then
    IMAGE_BUILT=1
    pass "deploy/image.sh: $(tail -n 1 <<<"$out") in $((SECONDS - t)) s"
else
    fail "deploy/image.sh failed"
    sed 's/^/      | /' <<<"$out" | tail -n 20
    report
    exit 1
fi
if [[ -z $(docker image inspect --format '{{.Parent}}' "$IMAGE_TAG" 2>/dev/null) ]] &&
    [[ $(docker image inspect --format '{{len .RootFS.Layers}}' "$IMAGE_TAG") == 1 ]]; then
    pass "the image is one layer with no base image (nothing pulled)"
else
    fail "the image has a base image or more than one layer"
fi

# ================================================================= up ====
t=$SECONDS
UP=1
if ((V2)); then up_args=(up -d --wait); else up_args=(up -d); fi
if out=$(compose "${up_args[@]}" 2>&1); then
    pass "${COMPOSE_CMD[*]} ${up_args[*]} (n1 n2 n3 from $IMAGE_TAG) in $((SECONDS - t)) s"
else
    fail "${COMPOSE_CMD[*]} ${up_args[*]} failed"
    sed 's/^/      | /' <<<"$out" | tail -n 20
    report
    exit 1
fi
for i in "${NODES[@]}"; do CID[$i]=$(compose ps -q "n$i" 2>/dev/null | head -n 1); done
if [[ -n ${CID[1]} && -n ${CID[2]} && -n ${CID[3]} ]]; then
    pass "one container per service (n1 ${CID[1]:0:12}, n2 ${CID[2]:0:12}, n3 ${CID[3]:0:12})"
else
    fail "compose ps -q did not name three containers"
    report
    exit 1
fi
if wait_healthy 90 "${NODES[@]}"; then
    pass "all three containers healthy (/healthz through deploy/healthz.sh) $((SECONDS - t)) s after up"
else
    fail "containers not healthy within 90 s: n1 $(health 1), n2 $(health 2), n3 $(health 3)"
    report
    exit 1
fi
ok=1
for i in "${NODES[@]}"; do
    ip=$(docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${CID[$i]}")
    [[ $ip == "$NET.1$i" ]] || ok=0
done
if ((ok)); then
    pass "fixed addresses: n1 $NET.11, n2 $NET.12, n3 $NET.13"
else
    fail "the containers do not have the fixed addresses $NET.11-13"
fi
if wait_meta 60; then
    pass "/jsz of all three nodes (host ports ${HPORT[*]}) names the same meta leader ($META)"
else
    fail "no agreed meta leader within 60 s ($META)"
    report
    exit 1
fi

# ====================================================== stream, acks ====
on 1 stream add ORDERS --subjects "orders.*" --storage file --retention limits --replicas 3 --defaults
if [[ $RC == 0 ]] && has "Stream ORDERS was created" && has_re 'Replicas: 3$'; then
    pass "nats stream add ORDERS --subjects \"orders.*\" --replicas 3 (via n1)"
else
    fails_with "nats stream add ORDERS --replicas 3"
    report
    exit 1
fi
on 2 pub --jetstream -H "Nats-Msg-Id:first" orders.first "the first order"
if [[ $RC == 0 ]] && has "Stored in Stream: ORDERS Sequence: 1"; then
    echo "first 1 $EPOCHREALTIME $EPOCHREALTIME 1" >"$TMP/acked-first"
    pass "nats pub --jetstream via n2: 'Stored in Stream: ORDERS Sequence: 1'"
else
    fails_with "nats pub --jetstream via n2 (expected Sequence: 1)"
fi
on 3 stream info ORDERS
nrep=$(grep -cE '^ *Replica: n[0-9]+,' <<<"$OUT" || true)
if [[ $RC == 0 ]] && has_re 'Leader: n[1-3]' && ((nrep == 2)) && has_re 'Messages: 1$'; then
    pass "nats stream info ORDERS via n3: $(grep -oE 'Leader: n[1-3]' <<<"$OUT") and two Replica: lines, Messages: 1"
else
    fails_with "nats stream info ORDERS via n3 (expected Leader:, two Replica: lines, Messages: 1)"
fi

# ======================================================= failover ====
if stream_leader 15; then
    L=$LEADER
    pass "/jsz: n$L leads ORDERS"
else
    fail "/jsz: no single leader of ORDERS within 15 s"
    report
    exit 1
fi
start_publisher fo
if wait_acks 60 fo 10; then
    pass "publisher fo (nats pub --jetstream, Nats-Msg-Id fo-<i>, all three URLs): 10 acks before the kill"
else
    fail "publisher fo: not 10 acks within 60 s ($(acked_count fo)); failures: $(tail -n 3 "$TMP/pubfail-fo" 2>/dev/null)"
fi
T_KILL=$EPOCHREALTIME
# the kill time: when `docker kill` has returned (the container is dead); a publish that started
# after it cannot have been answered by the old leader
if docker kill "${CID[$L]}" >/dev/null 2>&1 && T_KILL=$EPOCHREALTIME && ! running "$L"; then
    pass "docker kill of the stream leader's container (n$L)"
else
    fail "docker kill of n$L's container (${CID[$L]:0:12}) failed"
fi
# 20 acks of publishes sent after the kill
deadline=$((SECONDS + 60))
while :; do
    after=$(awk -v k="$T_KILL" '$3 > k' "$TMP/acked-fo" | wc -l)
    ((after >= 20)) && break
    ((SECONDS >= deadline)) && break
    alive "${PUB_PID[fo]}" || break
    sleep 0.2
done
GAP=$(awk -v k="$T_KILL" '$3 > k { if (min == "" || $4 < min) min = $4 } END { if (min != "") printf "%.2f", min - k }' "$TMP/acked-fo")
NEXT=$(awk -v k="$T_KILL" '$4 > k { if (min == "" || $4 < min) min = $4 } END { if (min != "") printf "%.2f", min - k }' "$TMP/acked-fo")
if ((after >= 20)); then
    pass "publishing goes on after the kill: 20 acks of publishes sent after it; failover gap ${GAP} s (kill -> first PubAck of a publish sent after the kill; next PubAck of any: ${NEXT} s; $(lines "$TMP/pubfail-fo") failed attempts retried)"
else
    fail "publishing after the kill: only $after acks within 60 s; last failures:"
    tail -n 5 "$TMP/pubfail-fo" 2>/dev/null | sed 's/^/      | /'
fi
on all stream info ORDERS
if [[ $RC == 0 ]] && has_re 'Leader: n[1-3]' && ! has_re "Leader: n$L( |\$)"; then
    pass "nats stream info after the kill: new leader ($(grep -oE 'Leader: n[1-3]' <<<"$OUT"), was n$L)"
else
    fails_with "nats stream info after the kill (expected a Leader: other than n$L)"
fi

t=$SECONDS
if out=$(compose start "n$L" 2>&1) && wait_healthy 60 "$L"; then
    pass "compose start n$L: the container is back and healthy in $((SECONDS - t)) s (same volume)"
else
    fail "compose start n$L: not healthy within 60 s ($(health "$L")): $out"
fi
mark=$(tail -n 1 "$TMP/acked-fo" | awk '{print $2}')
if wait_caught_up 60 "$L" "${mark:-1}"; then
    pass "n$L rejoined: its own replica caught up to seq $mark while the publisher went on"
else
    fail "n$L did not catch up to seq $mark within 60 s (its /jsz: $(jsz "$L"))"
fi
if wait_acks 30 fo $(($(acked_count fo) + 5)); then
    pass "5 more acks with n$L back"
else
    fail "no 5 more acks within 30 s after n$L rejoined"
fi
if stop_publisher fo; then
    pass "publisher fo stopped: $(acked_count fo) messages, every one acked"
else
    fail "publisher fo ended with a message never acked (exit $WAIT_RC): $(tail -n 1 "$TMP/pubfail-fo" 2>/dev/null)"
fi
check_exact "after the failover"

# =============================================== rolling restart ====
start_publisher ra
start_publisher rb
if wait_acks 30 ra 5 && wait_acks 30 rb 5; then
    pass "two publishers (ra, rb) acked before the rolling restart"
else
    fail "publishers ra/rb: not 5 acks each within 30 s"
fi
ROLL_T0=$SECONDS
# max_ack_gap FROM TO: the longest time (s) without an ack (of ra or rb) between epoch times
# FROM and TO, counting from FROM to the first ack and from the last ack to TO
max_ack_gap() {
    cat "$TMP/acked-ra" "$TMP/acked-rb" | awk -v a="$1" -v b="$2" '
        $4 >= a && $4 <= b { print $4 }' | sort -n | awk -v a="$1" -v b="$2" '
        BEGIN { prev = a; m = 0 } { if ($1 - prev > m) m = $1 - prev; prev = $1 }
        END { if (b - prev > m) m = b - prev; printf "%.2f", m }'
}
ROLL_GAPS=()
for i in "${NODES[@]}"; do
    t=$SECONDS
    t_restart=$EPOCHREALTIME
    before=$(($(acked_count ra) + $(acked_count rb)))
    if ! out=$(compose restart --timeout 20 "n$i" 2>&1); then
        fail "compose restart n$i: $out"
        continue
    fi
    if ! wait_healthy 60 "$i"; then
        fail "rolling restart: n$i not healthy within 60 s after compose restart ($(health "$i"))"
        continue
    fi
    mark=$(cat "$TMP/acked-ra" "$TMP/acked-rb" | awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { print m }')
    if wait_caught_up 60 "$i" "$mark" && wait_acks 30 ra $(($(acked_count ra) + 3)) &&
        wait_acks 30 rb $(($(acked_count rb) + 3)); then
        gap=$(max_ack_gap "$t_restart" "$EPOCHREALTIME")
        ROLL_GAPS+=("n$i:${gap}s")
        pass "rolling restart: n$i restarted (SIGTERM), healthy, caught up to seq $mark, publishing went on ($((SECONDS - t)) s, $(($(acked_count ra) + $(acked_count rb) - before)) acks meanwhile, longest time without an ack ${gap} s)"
    else
        fail "rolling restart: n$i did not catch up to seq $mark, or the publishers stalled (its /jsz: $(jsz "$i"); acks ra $(acked_count ra) rb $(acked_count rb))"
    fi
done
ROLL_S=$((SECONDS - ROLL_T0))
ok=1
stop_publisher ra || ok=0
stop_publisher rb || ok=0
if ((ok)); then
    pass "publishers ra, rb stopped: $(acked_count ra) + $(acked_count rb) messages over the rolling restart (${ROLL_S} s), every one acked"
else
    fail "a publisher of the rolling restart ended with a message never acked: $(tail -q -n 1 "$TMP/pubfail-ra" "$TMP/pubfail-rb" 2>/dev/null)"
fi
if wait_meta 30; then pass "after the rolling restart all three nodes name one meta leader ($META)"; else fail "no agreed meta leader after the rolling restart ($META)"; fi
check_exact "after the rolling restart"

# ====================================================== logs, down ====
compose logs --no-color >"$TMP/compose.log" 2>&1 || true
if grep -q 'panicked' "$TMP/compose.log"; then
    fail "a node logged a panic"
    grep -m3 -A3 'panicked' "$TMP/compose.log" | sed 's/^/      | /'
else
    pass "no panic in any container's log"
fi
if grep -q "is not a valid" "$ALL_OUT"; then
    fail "natscli JSON-schema validation errors in some replies"
    grep -B3 -A3 "is not a valid" "$ALL_OUT" | head -n 30 | sed 's/^/      | /'
else
    pass "no natscli schema-validation errors in any output"
fi
if compose down --volumes --remove-orphans --timeout 10 >/dev/null 2>&1; then
    UP=0
    left=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
    vols=$(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT")
    nets=$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT")
    if [[ -z $left$vols$nets ]]; then
        pass "compose down --volumes: no container, volume or network of $PROJECT left"
    else
        fail "compose down left containers '$left' volumes '$vols' networks '$nets'"
    fi
else
    fail "compose down --volumes failed"
fi

echo "docker cluster scenario: $((SECONDS - T_START)) s in all; failover gap ${GAP:-?} s; rolling restart ${ROLL_S:-?} s (longest time without an ack: ${ROLL_GAPS[*]:-?})"
report
((FAILED == 0))

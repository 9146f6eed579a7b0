#!/usr/bin/env bash
# End-to-end JetStream checks with the real `nats` CLI (natscli v0.5.0): runs
# the commands of the two seed tutorials (/work/shared/seeds/jetstream-*.txt)
# verbatim -- adding only `--defaults` where natscli would otherwise prompt,
# `-f` for deletes and a few flags for extra checks -- and checks their output.
# Validated against nats-server 2.15.x; jetraft must match.
#
# Usage:
#   tests/e2e/jetstream_cli.sh                        # tests target/release/jetraft
#   SERVER_BIN=nats-server tests/e2e/jetstream_cli.sh # tests the reference server
#
# Environment:
#   SERVER_BIN  server to test: a path (relative paths are relative to the
#               repo root) or a bare command name looked up on PATH.
#               Default: target/release/jetraft. It is started as
#               `$SERVER_BIN -a 127.0.0.1 -p <port> -js -sd <tmpdir>`.
#   NATS_BIN    nats CLI (default: `nats` on PATH, else $(go env GOPATH)/bin/nats).
#   CI          if "true", a missing nats CLI is a failure instead of a skip.
#   KEEP_TMP    if set, the temp dir with server/client logs is kept.
#
# natscli validates every JetStream API reply against the official JSON
# schemas unless NOVALIDATE is set. This script never sets it (and unsets it),
# so a schema-invalid reply shows up as a failing command ("server response is
# not a valid ... message"); a final check greps every output for that text.
#
# Seed notes (natscli v0.5.0): seed 2's `--deliver-all` is not a v0.5.0 flag
# (`--deliver all` is), its `--retention work_queue` is rejected by the CLI
# (`work` is used here), and `nats stream delete` is an alias of `nats stream rm`.
#
# Prints one PASS/FAIL line per check and ends with "N passed, M failed".
# Exits non-zero if any check failed.
set -euo pipefail
unset NOVALIDATE

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FG_TIMEOUT=20 # upper bound (s) for any nats invocation

if ! NATS_BIN=$(find_nats); then
    skip_banner "SKIP: nats CLI not installed" "      go install github.com/nats-io/natscli/nats@v0.5.0"
    skip_exit "nats CLI is required when CI=true"
fi

require_server
KEEP_LOGS=${KEEP_TMP:+1}
setup_tmp jetraft-e2e-js-cli

# start_js_server NAME PORT STORE_DIR -> sets SERVER_PID (log appended to $TMP/NAME.log)
# (not lib.sh's start_server: a restart must reuse the same port and log)
start_js_server() {
    local name=$1 port=$2 sd=$3
    "$SERVER" -a 127.0.0.1 -p "$port" -js -sd "$sd" >>"$TMP/$name.log" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_port "$SERVER_PID" "$port" && return 0
    echo "---- $name log ----"
    tail -n 20 "$TMP/$name.log" || true
    return 1
}

URL=
ALL_OUT=$TMP/all-nats-output.log
# nats_ ARGS...: one bounded nats invocation against $URL.
nats_() {
    timeout "$FG_TIMEOUT" "$NATS_BIN" --no-context --server "$URL" "$@"
}
# run ARGS...: nats_ with stdout+stderr captured in $OUT and exit code in $RC;
# everything is also appended to $ALL_OUT (for the schema-error scan).
OUT=
RC=0
run() {
    RC=0
    OUT=$(nats_ "$@" 2>&1) || RC=$?
    { echo "\$ nats $*"; echo "$OUT"; echo "(exit $RC)"; } >>"$ALL_OUT"
}
# poll_until SECS PATTERN ARGS...: repeat `run ARGS` (every 0.2 s) until its
# output matches the extended regex PATTERN; returns 1 if it never did.
poll_until() {
    local secs=$1 pat=$2 deadline
    shift 2
    deadline=$((SECONDS + secs))
    while :; do
        run "$@"
        grep -qE -- "$pat" <<<"$OUT" && return 0
        ((SECONDS >= deadline)) && return 1
        sleep 0.2
    done
}
has() { grep -qF -- "$1" <<<"$OUT"; }      # $OUT contains text
has_re() { grep -qE -- "$1" <<<"$OUT"; }   # $OUT matches regex
has_line() { grep -qxF -- "$1" <<<"$OUT"; } # $OUT has exact line
show() { sed 's/^/      | /' <<<"$OUT" | head -n 60; }
# fails_with DESCRIPTION: report failure with the command's exit code and output
fails_with() { fail "$1 (exit $RC)"; show; }

echo "== JetStream nats CLI e2e: server=$SERVER nats=$NATS_BIN ($("$NATS_BIN" --version 2>&1))"

PORT=$(free_port)
SD=$TMP/store
mkdir -p "$SD"
if start_js_server js "$PORT" "$SD"; then
    pass "server starts with -js -sd and accepts TCP on 127.0.0.1:$PORT"
else
    fail "server starts with -js -sd <dir>"
    report
    exit 1
fi
URL="nats://127.0.0.1:$PORT"

# =========================================================== seed: ORDERS ====
# ---- nats stream add (seed 1 + 2, verbatim + --defaults) ----
run stream add ORDERS --subjects "orders.*" --storage file --retention limits --max-msgs=-1 --max-bytes=-1 --defaults
if [[ $RC == 0 ]] && has_line "Stream ORDERS was created" && has "Information for Stream ORDERS created" &&
    has_re 'Subjects: orders\.\*$' && has_re 'Storage: File$' && has_re 'Retention: Limits$' &&
    has_re 'Discard Policy: Old$' && has_re 'Maximum Messages: unlimited$' &&
    has_re 'Maximum Bytes: unlimited$' && has_re 'Messages: 0$' && has_re 'Last Sequence: 0$'; then
    pass "nats stream add ORDERS --subjects \"orders.*\" --storage file --retention limits --max-msgs=-1 --max-bytes=-1"
else
    fails_with "nats stream add ORDERS (expected 'Stream ORDERS was created', Subjects orders.*, File, Limits, unlimited limits, Messages: 0)"
fi

# ---- nats consumer add (seed 1, verbatim + --defaults) ----
run consumer add ORDERS order-processor --pull --ack explicit --deliver all --defaults
if [[ $RC == 0 ]] && has "Information for Consumer ORDERS > order-processor created" &&
    has_re 'Name: order-processor$' && has_re 'Pull Mode: true$' && has_re 'Deliver Policy: All$' &&
    has_re 'Ack Policy: Explicit$' && has_re 'Ack Wait: 30\.00s$' && has_re 'Max Ack Pending: 1,000$' &&
    has_re 'Max Waiting Pulls: 512$' &&
    has_re 'Last Delivered Message: Consumer sequence: 0 Stream sequence: 0' &&
    has_re 'Outstanding Acks: 0 out of maximum 1,000$'; then
    pass "nats consumer add ORDERS order-processor --pull --ack explicit --deliver all"
else
    fails_with "nats consumer add ORDERS order-processor (expected pull, All, Explicit, Ack Wait 30.00s, Max Ack Pending 1,000, Max Waiting Pulls 512)"
fi

# ---- listings ----
run stream ls
if [[ $RC == 0 ]] && has "Streams" && has_re '│ ORDERS +│'; then
    pass "nats stream ls lists ORDERS"
else
    fails_with "nats stream ls (expected a table row for ORDERS)"
fi
run stream ls -n
if [[ $RC == 0 ]] && has_line "ORDERS"; then
    pass "nats stream ls -n prints ORDERS"
else
    fails_with "nats stream ls -n (expected the line ORDERS)"
fi
run consumer ls ORDERS
if [[ $RC == 0 ]] && has "Consumers" && has_re '│ order-processor +│'; then
    pass "nats consumer ls ORDERS lists order-processor"
else
    fails_with "nats consumer ls ORDERS (expected a table row for order-processor)"
fi

# ---- nats pub (core publish, stored without an ack) ----
run pub orders.new "Order #1234"
if [[ $RC == 0 ]] && has 'Published 11 bytes to "orders.new"'; then
    pass "nats pub orders.new \"Order #1234\""
else
    fails_with "nats pub orders.new (expected 'Published 11 bytes to \"orders.new\"')"
fi

# ---- nats stream info ORDERS: the plain publish was stored (polled: no ack) ----
if poll_until 5 'Messages: 1$' stream info ORDERS && [[ $RC == 0 ]] &&
    has_re 'First Sequence: 1 @ ' && has_re 'Last Sequence: 1 @ ' && has_re 'Active Consumers: 1$' &&
    has "Information for Stream ORDERS created"; then
    pass "nats stream info ORDERS: Messages: 1, First Sequence: 1 @ <ts>, Last Sequence: 1 @ <ts>, Active Consumers: 1"
else
    fails_with "nats stream info ORDERS (expected Messages: 1, First/Last Sequence: 1 @ <ts>, Active Consumers: 1)"
fi

# ---- at-least-once: --no-ack leaves the message pending; redelivered after ack_wait ----
run consumer add ORDERS order-redeliver --pull --ack explicit --deliver all --wait 2s --defaults
if [[ $RC == 0 ]] && has_re 'Ack Wait: 2\.00s$' && has_re 'Pull Mode: true$'; then
    pass "nats consumer add ORDERS order-redeliver ... --wait 2s (Ack Wait: 2.00s)"
else
    fails_with "nats consumer add with --wait 2s (expected 'Ack Wait: 2.00s')"
fi
run consumer next ORDERS order-redeliver --no-ack
if [[ $RC == 0 ]] && has_re 'subj: orders\.new / tries: 1 / cons seq: 1 / str seq: 1 / pending: 0$' &&
    has_line "Order #1234" && ! has "Acknowledged message"; then
    pass "nats consumer next --no-ack: 'tries: 1 / cons seq: 1 / str seq: 1', body 'Order #1234', not acked"
else
    fails_with "nats consumer next ORDERS order-redeliver --no-ack (expected tries: 1 / cons seq: 1 / str seq: 1 / pending: 0 and 'Order #1234')"
fi
# The next pull waits (up to natscli's 5 s) and gets the redelivery once the
# 2 s ack wait expires; retried a couple of times, no fixed sleep.
t0=$SECONDS
for ((i = 0; i < 3; i++)); do
    run consumer next ORDERS order-redeliver --no-ack
    [[ $RC == 0 ]] && break
done
if [[ $RC == 0 ]] && has_re 'subj: orders\.new / tries: 2 / cons seq: 2 / str seq: 1 / pending: 0$' &&
    has_line "Order #1234"; then
    pass "nats consumer next --no-ack again: same message redelivered after ack_wait ('tries: 2 / cons seq: 2 / str seq: 1') after $((SECONDS - t0))s"
else
    fails_with "redelivery after ack_wait (expected 'tries: 2 / cons seq: 2 / str seq: 1 / pending: 0' and 'Order #1234')"
fi
run consumer info ORDERS order-redeliver
if [[ $RC == 0 ]] && has_re 'Redelivered Messages: 1$' && has_re 'Outstanding Acks: 1 out of maximum 1,000$' &&
    has_re 'Acknowledgment Floor: Consumer sequence: 0 Stream sequence: 0'; then
    pass "nats consumer info after redelivery: Redelivered Messages: 1, Outstanding Acks: 1, ack floor 0"
else
    fails_with "nats consumer info ORDERS order-redeliver (expected Redelivered Messages: 1, Outstanding Acks: 1 out of maximum 1,000, ack floor 0/0)"
fi

# ---- nats consumer next ORDERS order-processor (seed verbatim: fetch + ack) ----
run consumer next ORDERS order-processor
if [[ $RC == 0 ]] && has_re 'subj: orders\.new / tries: 1 / cons seq: 1 / str seq: 1 / pending: 0$' &&
    has_line "Order #1234" && has_line "Acknowledged message"; then
    pass "nats consumer next ORDERS order-processor: shows 'Order #1234' (str seq 1) and 'Acknowledged message'"
else
    fails_with "nats consumer next ORDERS order-processor (expected tries: 1 / cons seq: 1 / str seq: 1, 'Order #1234', 'Acknowledged message')"
fi

# ---- nats consumer info ORDERS order-processor: ack floor moved, nothing pending ----
if poll_until 5 'Acknowledgment Floor: Consumer sequence: 1 Stream sequence: 1' consumer info ORDERS order-processor &&
    [[ $RC == 0 ]] && has "Information for Consumer ORDERS > order-processor created" &&
    has_re 'Last Delivered Message: Consumer sequence: 1 Stream sequence: 1' &&
    has_re 'Outstanding Acks: 0 out of maximum 1,000$' && has_re 'Unprocessed Messages: 0$' &&
    has_re 'Redelivered Messages: 0$'; then
    pass "nats consumer info ORDERS order-processor: ack floor 1/1, Outstanding Acks: 0, Unprocessed Messages: 0"
else
    fails_with "nats consumer info ORDERS order-processor (expected 'Acknowledgment Floor: Consumer sequence: 1 Stream sequence: 1', 'Outstanding Acks: 0 out of maximum 1,000', 'Unprocessed Messages: 0')"
fi

# ---- an acked message is not delivered again ----
# natscli v0.5.0 asks with `expires` equal to its own timeout, so either the
# server's 408 (Request Timeout) or the CLI's timeout comes first; both say
# nothing was delivered. Only a message body would be wrong.
run --timeout 1s consumer next ORDERS order-processor
if [[ $RC != 0 ]] && ! has "Order #1234" &&
    { has "no message received: nats: timeout" || has_re 'Status: 408$'; }; then
    pass "nats consumer next after the ack: nothing delivered (timeout or 408; acked message not redelivered)"
else
    fails_with "nats consumer next after ack (expected 'no message received: nats: timeout' or a 408, and no 'Order #1234')"
fi

# ======================================================== work-queue stream ==
run stream add WORK --subjects "work.*" --storage file --retention work --defaults
if [[ $RC == 0 ]] && has_line "Stream WORK was created" && has_re 'Retention: WorkQueue$'; then
    pass "nats stream add WORK --retention work (Retention: WorkQueue)"
else
    fails_with "nats stream add WORK --retention work (expected 'Retention: WorkQueue')"
fi
run consumer add WORK worker --pull --ack explicit --deliver all --defaults
if [[ $RC == 0 ]] && has "Information for Consumer WORK > worker created"; then
    pass "nats consumer add WORK worker --pull --ack explicit --deliver all"
else
    fails_with "nats consumer add WORK worker"
fi
run pub --jetstream work.job "job-1"
if [[ $RC == 0 ]] && has "Stored in Stream: WORK Sequence: 1"; then
    pass "nats pub --jetstream work.job: 'Stored in Stream: WORK Sequence: 1'"
else
    fails_with "nats pub --jetstream work.job (expected 'Stored in Stream: WORK Sequence: 1')"
fi
run stream info WORK
if [[ $RC == 0 ]] && has_re 'Messages: 1$'; then
    pass "work-queue stream holds the message before the ack (Messages: 1)"
else
    fails_with "nats stream info WORK before ack (expected Messages: 1)"
fi
run consumer next WORK worker
if [[ $RC == 0 ]] && has_line "job-1" && has_line "Acknowledged message"; then
    pass "nats consumer next WORK worker: job-1 fetched and acked"
else
    fails_with "nats consumer next WORK worker (expected 'job-1' and 'Acknowledged message')"
fi
if poll_until 5 'Messages: 0$' stream info WORK && [[ $RC == 0 ]] &&
    has_re 'First Sequence: 2$' && has_re 'Last Sequence: 1 @ '; then
    pass "work-queue: acked message removed (Messages: 0, First Sequence: 2, Last Sequence: 1 @ <ts>)"
else
    fails_with "work-queue ack removal (expected Messages: 0, First Sequence: 2, Last Sequence: 1 @ <ts>)"
fi

# ============================================ max-bytes + discard new ========
run stream add LIMITED --subjects "limited.*" --storage file --max-bytes 300 --discard new --defaults
if [[ $RC == 0 ]] && has_line "Stream LIMITED was created" && has_re 'Discard Policy: New$' &&
    has_re 'Maximum Bytes: 300 B$'; then
    pass "nats stream add LIMITED --max-bytes 300 --discard new"
else
    fails_with "nats stream add LIMITED --max-bytes 300 --discard new (expected 'Discard Policy: New', 'Maximum Bytes: 300 B')"
fi
# 46-byte bodies: nats-server stores 81 B each, so 3 fit; the broker's own
# accounting may differ, hence "some stored, then every further one refused".
stored=0 refused=0 order_ok=1 refusal=
for ((i = 1; i <= 10; i++)); do
    run pub --jetstream limited.a "payload-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    if [[ $RC == 0 ]] && has "Stored in Stream: LIMITED Sequence: $i"; then
        ((refused == 0)) || order_ok=0
        stored=$((stored + 1))
    else
        refused=$((refused + 1))
        [[ -n $refusal ]] || refusal=$OUT
    fi
done
OUT=$refusal
if ((stored >= 1 && refused >= 1 && order_ok == 1 && stored + refused == 10)) &&
    has "nats: error: maximum bytes exceeded (10077)"; then
    pass "discard new: $stored publishes stored, the next $refused refused with 'nats: error: maximum bytes exceeded (10077)'"
else
    fail "discard new at max-bytes ($stored stored, $refused refused, in order: $order_ok; expected >=1 stored then 'nats: error: maximum bytes exceeded (10077)')"
    show
fi
run stream info LIMITED
if [[ $RC == 0 ]] && has_re "Messages: $stored\$" && has_re 'First Sequence: 1 @ ' &&
    has_re "Last Sequence: $stored @ "; then
    pass "nats stream info LIMITED: Messages: $stored, First Sequence: 1 (nothing discarded)"
else
    fails_with "nats stream info LIMITED (expected Messages: $stored, First Sequence: 1, Last Sequence: $stored)"
fi
run req limited.a "via-request"
if [[ $RC == 0 ]] && has '"err_code":10077' && has '"code":503' && has '"stream":"LIMITED"'; then
    pass "nats req to a full discard-new stream gets the PubAck error JSON (code 503, err_code 10077)"
else
    fails_with "nats req limited.a (expected PubAck error JSON with \"code\":503, \"err_code\":10077, \"stream\":\"LIMITED\")"
fi

# ============================================================ deletion ======
run stream rm ORDERS -f
if [[ $RC == 0 ]]; then
    pass "nats stream rm ORDERS -f"
else
    fails_with "nats stream rm ORDERS -f"
fi
run stream ls -n
if [[ $RC == 0 ]] && ! has_line "ORDERS" && has_line "WORK" && has_line "LIMITED"; then
    pass "nats stream ls -n no longer lists ORDERS (WORK, LIMITED still there)"
else
    fails_with "nats stream ls -n after rm (expected WORK and LIMITED, no ORDERS)"
fi
run stream ls
if [[ $RC == 0 ]] && ! has_re '│ ORDERS +│'; then
    pass "nats stream ls no longer lists ORDERS"
else
    fails_with "nats stream ls after rm (ORDERS still listed)"
fi
run consumer next ORDERS order-processor
if [[ $RC != 0 ]] && has "stream not found (10059)"; then
    pass "nats consumer next on the deleted stream: 'stream not found (10059)'"
else
    fails_with "nats consumer next ORDERS after rm (expected 'stream not found (10059)')"
fi
run stream delete WORK -f # seed 2's spelling (alias of rm)
if [[ $RC == 0 ]]; then
    run stream ls -n
    if ! has_line "WORK"; then
        pass "nats stream delete WORK -f (seed 2 spelling) removes it"
    else
        fails_with "nats stream delete WORK -f: WORK still listed"
    fi
else
    fails_with "nats stream delete WORK -f"
fi

# ================================================= restart (kill -9) ========
run stream add DURABLE --subjects "durable.*" --storage file --retention limits --defaults
[[ $RC == 0 ]] || fails_with "nats stream add DURABLE"
run consumer add DURABLE dproc --pull --ack explicit --deliver all --defaults
[[ $RC == 0 ]] || fails_with "nats consumer add DURABLE dproc"
seqs=
for i in 1 2 3; do
    run pub --jetstream durable.msg "durable-$i"
    has "Stored in Stream: DURABLE Sequence: $i" && seqs="$seqs$i"
done
if [[ $seqs == 123 ]]; then
    pass "3 acked publishes to DURABLE (Sequence: 1, 2, 3)"
else
    fail "nats pub --jetstream durable.msg x3 (got sequences '$seqs', want 123)"; show
fi
run consumer next DURABLE dproc
if [[ $RC == 0 ]] && has_re 'str seq: 1 / pending: 2$' && has_line "durable-1" && has_line "Acknowledged message"; then
    pass "nats consumer next DURABLE dproc before the crash: durable-1 acked"
else
    fails_with "nats consumer next DURABLE dproc (expected str seq 1, pending 2, 'durable-1', 'Acknowledged message')"
fi
if poll_until 5 'Acknowledgment Floor: Consumer sequence: 1 Stream sequence: 1' consumer info DURABLE dproc; then
    pass "server recorded the ack before the crash (ack floor 1/1)"
else
    fails_with "consumer info DURABLE dproc before crash (expected ack floor 1/1)"
fi

stop_pid "$SERVER_PID" KILL
if start_js_server js "$PORT" "$SD"; then
    pass "server restarts after kill -9 with the same -sd"
else
    fail "server restart after kill -9 with the same -sd"
fi
# JetStream recovery may lag the listener: poll (bounded) for the stream.
if poll_until 15 'Messages: 3$' stream info DURABLE && [[ $RC == 0 ]] &&
    has_re 'First Sequence: 1 @ ' && has_re 'Last Sequence: 3 @ '; then
    pass "after kill -9 + restart: nats stream info DURABLE shows Messages: 3, First Sequence: 1, Last Sequence: 3"
else
    fails_with "stream info DURABLE after restart (expected Messages: 3, First Sequence: 1 @ <ts>, Last Sequence: 3 @ <ts>)"
fi
run consumer info DURABLE dproc
# nats-server 2.15 writes consumer ack state lazily, so after kill -9 it may
# report the ack floor as 0 (message 1 then outstanding until ack_wait); the
# delivered position survives. Both outcomes are accepted; the floor is shown.
if [[ $RC == 0 ]] && has_re 'Last Delivered Message: Consumer sequence: 1 Stream sequence: 1' &&
    { { has_re 'Acknowledgment Floor: Consumer sequence: 1 Stream sequence: 1' && has_re 'Outstanding Acks: 0 out'; } ||
        { has_re 'Acknowledgment Floor: Consumer sequence: 0 Stream sequence: 0' && has_re 'Outstanding Acks: 1 out'; }; }; then
    pass "after restart: consumer dproc survived ($(grep -oE 'Acknowledgment Floor: Consumer sequence: [0-9]+ Stream sequence: [0-9]+' <<<"$OUT"))"
else
    fails_with "consumer info DURABLE dproc after restart (expected Last Delivered 1/1 and ack floor 1/1 with 0 outstanding, or 0/0 with 1 outstanding)"
fi
run consumer next DURABLE dproc
if [[ $RC == 0 ]] && has_re 'tries: 1 / cons seq: 2 / str seq: 2 / pending: 1$' && has_line "durable-2" &&
    has_line "Acknowledged message"; then
    pass "after restart: nats consumer next continues with durable-2 (cons seq 2, str seq 2)"
else
    fails_with "consumer next DURABLE dproc after restart (expected 'tries: 1 / cons seq: 2 / str seq: 2 / pending: 1', 'durable-2')"
fi
run consumer next DURABLE dproc
if [[ $RC == 0 ]] && has_re 'str seq: 3 / pending: 0$' && has_line "durable-3"; then
    pass "after restart: next delivers durable-3"
else
    fails_with "second consumer next DURABLE dproc after restart (expected str seq 3, 'durable-3')"
fi
run stream ls -n
if [[ $RC == 0 ]] && has_line "DURABLE" && has_line "LIMITED" && ! has_line "ORDERS" && ! has_line "WORK"; then
    pass "after restart: stream ls -n shows DURABLE, LIMITED; deleted ORDERS, WORK stay deleted"
else
    fails_with "stream ls -n after restart (expected DURABLE, LIMITED only)"
fi

# ====================================== key-value bucket (direct get) ======
# `nats kv add` asks for allow_direct, and `kv get` reads through
# $JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>.<key>.
run kv add CFG --history 5
if [[ $RC == 0 ]]; then pass "nats kv add CFG --history 5"; else fails_with "kv add CFG"; fi
run kv put CFG color blue
run kv put CFG color green
run kv get CFG color --raw
if [[ $RC == 0 ]] && [[ $OUT == green* ]]; then
    pass "nats kv get CFG color --raw prints the latest value (green)"
else
    fails_with "kv get CFG color --raw (expected green)"
fi
run kv get CFG color --revision 1 --raw
if [[ $RC == 0 ]] && [[ $OUT == blue* ]]; then
    pass "nats kv get --revision 1 reads the older value (blue)"
else
    fails_with "kv get CFG color --revision 1 --raw (expected blue)"
fi
run kv del CFG color -f
run kv get CFG color
if [[ $RC != 0 ]] && has_re 'key not found'; then
    pass "after nats kv del, kv get reports: key not found"
else
    fails_with "kv get CFG color after del (expected a 'key not found' failure)"
fi

# ================================================ advisories (nats events) ====
# `nats events --js-advisory` parses each advisory by its `type` and renders it;
# creating and deleting a stream and a consumer must show all four actions.
EVENTS=$TMP/events.txt
timeout 60 "$NATS_BIN" --no-context --server "$URL" events --js-advisory --no-srv-advisory \
    >"$EVENTS" 2>&1 &
EVENTS_PID=$!
PIDS+=("$EVENTS_PID")
# Its subscription reaches the server some time after it says it listens: create and
# delete a warm-up stream until one of its advisories shows (bounded).
for ((i = 0; i < 25; i++)); do
    run stream add WARM --subjects warm.x --storage memory --defaults
    run stream rm WARM -f
    grep -q "Stream: WARM" "$EVENTS" 2>/dev/null && break
    sleep 0.2
done
run stream add ADV --subjects 'adv.>' --storage file --defaults
run consumer add ADV watcher --pull --defaults
run consumer rm ADV watcher -f
run stream rm ADV -f
# Each of the four renders a "Stream: ADV" line; wait for all of them (bounded).
for ((i = 0; i < 75; i++)); do
    (($(grep -c "Stream: ADV" "$EVENTS" 2>/dev/null || true) >= 4)) && break
    sleep 0.2
done
stop_pid "$EVENTS_PID"
missing=
for action in "Stream Create Action" "Consumer Create Action" "Consumer Delete Action" "Stream Delete Action"; do
    grep -A2 -F "$action" "$EVENTS" | grep -q "Stream: ADV" || missing="$missing [$action]"
done
if [[ -z $missing ]]; then
    pass "nats events --js-advisory renders stream and consumer create/delete advisories"
else
    fail "nats events --js-advisory is missing:$missing"
    sed 's/^/      | /' "$EVENTS" | head -n 40
fi

# ================================= consumer pause / resume / unpin ========
# natscli v0.5.0's `consumer pause`, `consumer resume` and `consumer unpin` (issue
# 19). The CLI cannot pull with a priority group, so the pin is taken with a raw
# pull request (`nats req`), whose message carries the Nats-Pin-Id header.
run stream add PAUSED --subjects "paused.*" --storage file --defaults
run consumer add PAUSED pc --pull --ack explicit --deliver all --defaults
[[ $RC == 0 ]] || fails_with "nats consumer add PAUSED pc"
run consumer pause PAUSED pc "$(date -u -d '+1 hour' '+%Y-%m-%d %H:%M:%S')" -f
if [[ $RC == 0 ]] && has_re '^Paused PAUSED > pc until '; then
    pass "nats consumer pause PAUSED pc <in an hour> -f: 'Paused PAUSED > pc until ...'"
else
    fails_with "nats consumer pause PAUSED pc (expected 'Paused PAUSED > pc until ...')"
fi
run consumer info PAUSED pc
if [[ $RC == 0 ]] && has_re 'Paused Until Deadline: .*remaining' && has_re 'Required API Level: 1 '; then
    pass "nats consumer info PAUSED pc: 'Paused Until Deadline: ... remaining', Required API Level: 1"
else
    fails_with "nats consumer info PAUSED pc (expected 'Paused Until Deadline' and 'Required API Level: 1')"
fi
run consumer resume PAUSED pc -f
if [[ $RC == 0 ]] && has_re 'was resumed while previously paused until'; then
    pass "nats consumer resume PAUSED pc -f: resumed"
else
    fails_with "nats consumer resume PAUSED pc (expected '... was resumed while previously paused until ...')"
fi
# natscli v0.5.0 asks for API level 2 before `consumer add --pinned-groups` (jetraft
# reports level 2, ADR 0024).
run consumer add PAUSED pin --pull --ack explicit --pinned-groups jobs --pinned-ttl 1m --defaults
if [[ $RC == 0 ]] && has 'Priority Groups: jobs'; then
    pass "nats consumer add --pinned-groups jobs --pinned-ttl 1m (the CLI's API level 2 gate)"
else
    fails_with "nats consumer add PAUSED pin --pinned-groups jobs (expected 'Priority Groups: jobs')"
fi
run consumer info PAUSED pin
if [[ $RC == 0 ]] && has_re 'Priority Policy: Pinned Client' && has_re 'Pinned TTL: 1m0s'; then
    pass "a pinned_client consumer (group jobs, priority_timeout 1m) shows in nats consumer info"
else
    fails_with "nats consumer info PAUSED pin (expected 'Priority Policy: Pinned Client', 'Pinned TTL: 1m0s')"
fi
run pub paused.a hi
run req '$JS.API.CONSUMER.MSG.NEXT.PAUSED.pin' '{"batch":1,"group":"jobs","expires":2000000000}'
if [[ $RC == 0 ]] && has_re 'Nats-Pin-Id: [A-Za-z0-9]{22}$' && has_line "hi"; then
    pass "a pull in group jobs gets the message with a Nats-Pin-Id header"
else
    fails_with "nats req MSG.NEXT.PAUSED.pin with group jobs (expected 'Nats-Pin-Id: <id>' and 'hi')"
fi
run consumer unpin PAUSED pin jobs -f
if [[ $RC == 0 ]] && has_re '^Unpinned client [A-Za-z0-9]{22} from Priority Group PAUSED > pin > jobs'; then
    pass "nats consumer unpin PAUSED pin jobs -f: 'Unpinned client <id> from Priority Group PAUSED > pin > jobs'"
else
    fails_with "nats consumer unpin PAUSED pin jobs (expected 'Unpinned client <id> from Priority Group ...')"
fi
run stream rm PAUSED -f

# ===================== mirrors, sources, transforms, republish (issue 19) ====
run stream add ORIG --subjects "orig.*" --defaults
for i in 1 2 3 4 5; do run pub orig.a "m$i"; done
run stream add MIR --mirror ORIG --defaults
if [[ $RC == 0 ]] && poll_until 10 'Messages: 5$' stream info MIR && [[ $RC == 0 ]] &&
    has "Mirror Information" && has "ORIG"; then
    pass "nats stream add MIR --mirror ORIG copies the 5 messages; stream info MIR shows the mirror"
else
    fails_with "nats stream add/info MIR --mirror ORIG (expected Messages: 5 and the Mirror Information)"
fi
run stream add AGG --source ORIG --defaults
if [[ $RC == 0 ]] && poll_until 10 'Messages: 5$' stream info AGG && [[ $RC == 0 ]] &&
    has "Source Information" && has "ORIG"; then
    pass "nats stream add AGG --source ORIG copies the 5 messages; stream info AGG shows the source"
else
    fails_with "nats stream add/info AGG --source ORIG (expected Messages: 5 and the Source Information)"
fi
run stream get AGG 5
if [[ $RC == 0 ]] && has "Nats-Stream-Source: ORIG 5 > >" && has_line "m5"; then
    pass "nats stream get AGG 5: m5 with 'Nats-Stream-Source: ORIG 5 > >'"
else
    fails_with "nats stream get AGG 5 (expected m5 and Nats-Stream-Source: ORIG 5 > >)"
fi
run stream add TRS --subjects "trs.*" --transform-source "trs.*" \
    --transform-destination 't.{{wildcard(1)}}' --republish-source ">" \
    --republish-destination "seen.>" --defaults
run pub trs.a hello
if [[ $RC == 0 ]] && poll_until 5 'on Subject t\.a$' stream get TRS 1 && [[ $RC == 0 ]]; then
    pass "a stream with --transform-source trs.* --transform-destination t.{{wildcard(1)}} stores trs.a as t.a"
else
    fails_with "nats stream get TRS 1 (expected Subject: t.a)"
fi
for name in MIR AGG ORIG TRS; do run stream rm "$name" -f; done

# ====== a work queue drained by its source, consumer reset (issue 19, ADR 0032) ====
run stream add WQO --subjects "wqo.*" --retention work --defaults
for i in 1 2 3; do run pub wqo.a "w$i"; done
run stream add WQAGG --source WQO --defaults
if [[ $RC == 0 ]] && poll_until 10 'Messages: 3$' stream info WQAGG &&
    poll_until 10 'Messages: 0$' stream info WQO; then
    pass "nats stream add WQAGG --source WQO (a work queue): 3 copied, and the work queue gives them up"
else
    fails_with "nats stream info WQAGG / WQO (expected 3 copied and the work queue empty)"
fi
run stream rm WQAGG -f
if poll_until 10 'No Consumers defined' consumer ls WQO; then
    pass "nats stream rm WQAGG: the consumer it sourced WQO through goes with it"
else
    fails_with "nats consumer ls WQO (expected no consumers once WQAGG is gone)"
fi
run stream rm WQO -f
run stream add FCO --subjects "fco.*" --defaults
for i in 1 2 3 4; do run pub fco.a "f$i"; done
run consumer add FCO FEED --target feed.fco --ack flow_control --deliver all --defaults
if [[ $RC == 0 ]] && has "Ack Policy: Flow Control"; then
    pass "nats consumer add --ack flow_control: 'Ack Policy: Flow Control'"
else
    fails_with "nats consumer add FCO FEED --ack flow_control (expected 'Ack Policy: Flow Control')"
fi
run consumer reset FCO FEED --sequence 3 -f
if [[ $RC == 0 ]] && poll_until 5 'Unprocessed Messages: 2$' consumer info FCO FEED; then
    pass "nats consumer reset FCO FEED --sequence 3: 2 messages left to deliver"
else
    fails_with "nats consumer reset / info FCO FEED (expected 'Unprocessed Messages: 2')"
fi
run stream rm FCO -f

# ================= per-message TTLs and delete markers (issue 19) ============
run stream add TTLS --subjects "ttls.*" --allow-msg-ttl --subject-del-markers-ttl 2s --defaults
run pub ttls.a gone -H "Nats-TTL:1s"
if poll_until 15 'Nats-Marker-Reason: MaxAge' stream get TTLS 2 && [[ $RC == 0 ]]; then
    pass "nats pub -H Nats-TTL:1s on a stream with --subject-del-markers-ttl: the message expires, a MaxAge marker follows"
else
    fails_with "nats stream get TTLS 2 (expected a marker with Nats-Marker-Reason: MaxAge)"
fi
run stream rm TTLS -f
run kv add TTLKV --marker-ttl 2s
run kv create TTLKV k v --ttl 1s
if [[ $RC == 0 ]] && poll_until 15 ' PURGE ' kv history TTLKV k; then
    pass "nats kv add --marker-ttl, kv create --ttl 1s: the key expires and its history ends in a purge marker"
else
    fails_with "nats kv history TTLKV k (expected the expired key's marker as a PURGE)"
fi
run kv rm TTLKV -f

# ======================================== counters (issue 19, ADR-49) ========
# `nats stream add --allow-counter` asks for a 2.12 server (jetraft reports 2.12.0, ADR 0024).
run stream add CTRS --subjects 'ctrs.>' --allow-counter --allow-direct --defaults
if [[ $RC == 0 ]] && has 'Allows Counters: true'; then
    pass "nats stream add --allow-counter (the CLI's 2.12 gate)"
else
    fails_with "nats stream add CTRS --allow-counter (expected 'Allows Counters: true')"
fi
run counter incr ctrs.hits 5
run counter incr ctrs.hits -- -2
run counter incr ctrs.hits 123456789012345678901234567890
run counter get ctrs.hits
if [[ $RC == 0 ]] && has_line '123456789012345678901234567893'; then
    pass "nats counter incr 5, -2, 123456789012345678901234567890, then get: the sum, past 64 bits"
else
    fails_with "nats counter get ctrs.hits (expected 123456789012345678901234567893)"
fi
run counter view ctrs.hits
if [[ $RC == 0 ]] && has 'Increment: 123,456,789,012,345,678,901,234,567,890'; then
    pass "nats counter view: the value and the last increment"
else
    fails_with "nats counter view ctrs.hits (expected the last increment)"
fi
run stream rm CTRS -f

# ======================================= message schedules (issue 19, ADR-51) =====
# `nats stream add --allow-schedules`, `nats pub --schedule-at` and `--schedule-every` are not
# gated on the server version (ADR 0023, ADR 0025).
run stream add SCHED --subjects 'sched.>' --allow-schedules --defaults
if [[ $RC == 0 ]] && has 'Allows Schedules: true'; then
    pass "nats stream add --allow-schedules"
else
    fails_with "nats stream add SCHED --allow-schedules"
fi
run pub sched.in.a 'later' --schedule-at "$(date -u -d '+2 seconds' +%Y-%m-%dT%H:%M:%SZ)" \
    --schedule-dest sched.out.a
if [[ $RC == 0 ]] && poll_until 15 'Nats-Scheduler: sched.in.a' stream get SCHED --last-for sched.out.a; then
    pass "nats pub --schedule-at --schedule-dest: one message on the target, from the schedule"
else
    fails_with "nats stream get SCHED --last-for sched.out.a (expected the produced message)"
fi
run pub sched.in.e 'tick' --schedule-every 1s --schedule-dest sched.out.e
if [[ $RC == 0 ]] && poll_until 15 'Nats-Schedule-Next: 20' stream get SCHED --last-for sched.out.e &&
    has 'Nats-Scheduler: sched.in.e'; then
    pass "nats pub --schedule-every 1s: repeats, each message naming the next time"
else
    fails_with "nats stream get SCHED --last-for sched.out.e (expected 'Nats-Schedule-Next: <time>')"
fi
run stream get SCHED --last-for sched.in.e
if [[ $RC == 0 ]] && has 'Nats-Schedule: @every 1s'; then
    pass "the repeating schedule stays in the stream"
else
    fails_with "nats stream get SCHED --last-for sched.in.e (expected the schedule)"
fi
run stream rm SCHED -f

# ========================================== schema validation, overall ======
if grep -q "is not a valid" "$ALL_OUT"; then
    fail "natscli JSON-schema validation errors in some replies:"
    grep -B3 -A3 "is not a valid" "$ALL_OUT" | head -n 60 | sed 's/^/      | /'
else
    pass "no natscli schema-validation errors ('server response is not a valid ...') in any output"
fi

report
((FAILED == 0))

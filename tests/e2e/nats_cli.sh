#!/usr/bin/env bash
# End-to-end checks of a NATS-protocol server using the real `nats` CLI
# (natscli v0.5.0). Validated against nats-server 2.15.x; jetraft must match.
#
# Usage:
#   tests/e2e/nats_cli.sh                       # tests target/release/jetraft
#   SERVER_BIN=nats-server tests/e2e/nats_cli.sh  # tests the reference server
#
# Environment:
#   SERVER_BIN  server to test: a path (relative paths are relative to the
#               repo root) or a bare command name looked up on PATH.
#               Default: target/release/jetraft. It is started as
#               `$SERVER_BIN -a 127.0.0.1 -p <port> [--user u --pass p | --auth t]`.
#   NATS_BIN    nats CLI (default: `nats` on PATH, else $(go env GOPATH)/bin/nats).
#   CI          if "true", a missing nats CLI is a failure instead of a skip.
#   KEEP_TMP    if set, the temp dir with server/client logs is kept.
#
# Prints one PASS/FAIL line per check and ends with "N passed, M failed".
# Exits non-zero if any check failed.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BG_TIMEOUT=30   # upper bound (s) for any backgrounded nats client
FG_TIMEOUT=15   # upper bound (s) for any foreground nats invocation

note() { echo "      $*"; }

if ! NATS_BIN=$(find_nats); then
    skip_banner "SKIP: nats CLI not installed" "      go install github.com/nats-io/natscli/nats@v0.5.0"
    skip_exit "nats CLI is required when CI=true"
fi

require_server
KEEP_LOGS=${KEEP_TMP:+1}
setup_tmp jetraft-e2e-cli

# nats_ ARGS...: one bounded nats invocation against $URL with $CREDS.
URL=
CREDS=()
nats_() {
    timeout "$FG_TIMEOUT" "$NATS_BIN" --no-context --server "$URL" "${CREDS[@]}" "$@"
}
# Background variant, ONLY for use as `nats_bg ... &`: `exec` makes the
# backgrounded subshell *become* timeout(1), so $! is timeout's PID and killing
# it (timeout forwards SIGTERM) really stops the client.
nats_bg() {
    exec timeout "$BG_TIMEOUT" "$NATS_BIN" --no-context --server "$URL" "${CREDS[@]}" "$@"
}

# Readiness of a `nats sub`: its "Subscribing on" line is logged *before* the
# SUBs are sent, so it is not proof of interest. Instead every subscriber also
# listens on a private probe subject, listed last; the server handles one
# connection's SUBs in order, so once a probe is delivered all the subscriber's
# subjects are registered. A probe that arrives before the SUB is simply
# dropped by the server, so at most one probe is ever received (the --count
# given to `nats sub` includes that one probe).
#
# start_sub OUT PROBE SUB-ARGS... -> sets SUB_PID
start_sub() {
    local out=$1 probe=$2
    shift 2
    nats_bg sub "$@" "$probe" >"$out" 2>&1 &
    SUB_PID=$!
    PIDS+=("$SUB_PID")
    await_probe "$out" "$probe" "$SUB_PID"
}
await_probe() {
    local out=$1 probe=$2 pid=$3 i j
    for ((i = 0; i < 100; i++)); do # "Subscribing on" within 5 s
        grep -q "Subscribing on" "$out" 2>/dev/null && break
        alive "$pid" || return 1
        sleep 0.05
    done
    for ((i = 0; i < 15; i++)); do # at most 15 probes
        alive "$pid" || return 1
        nats_ pub "$probe" "probe-$i" >/dev/null 2>&1 || true
        for ((j = 0; j < 20; j++)); do # each observed for up to 1 s
            grep -qF "Received on \"$probe\"" "$out" && return 0
            sleep 0.05
        done
    done
    return 1
}
# start_reply OUT REPLY-ARGS... -> sets REPLY_PID. `nats reply` logs
# "Listening on" only after its SUB has been flushed, so that line is proof.
start_reply() {
    local out=$1 i
    shift
    nats_bg reply "$@" >"$out" 2>&1 &
    REPLY_PID=$!
    PIDS+=("$REPLY_PID")
    for ((i = 0; i < 200; i++)); do # up to 10 s
        grep -q "Listening on" "$out" 2>/dev/null && return 0
        alive "$REPLY_PID" || return 1
        sleep 0.05
    done
    return 1
}
has_line() { grep -qxF -- "$2" "$1"; }        # file has exact line
has() { grep -qF -- "$2" "$1"; }              # file contains text
count_of() { grep -cF -- "$2" "$1" || true; } # lines containing text

show() { # dump a client log, indented, on failure
    sed 's/^/      | /' "$1" | head -n 40
}

echo "== nats CLI e2e: server=$SERVER nats=$NATS_BIN ($("$NATS_BIN" --version 2>&1))"

# ========================================================= plain server =====
if start_server plain; then
    pass "server starts and accepts TCP on 127.0.0.1:$SERVER_PORT"
else
    fail "server starts and accepts TCP"
    report
    exit 1
fi
URL="nats://127.0.0.1:$SERVER_PORT"
CREDS=()

# ---- nats rtt (connect + PING/PONG) ----
if out=$(nats_ rtt 2>&1) && grep -q "127.0.0.1:$SERVER_PORT: .*s" <<<"$out"; then
    pass "nats rtt connects and measures a round trip"
else
    fail "nats rtt"; note "$out"
fi

# ---- basic pub/sub with --count ----
f=$TMP/sub_basic.out
if start_sub "$f" _probe.basic e2e.basic --count 3; then
    nats_ pub e2e.basic "hello-basic-1" >/dev/null 2>&1 || true
    nats_ pub e2e.basic "hello-basic-2" >/dev/null 2>&1 || true
    wait_exit "$SUB_PID" 15; rc=$WAIT_RC
    if [[ $rc == 0 ]] && has_line "$f" "hello-basic-1" && has_line "$f" "hello-basic-2" &&
        [[ $(count_of "$f" 'Received on "e2e.basic"') == 2 ]]; then
        pass "nats pub / nats sub --count: both messages received, sub exits 0"
    else
        fail "nats pub / nats sub --count (rc=$rc)"; show "$f"
    fi
else
    fail "nats sub did not become ready"; show "$f"
fi

# ---- pub --count: 1000 messages arrive complete and in order ----
f=$TMP/sub_seq.out
if start_sub "$f" _probe.seq e2e.seq --count 1001; then
    nats_ pub e2e.seq --count 1000 'seq-{{Count}}' >/dev/null 2>&1 || true
    wait_exit "$SUB_PID" 20; rc=$WAIT_RC
    got=$(grep -E '^seq-[0-9]+$' "$f" | tr '\n' ' ' || true)
    want=$(seq -f 'seq-%g' 1 1000 | tr '\n' ' ')
    if [[ $rc == 0 && $got == "$want" ]]; then
        pass "nats pub --count 1000: all 1000 delivered in publish order"
    else
        fail "nats pub --count 1000 ordering (rc=$rc, got $(grep -cE '^seq-[0-9]+$' "$f" || true) msgs)"
    fi
else
    fail "nats sub (seq) did not become ready"; show "$f"
fi

# ---- wildcards: '*' matches one token, '>' one or more ----
f1=$TMP/sub_star.out
f2=$TMP/sub_gt.out
if start_sub "$f1" _probe.star 'orders.*' --count 3 && start_sub "$f2" _probe.gt 'orders.>' --count 4; then
    star_pid=$SUB_PID
    # Published first, so a '*' that wrongly matched two tokens would consume
    # one of the star subscriber's 2 slots and a later payload would be missing.
    nats_ pub orders.eu.new "payload-eu-new" >/dev/null 2>&1 || true
    nats_ pub orders.new "payload-new" >/dev/null 2>&1 || true
    nats_ pub orders.shipped "payload-shipped" >/dev/null 2>&1 || true
    nats_ pub orders "payload-bare" >/dev/null 2>&1 || true # matches neither
    nats_ pub other.new "payload-other" >/dev/null 2>&1 || true
    # a final '>'-only message ends the '>' subscriber deterministically
    nats_ pub orders.x.y.z "payload-deep" >/dev/null 2>&1 || true
    wait_exit "$star_pid" 15; rc1=$WAIT_RC
    wait_exit "$SUB_PID" 15; rc2=$WAIT_RC
    if [[ $rc1 == 0 ]] && has_line "$f1" payload-new && has_line "$f1" payload-shipped &&
        has "$f1" 'Received on "orders.new"' && has "$f1" 'Received on "orders.shipped"' &&
        ! has_line "$f1" payload-eu-new && ! has_line "$f1" payload-bare && ! has_line "$f1" payload-other; then
        pass "nats sub 'orders.*' gets orders.new + orders.shipped only"
    else
        fail "nats sub 'orders.*' (rc=$rc1)"; show "$f1"
    fi
    if [[ $rc2 == 0 ]] && has_line "$f2" payload-eu-new && has_line "$f2" payload-new &&
        has_line "$f2" payload-shipped && ! has_line "$f2" payload-bare && ! has_line "$f2" payload-other; then
        pass "nats sub 'orders.>' gets multi-token subjects, not 'orders' itself"
    else
        fail "nats sub 'orders.>' (rc=$rc2)"; show "$f2"
    fi
else
    fail "wildcard subscribers did not become ready"; show "$f1"; show "$f2"
fi

# ---- queue groups: each message to exactly one member ----
q1=$TMP/sub_q1.out
q2=$TMP/sub_q2.out
qc=$TMP/sub_qc.out
if start_sub "$q1" _probe.q1 --queue workers jobs.work && q1_pid=$SUB_PID &&
    start_sub "$q2" _probe.q2 --queue workers jobs.work && q2_pid=$SUB_PID &&
    start_sub "$qc" _probe.qc jobs.work --count 21 && qc_pid=$SUB_PID; then
    nats_ pub jobs.work --count 20 'job-{{Count}}' >/dev/null 2>&1 || true
    wait_exit "$qc_pid" 15; rcc=$WAIT_RC # plain sub sees all 20: all were routed
    for ((i = 0; i < 100; i++)); do # then up to 5 s for the queue members
        n=$(($(count_of "$q1" 'Received on "jobs.work"') + $(count_of "$q2" 'Received on "jobs.work"')))
        ((n >= 20)) && break
        sleep 0.05
    done
    stop_pid "$q1_pid"
    stop_pid "$q2_pid"
    n1=$(grep -cE '^job-[0-9]+$' "$q1" || true)
    n2=$(grep -cE '^job-[0-9]+$' "$q2" || true)
    uniq=$(cat "$q1" "$q2" | grep -E '^job-[0-9]+$' | sort -u | wc -l)
    if [[ $rcc == 0 ]] && [[ $(grep -cE '^job-[0-9]+$' "$qc" || true) == 20 ]]; then
        pass "non-queue subscriber alongside the group gets all 20"
    else
        fail "non-queue subscriber alongside the group (rc=$rcc)"; show "$qc"
    fi
    if ((n1 + n2 == 20 && uniq == 20)); then
        pass "nats sub --queue: 20 messages split across the group, each delivered once ($n1 + $n2)"
    else
        fail "nats sub --queue: got $n1 + $n2, $uniq unique (want 20 total, 20 unique)"
    fi
    if ((n1 > 0 && n2 > 0)); then
        pass "nats sub --queue: both members received work"
    else
        fail "nats sub --queue: one member got nothing ($n1 / $n2)"
    fi
else
    fail "queue subscribers did not become ready"; show "$q1"; show "$q2"; show "$qc"
fi

# ---- headers: nats pub -H ----
f=$TMP/sub_hdr.out
if start_sub "$f" _probe.hdr e2e.headers --count 2; then
    nats_ pub e2e.headers "header-body" -H "X-Trace:abc123" -H "X-Multi:two words" >/dev/null 2>&1 || true
    wait_exit "$SUB_PID" 15; rc=$WAIT_RC
    if [[ $rc == 0 ]] && has_line "$f" "X-Trace: abc123" && has_line "$f" "X-Multi: two words" &&
        has_line "$f" "header-body"; then
        pass "nats pub -H: headers and body arrive at nats sub"
    else
        fail "nats pub -H (rc=$rc)"; show "$f"
    fi
else
    fail "nats sub (headers) did not become ready"; show "$f"
fi
f=$TMP/sub_hdronly.out
if start_sub "$f" _probe.hdronly e2e.hdronly --count 2 --headers-only; then
    nats_ pub e2e.hdronly "should-not-show" -H "X-Only:yes" >/dev/null 2>&1 || true
    wait_exit "$SUB_PID" 15; rc=$WAIT_RC
    if [[ $rc == 0 ]] && has_line "$f" "X-Only: yes" && ! has "$f" should-not-show; then
        pass "nats sub --headers-only shows the header, not the body"
    else
        fail "nats sub --headers-only (rc=$rc)"; show "$f"
    fi
else
    fail "nats sub (headers-only) did not become ready"; show "$f"
fi

# ---- request / reply with a fixed body (+ reply headers, request headers) ----
f=$TMP/reply_fixed.out
if start_reply "$f" svc.fixed "fixed-reply-body" -H "X-Replied:yes" --count 1; then
    out=$(nats_ request svc.fixed "request-body-1" -H "X-Asked:please" 2>&1) || true
    # NOTE: natscli v0.5.0 `nats reply --count` always exits 1 (log.Fatalf("Exiting")).
    wait_exit "$REPLY_PID" 10
    if grep -qxF "fixed-reply-body" <<<"$out"; then
        pass "nats request gets the fixed body from nats reply"
    else
        fail "nats request / nats reply fixed body"; note "$out"; show "$f"
    fi
    if grep -qF "X-Replied: yes" <<<"$out"; then
        pass "nats reply -H: reply header reaches the requester"
    else
        fail "nats reply -H header on the reply"; note "$out"
    fi
    if has_line "$f" "request-body-1" && has "$f" "X-Asked: please"; then
        pass "nats reply sees the request body and request header"
    else
        fail "nats reply did not see request body/header"; show "$f"
    fi
else
    fail "nats reply did not start listening"; show "$f"
fi

# ---- nats reply --command (token + env substitution) ----
reply_help=$("$NATS_BIN" reply --help 2>&1 || true)
if grep -q -- '--command' <<<"$reply_help"; then
    f=$TMP/reply_cmd.out
    if start_reply "$f" 'weather.>' --count 1 \
        --command "sh -c 'echo forecast:{{1}}:\$NATS_REQUEST_SUBJECT:\$NATS_REQUEST_BODY'"; then
        out=$(nats_ request weather.london "tomorrow" 2>&1) || true
        wait_exit "$REPLY_PID" 10
        if grep -qxF "forecast:london:weather.london:tomorrow" <<<"$out"; then
            pass "nats reply --command: command output returned to nats request"
        else
            fail "nats reply --command"; note "$out"; show "$f"
        fi
    else
        fail "nats reply --command did not start listening"; show "$f"
    fi
else
    echo "SKIP: this nats CLI has no 'nats reply --command'"
fi

# ---- echo service: headers round trip + 400 KB payload ----
f=$TMP/reply_echo.out
if start_reply "$f" svc.echo --echo --count 2; then
    out=$(nats_ request svc.echo "echo-me" -H "X-Round:trip" 2>&1) || true
    if grep -qxF "echo-me" <<<"$out" && grep -qF "X-Round: trip" <<<"$out" &&
        grep -qF "NATS-Reply-Counter: 0" <<<"$out"; then
        pass "nats reply --echo: body and request header echoed back"
    else
        fail "nats reply --echo headers round trip"; note "$out"
    fi
    head -c 300000 /dev/urandom | base64 -w 0 >"$TMP/big.in" # 400,000 bytes
    nats_ request svc.echo --force-stdin --raw <"$TMP/big.in" >"$TMP/big.out" 2>"$TMP/big.err" || true
    wait_exit "$REPLY_PID" 10
    if cmp -s <(tr -d '\n' <"$TMP/big.out") "$TMP/big.in"; then
        pass "400 KB request echoed back byte-for-byte"
    else
        fail "400 KB request/echo (got $(wc -c <"$TMP/big.out") bytes)"; note "$(head -c 300 "$TMP/big.err")"
    fi
else
    fail "nats reply --echo did not start listening"; show "$f"
fi

# ---- no responders ----
# NOTE: natscli v0.5.0 exits 0 here; it only logs "No responders are available".
out=$(nats_ request nobody.home "anyone?" 2>&1) || true
if grep -qi "no responders" <<<"$out"; then
    pass "nats request with no subscribers reports 'No responders'"
else
    fail "no-responders status not reported"; note "$out"
fi

# ================================================ user/password server =====
if start_server userpass --user e2e_user --pass 's3cret-pw'; then
    pass "server starts with --user/--pass"
    URL="nats://127.0.0.1:$SERVER_PORT"

    CREDS=(--user e2e_user --password 's3cret-pw')
    f=$TMP/auth_sub.out
    if start_sub "$f" _probe.auth auth.topic --count 2; then
        nats_ pub auth.topic "authed-payload" >/dev/null 2>&1 || true
        wait_exit "$SUB_PID" 15; rc=$WAIT_RC
        if [[ $rc == 0 ]] && has_line "$f" "authed-payload"; then
            pass "--user/--password: pub/sub works with the right credentials"
        else
            fail "--user/--password pub/sub (rc=$rc)"; show "$f"
        fi
    else
        fail "--user/--password: authenticated nats sub did not become ready"; show "$f"
    fi

    CREDS=(--user e2e_user --password wrong)
    rc=0
    out=$(nats_ pub auth.topic x 2>&1) || rc=$?
    if [[ $rc != 0 ]] && grep -qi "authorization violation" <<<"$out"; then
        pass "wrong password rejected with 'Authorization Violation'"
    else
        fail "wrong password not rejected (rc=$rc)"; note "$out"
    fi

    CREDS=()
    rc=0
    out=$(nats_ pub auth.topic x 2>&1) || rc=$?
    if [[ $rc != 0 ]] && grep -qi "authorization violation" <<<"$out"; then
        pass "missing credentials rejected with 'Authorization Violation'"
    else
        fail "missing credentials not rejected (rc=$rc)"; note "$out"
    fi
else
    fail "server did not start with --user/--pass"
fi

# ===================================================== token server ========
if start_server token --auth 'tok-e2e-123'; then
    pass "server starts with --auth <token>"
    URL="nats://127.0.0.1:$SERVER_PORT"
    CREDS=(--token 'tok-e2e-123')
    rc=0
    out=$(nats_ pub tok.topic x 2>&1) || rc=$?
    if [[ $rc == 0 ]]; then
        pass "--token: right token accepted"
    else
        fail "--token: right token refused (rc=$rc)"; note "$out"
    fi
    CREDS=(--token wrong-token)
    rc=0
    out=$(nats_ pub tok.topic x 2>&1) || rc=$?
    if [[ $rc != 0 ]] && grep -qi "authorization violation" <<<"$out"; then
        pass "--token: wrong token rejected"
    else
        fail "--token: wrong token not rejected (rc=$rc)"; note "$out"
    fi
    CREDS=()
else
    fail "server did not start with --auth"
fi

report
((FAILED == 0))

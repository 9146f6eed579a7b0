# shellcheck shell=bash
# Shared helpers for the end-to-end suites (tests/e2e/*.sh) and, through
# bench/lib.sh (which sources this file and adds the benchmark helpers), the
# benchmarks (bench/*.sh). Sourced, never run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"             # from tests/e2e/
#
# Sourcing only sets REPO_ROOT, PASSED=0, FAILED=0, PIDS=() and WAIT_RC=0 and
# defines the functions below; it starts nothing and installs no trap.
#
# Results
#   pass TEXT...     count a passed check and print "PASS: TEXT".
#   fail TEXT...     count a failed check and print "FAIL: TEXT".
#   report           print the final "N passed, M failed" line.
#
# Skipping (a required client is not installed)
#   skip_banner LINE...  print LINE... between two lines of '#'.
#   skip_exit [REASON]   end the script: with CI=true print "FAIL: REASON" (if
#                        given) and "0 passed, 1 failed" and exit 1; otherwise
#                        print "0 passed, 0 failed" and exit 0.
#
# Binaries
#   find_nats        print the nats CLI path: $NATS_BIN if set (looked up on
#                    PATH), else `nats` on PATH, else $(go env GOPATH)/bin/nats
#                    or ~/go/bin/nats. Returns 1 if there is none.
#   resolve_bin SPEC print the absolute path of SPEC: a path (relative paths are
#                    relative to REPO_ROOT) that must be executable, or a bare
#                    command name looked up on PATH. Returns 1 if not found.
#   require_server   set SERVER to the resolved ${SERVER_BIN:-target/release/jetraft};
#                    if it is not found, count a failure, report and exit 1.
#
# Processes and the temp dir
#   setup_tmp NAME   create the temp dir TMP (${TMPDIR:-/tmp}/NAME.XXXXXX) and
#                    install the traps: EXIT runs cleanup, INT/TERM exit 130.
#   cleanup          stop every PID in PIDS; remove TMP unless KEEP_LOGS=1
#                    (then print "logs kept in TMP").
#   alive PID        true while PID runs (zombies count as dead).
#   stop_pid PID [SIG]  send SIG (default TERM), wait up to 5 s, then SIGKILL;
#                    reaps it. Its stderr is dropped, which also hides bash's
#                    "Killed"/"Terminated" job notice.
#   wait_exit PID SECS [FILE PATTERN]  bounded wait for a background job; sets
#                    WAIT_RC to its exit code (124 if it had to be killed). With
#                    FILE and PATTERN it gives up at once (stops PID, WAIT_RC=125)
#                    as soon as a line of FILE matches PATTERN (grep). Not for use
#                    inside $(...): only the parent shell can reap its children.
#   free_port        print a free TCP port on 127.0.0.1 (asks ${PYTHON:-python3}).
#   free_ports N     print N distinct free TCP ports on 127.0.0.1, one per line (all bound
#                    at once before any is released: taken one at a time, the kernel may
#                    hand the same port out twice).
#   wait_port PID PORT [SECS]  wait up to SECS (10) s, while PID is alive, until
#                    127.0.0.1:PORT accepts a TCP connection; returns 1 if it never does.
#   start_server NAME [FLAGS...]  start `$SERVER -a 127.0.0.1 -p <free port> FLAGS...`
#                    with its log in $TMP/NAME.log, add it to PIDS, set
#                    SERVER_PORT and SERVER_PID and wait for the port; on
#                    failure print the log's tail and return 1.
#
# Python suites
#   run_python_checks FILE SECS  run `$PYTHON -u FILE` (bounded by SECS), tee its
#                    output to $TMP/py.out and add its "N passed, M failed" to
#                    PASSED/FAILED; a missing summary, or a non-zero exit with no
#                    failure counted, is one more failure.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# ----------------------------------------------------------------- results --
PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS: $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL: $*"; }
report() { echo "$PASSED passed, $FAILED failed"; }

# ---------------------------------------------------------------- skipping --
skip_banner() {
    echo "############################################################"
    printf '%s\n' "$@"
    echo "############################################################"
}
skip_exit() {
    if [[ ${CI:-} == true ]]; then
        [[ -n ${1:-} ]] && echo "FAIL: $1"
        echo "0 passed, 1 failed"
        exit 1
    fi
    echo "0 passed, 0 failed"
    exit 0
}

# ---------------------------------------------------------------- binaries --
find_nats() {
    if [[ -n ${NATS_BIN:-} ]]; then
        command -v "$NATS_BIN" 2>/dev/null && return 0
        return 1
    fi
    command -v nats 2>/dev/null && return 0
    local gp
    for gp in "$(go env GOPATH 2>/dev/null || true)" "$HOME/go"; do
        [[ -n $gp && -x $gp/bin/nats ]] && { echo "$gp/bin/nats"; return 0; }
    done
    return 1
}
resolve_bin() {
    local b=$1
    if [[ $b == */* ]]; then
        [[ $b == /* ]] || b="$REPO_ROOT/$b"
        [[ -x $b ]] || return 1
        echo "$b"
    else
        command -v "$b"
    fi
}
require_server() {
    if ! SERVER=$(resolve_bin "${SERVER_BIN:-target/release/jetraft}"); then
        fail "server binary '${SERVER_BIN:-target/release/jetraft}' not found or not executable (build it, or set SERVER_BIN)"
        report
        exit 1
    fi
}

# ------------------------------------------------- processes and temp dir --
PIDS=()
setup_tmp() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    trap cleanup EXIT
    trap 'exit 130' INT TERM
}
cleanup() {
    local p
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    if [[ ${KEEP_LOGS:-} == 1 ]]; then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}
alive() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}
stop_pid() { _stop_pid "$@" 2>/dev/null; }
_stop_pid() {
    local pid=$1 sig=${2:-TERM} i
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    alive "$pid" && kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
WAIT_RC=0
wait_exit() {
    local pid=$1 secs=$2 file=${3:-} pattern=${4:-} i
    WAIT_RC=0
    for ((i = 0; i < secs * 20; i++)); do
        alive "$pid" || break
        if [[ -n $file ]] && grep -q -- "$pattern" "$file" 2>/dev/null; then
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
# Ports come from below the kernel's ephemeral range (ip_local_port_range, 32768+ by
# default): a port from bind(0) lies in that range, and between its release and the
# server's bind it may become the local end of some client's outgoing connection ("Address
# already in use", seen in CI). Below the range only another listener can take it. Each
# call starts at a random point and skips ports that do not bind.
free_ports() {
    "${PYTHON:-python3}" -c '
import random, socket, sys
want, socks, port = int(sys.argv[1]), [], random.randrange(20000, 32000)
for _ in range(12000):
    if len(socks) == want:
        break
    port = 20000 + (port - 20000 + 1) % 12000
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        socks.append(s)
    except OSError:
        s.close()
if len(socks) < want:
    sys.exit("no free loopback port below the ephemeral range")
print("\n".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
free_port() { free_ports 1; }
wait_port() {
    local pid=$1 port=$2 secs=${3:-10} i
    for ((i = 0; i < secs * 10; i++)); do # every 0.1 s
        alive "$pid" || return 1
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}
start_server() {
    local name=$1
    shift
    SERVER_PORT=$(free_port)
    "$SERVER" -a 127.0.0.1 -p "$SERVER_PORT" "$@" >"$TMP/$name.log" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_port "$SERVER_PID" "$SERVER_PORT" && return 0
    echo "---- $name log ----"
    tail -n 20 "$TMP/$name.log" || true
    return 1
}

# ----------------------------------------------------------- python suites --
run_python_checks() {
    local file=$1 secs=$2 name rc=0 summary
    name=$(basename "$file")
    timeout "$secs" "$PYTHON" -u "$file" | tee "$TMP/py.out" || rc=$?
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$TMP/py.out" | tail -n 1 || true)
    if [[ -n $summary ]]; then
        PASSED=$((PASSED + $(awk '{print $1}' <<<"$summary")))
        FAILED=$((FAILED + $(awk '{print $3}' <<<"$summary")))
    else
        fail "$name produced no summary (exit $rc)"
    fi
    if [[ $rc != 0 && $FAILED == 0 ]]; then
        fail "$name exited $rc"
    fi
}

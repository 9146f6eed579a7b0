#!/usr/bin/env bash
# The fuzz smoke CI runs (.ci/run): builds every fuzz target and runs each for a few seconds
# on its committed corpus (fuzz/corpus/<target>/), with libFuzzer's own time bound, so it
# stops by itself. A crash fails the script; libFuzzer writes the input to
# fuzz/artifacts/<target>/ (replay: cargo +nightly fuzz run <target> <that file>).
#
#   bash fuzz/smoke.sh                # every target, SMOKE_SECONDS (default 8) each
#   SMOKE_SECONDS=600 bash fuzz/smoke.sh wal_recovery   # one target, longer
#
# The corpus directories are read-only inputs here: new coverage goes to a scratch copy, so
# a smoke run never changes the committed corpus.
set -euo pipefail
cd "$(dirname "$0")"
SMOKE_SECONDS=${SMOKE_SECONDS:-8}
TARGETS=("$@")
if [[ ${#TARGETS[@]} -eq 0 ]]; then
    TARGETS=(wire_decoder jsapi_requests wal_recovery snapshot stream_state cluster_messages segment_summary)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    # .ci/run installs it; elsewhere the smoke is skipped loudly, as the e2e suites without
    # their clients are.
    if [[ ${CI:-} == true ]]; then
        echo "FAIL: fuzz smoke: cargo-fuzz is not installed"
        exit 1
    fi
    echo "SKIP: fuzz smoke: cargo-fuzz is not installed (cargo install --locked cargo-fuzz --version 0.13.2)"
    exit 0
fi

# cargo-fuzz needs nightly rustc flags: the nightly toolchain where rustup has one, else the
# stable compiler with RUSTC_BOOTSTRAP=1 (the same flags, allowed on stable).
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    CARGO=(cargo +nightly)
else
    echo "no nightly toolchain: building with the stable compiler and RUSTC_BOOTSTRAP=1"
    export RUSTC_BOOTSTRAP=1
    CARGO=(cargo)
fi

# No sanitizer: the targets check for panics and wrong answers (safe Rust), and ASan would
# double the build and run times. -a: debug assertions and overflow checks stay on. --dev: no
# optimisation; a smoke runs seconds, and the optimised build of jetraft and its dependencies
# costs about 10 CPU-minutes (README "Fuzzing" runs long ones optimised).
FLAGS=(-a --sanitizer none --dev)
BUILD=(fuzz build "${FLAGS[@]}")
start=$(date +%s)
echo "== building the fuzz targets"
"${CARGO[@]}" "${BUILD[@]}" 2>&1 | tail -n 3
built=$(date +%s)
echo "built in $((built - start)) s"

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/jetraft-fuzz-smoke.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
failed=0
for target in "${TARGETS[@]}"; do
    mkdir -p "$SCRATCH/$target" "$SCRATCH/tmp"
    echo "== $target (${SMOKE_SECONDS} s)"
    # TMPDIR: the targets' scratch files (sled, WAL segments) go where this script cleans up.
    if TMPDIR="$SCRATCH/tmp" "${CARGO[@]}" fuzz run "${FLAGS[@]}" "$target" \
        "$SCRATCH/$target" "corpus/$target" -- \
        -max_total_time="$SMOKE_SECONDS" -rss_limit_mb=2048 -timeout=10 \
        >"$SCRATCH/$target.log" 2>&1; then
        grep -E '^#[0-9]+.*(DONE|pulse)' "$SCRATCH/$target.log" | tail -n 1 || true
    else
        failed=1
        echo "FAILED: $target"
        tail -n 40 "$SCRATCH/$target.log"
    fi
done
echo "fuzz smoke: $(( $(date +%s) - start )) s in all"
exit "$failed"

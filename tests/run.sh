#!/usr/bin/env bash
# The test command (README, CI): Rust unit and integration tests (async-nats), then the
# end-to-end suites with the real nats CLI and nats-py against a release build (among them the
# docker-compose cluster in containers, which needs a Docker engine and otherwise says SKIP),
# then the benchmark scripts in smoke mode, then the fuzz smoke (every fuzz target a few seconds
# on its committed corpus; needs cargo-fuzz, which .ci/run installs).
set -euo pipefail
cd "$(dirname "$0")/.."

GOBIN_DIR=$(go env GOPATH 2>/dev/null)/bin
[ -d "$GOBIN_DIR" ] && export PATH="$GOBIN_DIR:$PATH"

echo "== cargo test"
cargo test --all-targets 2>&1

echo "== release build for the end-to-end suites"
cargo build --release --bin jetraft 2>&1
SERVER_BIN=target/release/jetraft bash tests/e2e/run_all.sh

echo "== fuzz smoke (fuzz/smoke.sh)"
bash fuzz/smoke.sh

#!/usr/bin/env bash
# Builds a release sweeper, starts the environment, runs examples/bench_cascade.rs.
# BENCH_SCALE=0.1 for a quick run. The BENCH lines come last on stdout.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
cargo build --locked --release --bin sweeper
cargo build --locked --example bench_cascade
"$REPO_ROOT/scripts/env-up.sh"
# shellcheck disable=SC1091
source "$SWEEPER_STATE/env"
export SWEEPER_BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/sweeper"
"${CARGO_TARGET_DIR:-$REPO_ROOT/target}/debug/examples/bench_cascade"

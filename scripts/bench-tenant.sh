#!/usr/bin/env bash
# Starts the environment and runs examples/bench_tenant.rs (release: the teardown code is measured).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
cargo build --locked --release --example bench_tenant
"$REPO_ROOT/scripts/env-up.sh"
# shellcheck disable=SC1091
source "$SWEEPER_STATE/env"
"${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/examples/bench_tenant"

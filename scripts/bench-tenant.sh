#!/usr/bin/env bash
# Starts the environment and runs examples/bench_tenant.rs (release: the teardown code is measured).
# BENCH_ONLY=base|teardown10k|teardown100k|teardown|restart for one part (restart: a tenant
# collector killed mid-teardown and started again, timed to the Tenant released; it runs the
# release sweeper binary, SWEEPER_BIN).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
release="$("$REPO_ROOT/scripts/build-release.sh")"
"$REPO_ROOT/scripts/env-up.sh"
# shellcheck disable=SC1091
source "$SWEEPER_STATE/env"
check_idle_server
export SWEEPER_BIN="$release/sweeper"
"$release/examples/bench_tenant"

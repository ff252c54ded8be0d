#!/usr/bin/env bash
# Builds a release sweeper, starts the environment, runs examples/bench_cascade.rs.
# BENCH_SCALE=0.1 for a quick run; BENCH_ONLY=archive|expiry|limit|startup|watch|equal for one part (startup:
# start-up and RSS at 100,000 objects, sweeper vs kube-controller-manager; BENCH_STARTUP_RUNS runs,
# default 3; BENCH_KEEP_FILLER=1 keeps its 100k ConfigMaps for the next run; watch: the servers'
# CPU per 1,000 watch events delivered to each collector, BENCH_WATCH_RUNS runs, default 5; equal:
# both collectors at equal requests per second at the API server, cascade.*.equal_requests).
# The BENCH lines come last on stdout. The driver is a release build too: the limit line's plain
# client must not be what limits it.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
release="$("$REPO_ROOT/scripts/build-release.sh")"
"$REPO_ROOT/scripts/env-up.sh"
# shellcheck disable=SC1091
source "$SWEEPER_STATE/env"
check_idle_server
export SWEEPER_BIN="$release/sweeper"
"$release/examples/bench_cascade"

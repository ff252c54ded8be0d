#!/usr/bin/env bash
# Starts the environment and runs tests/bench/capa_delete.rs (`cargo bench`, release: the sweeper
# binary it starts is built beside it with the same profile). CAPA's controller is built into the
# cache on first use (scripts/provision-capa-manager.sh). BENCH_RUNS (default 3).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
"$REPO_ROOT/scripts/env-up.sh"
# shellcheck disable=SC1091
source "$SWEEPER_STATE/env"
"$REPO_ROOT/scripts/provision-capa-manager.sh" > /dev/null
# --profile release: the artifacts scripts/build-release.sh builds for the other benches (the
# bench profile has release's settings but a build of its own, the AWS SDK again).
cargo bench --locked --profile release --bench capa_delete

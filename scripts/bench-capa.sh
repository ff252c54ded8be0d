#!/usr/bin/env bash
# Starts the environment and runs tests/bench/capa_delete.rs (`cargo bench`, release: the sweeper
# binary it starts is the bench profile's, which is release's). CAPA's controller is built into the
# cache on first use (scripts/provision-capa-manager.sh). BENCH_RUNS (default 3).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
"$REPO_ROOT/scripts/env-up.sh"
# shellcheck disable=SC1091
source "$SWEEPER_STATE/env"
"$REPO_ROOT/scripts/provision-capa-manager.sh" > /dev/null
cargo bench --locked --bench capa_delete

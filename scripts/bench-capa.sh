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
# The release build of every bench target first (scripts/build-release.sh, which includes this
# bench), then `cargo bench` with the same profile and the same packages (--workspace): cargo
# unifies features per invocation, so a narrower one (this crate alone, without sweeper-aws's
# dev-dependencies) was a feature set of its own and rebuilt the AWS SDK crates (about 40 minutes).
"$REPO_ROOT/scripts/build-release.sh" > /dev/null
cargo bench --locked --profile release --workspace --bench capa_delete

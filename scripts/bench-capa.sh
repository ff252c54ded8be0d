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
# --profile release and --workspace: the release artifacts scripts/build-release.sh builds for the
# other benches. Cargo unifies features per invocation over the packages it selects, and
# `--workspace` with a bench target (dev-dependencies in) is the same set as build-release.sh's
# `--workspace --bins --examples`; this crate alone, without sweeper-aws's dev-dependencies, was a
# set of its own and rebuilt the AWS SDK crates (about 40 minutes on two cores).
cargo bench --locked --profile release --workspace --bench capa_delete

#!/usr/bin/env bash
# Builds every release target the benches run, in ONE cargo invocation: the `sweeper` binary and
# every example of both crates. Why one: cargo unifies dependency features per invocation, and the
# examples pull in dev-dependencies' features, so `cargo build --release --bin sweeper` followed by
# `--example bench_cascade` or `-p sweeper-aws --example bench_fleet` were three feature sets, and
# each rebuilt the AWS SDK crates (about 40 minutes on two cores). With one set, the second bench
# target costs nothing. The `sweeper` binary the benches start (SWEEPER_BIN) is this build's.
# Prints the release directory.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
cargo build --locked --release --workspace --bins --examples >&2
echo "$CARGO_TARGET_DIR/release"

#!/usr/bin/env bash
# Installs cargo-nextest (the runner `make test` uses) from crates.io into the cache, pinned, and
# prints the directory to put on PATH. First run: a few minutes on 2 cores. Later runs: a no-op.
source "$(dirname "$0")/lib.sh"
if [ ! -x "$NEXTEST_ROOT/bin/cargo-nextest" ]; then
  log "installing cargo-nextest $NEXTEST_VERSION from crates.io"
  # Its own target directory: the workspace's is keyed by other flags.
  CARGO_TARGET_DIR="$SWEEPER_CACHE/cargo-nextest/target" \
    cargo install --locked --root "$NEXTEST_ROOT" --version "$NEXTEST_VERSION" cargo-nextest >&2
  rm -rf "$SWEEPER_CACHE/cargo-nextest/target"
fi
echo "$NEXTEST_ROOT/bin"

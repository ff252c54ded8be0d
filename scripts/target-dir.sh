#!/usr/bin/env bash
# Prints the target directory of this checkout's development builds, creating it on first use:
# $SWEEPER_CACHE/targets/<folder>-<hash of the checkout's path>, one per clone or worktree.
# scripts/lib.sh and the Makefile use it unless CARGO_TARGET_DIR is set (.ci/run sets the shared
# one: CI's clone is always fresh).
#
# Why one per checkout: two worktrees sharing a directory wait on each other's lock, and worse,
# cargo judges an artifact fresh by file times, so one checkout can run a test binary built from
# another's sources (and reading the other's files: env!("CARGO_MANIFEST_DIR") is the building
# checkout). Why seeded: a new directory would rebuild the AWS SDK crates (15 to 40 minutes on two
# cores), so the first use hard-links CI's cache ($SWEEPER_CACHE/cargo-target; without one, the
# most recently built other checkout's) into it, taking no
# space until a crate is rebuilt. The small files cargo rewrites in place (.fingerprint, build
# script outputs, dep-info `*.d`) are copied, not linked, and the lock is left for cargo to make, so nothing written
# here reaches the cache.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${SWEEPER_CACHE:-$HOME/.cache/sweeper}"
dir="$cache/targets/$(basename "$root")-$(printf '%s' "$root" | sha256sum | cut -c1-12)"
if [ ! -d "$dir" ]; then
  mkdir -p "$cache/targets"
  shared="$cache/cargo-target"
  # No CI run on this machine yet: the newest other checkout's directory seeds this one instead
  # (a second clone would otherwise build the AWS SDK crates again).
  if [ ! -d "$shared/debug" ]; then
    newest="$(ls -1dt "$cache"/targets/*/debug 2>/dev/null | grep -v "\.seeding\." | head -n 1 || true)"
    [ -n "$newest" ] && shared="$(dirname "$newest")"
  fi
  if [ -d "$shared/debug" ]; then
    tmp="$dir.seeding.$$"
    mkdir -p "$tmp"
    cp -al "$shared/debug" "$tmp/"
    for sub in .fingerprint build; do
      if [ -d "$shared/debug/$sub" ]; then
        rm -rf "${tmp:?}/debug/$sub"
        cp -a "$shared/debug/$sub" "$tmp/debug/"
      fi
    done
    # Dep-info files (`*.d`) are rewritten in place too: each gets its own copy.
    find "$tmp/debug" -name '*.d' -type f -links +1 -exec sh -c \
      'for f; do cp "$f" "$f.copy" && mv -f "$f.copy" "$f"; done' sh {} +
    rm -f "$tmp/debug/.cargo-lock"
    # The workspace's own crates are built again here: CI built them from its clone, whose files are
    # newer than this checkout's, so cargo would judge them fresh and run test binaries that read
    # CI's clone (env!("CARGO_MANIFEST_DIR")), not this one. Dropping their fingerprints forces that
    # rebuild (a few minutes) and keeps every dependency's.
    rm -rf "$tmp"/debug/.fingerprint/sweeper-[0-9a-f]* "$tmp"/debug/.fingerprint/sweeper-aws-[0-9a-f]*
    mv "$tmp" "$dir"
  else
    mkdir -p "$dir"
  fi
fi
printf '%s\n' "$dir"

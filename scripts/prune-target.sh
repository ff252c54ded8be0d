#!/usr/bin/env bash
# Prunes the shared build cache (CARGO_TARGET_DIR) to what the newest build of this checkout uses:
# run by .ci/run after `make test`. Every build of a changed crate adds a new artifact beside the
# old ones (cargo never deletes), so without this the cache grows by gigabytes per run.
#
# What stays: every artifact cargo names (its `compiler-artifact` messages) for the builds CI
# does: `make lint`'s clippy, scripts/test.sh's `cargo build --workspace --all-targets` and
# nextest's `cargo test --no-run`, all fresh by now, so asking again only re-reads fingerprints.
# What goes: every other file under debug/deps and debug/examples (older builds of the same crate,
# crates no longer depended on), and every debug/incremental directory this run did not write
# (rustc writes a workspace crate's session on each compile, and a fresh clone compiles each).
# debug/build and debug/.fingerprint (some 100 MB) are left as they are.
# PRUNE_DRY_RUN=1 lists what would go and deletes nothing.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
started="${PRUNE_SINCE:?PRUNE_SINCE: a file whose time is when the build run began}"
messages="$(mktemp)"
trap 'rm -f "$messages"' EXIT
cargo clippy --workspace --all-targets --locked --message-format=json -- -D warnings >"$messages"
cargo build --workspace --all-targets --locked --message-format=json >>"$messages"
cargo test --workspace --no-run --locked --message-format=json >>"$messages" 2>/dev/null
python3 - "$messages" "$CARGO_TARGET_DIR/debug" "$started" "${PRUNE_DRY_RUN:-0}" <<'EOF'
import json, os, shutil, sys

messages, debug, started, dry = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
since = os.stat(started).st_mtime


def stem(name):
    """libserde-1a2b.rlib, serde-1a2b.d, sweeper-1a2b (a test): serde-1a2b / sweeper-1a2b."""
    base = name[3:] if name.startswith("lib") else name
    return base.split(".", 1)[0]


keep = set()
for line in open(messages):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact":
        continue
    for f in m.get("filenames", []) + [m.get("executable") or ""]:
        if f:
            keep.add(stem(os.path.basename(f)))
if not keep:
    sys.exit("prune-target: cargo named no artifact; nothing is pruned")

freed = 0


def drop(path):
    global freed
    size = os.path.getsize(path) if os.path.isfile(path) else sum(
        os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    freed += size
    if dry:
        print(f"would remove {path}")
    elif os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.remove(path)


for sub in ("deps", "examples"):
    d = os.path.join(debug, sub)
    for name in os.listdir(d) if os.path.isdir(d) else []:
        p = os.path.join(d, name)
        # Only cargo's hashed names: `<crate>-<16 hex>`; anything else is not ours to judge.
        s = stem(name)
        h = s.rsplit("-", 1)[-1]
        if len(h) == 16 and all(c in "0123456789abcdef" for c in h) and s not in keep:
            drop(p)
inc = os.path.join(debug, "incremental")
for name in os.listdir(inc) if os.path.isdir(inc) else []:
    p = os.path.join(inc, name)
    if os.path.getmtime(p) < since:
        drop(p)
print(f"prune-target: {'would free' if dry else 'freed'} {freed / 2**30:.1f} GiB "
      f"({len(keep)} artifacts kept)")
EOF

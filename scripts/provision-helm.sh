#!/usr/bin/env bash
# Builds helm from helm.sh/helm/v3 at the version scripts/go/helm pins and caches it outside the
# clone. Prints the binary's path. First run: a few minutes on 2 cores. Later runs: a no-op.
# Many callers may ask at once (every tests/helm.rs test runs in its own process): one builds under
# the lock, the others wait for it and find the binary; each build writes its own temporary file, so
# no caller can move another's away (CI of 2026-12-03: `mv: cannot stat …/helm.tmp`).
source "$(dirname "$0")/lib.sh"
if [ -x "$HELM_BIN" ]; then echo "$HELM_BIN"; exit 0; fi
command -v go >/dev/null || { log "go is not installed: the machine's Go toolchain (1.26) builds helm"; exit 1; }
mkdir -p "$(dirname "$HELM_BIN")"
exec 9>"$HELM_BIN.lock"
flock 9
if [ -x "$HELM_BIN" ]; then echo "$HELM_BIN"; exit 0; fi
cd "$REPO_ROOT/scripts/go/helm"
log "building helm $HELM_VERSION (a few minutes on first use)"
tmp="$HELM_BIN.tmp.$$"
trap 'rm -f "$tmp"' EXIT
CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" -o "$tmp" helm.sh/helm/v3/cmd/helm >&2
mv "$tmp" "$HELM_BIN"
echo "$HELM_BIN"

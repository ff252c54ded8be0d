#!/usr/bin/env bash
# Builds helm from helm.sh/helm/v3 at the version scripts/go/helm pins and caches it outside the
# clone. Prints the binary's path. First run: a few minutes on 2 cores. Later runs: a no-op.
source "$(dirname "$0")/lib.sh"
if [ -x "$HELM_BIN" ]; then echo "$HELM_BIN"; exit 0; fi
command -v go >/dev/null || { log "go is not installed: the machine's Go toolchain (1.26) builds helm"; exit 1; }
cd "$REPO_ROOT/scripts/go/helm"
log "building helm $HELM_VERSION (a few minutes on first use)"
mkdir -p "$(dirname "$HELM_BIN")"
CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" -o "$HELM_BIN.tmp" helm.sh/helm/v3/cmd/helm >&2
mv "$HELM_BIN.tmp" "$HELM_BIN"
echo "$HELM_BIN"

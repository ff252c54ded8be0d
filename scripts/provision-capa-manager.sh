#!/usr/bin/env bash
# Builds scripts/go/capa-manager (CAPA's own AWSCluster controller, from CAPA's Go module at the
# version its go.mod pins, the webhooks' release) into the cache outside the clone. Prints the
# binary's path; CAPA's AWSMachine CRD lies beside it (awsmachines.yaml). First run: several minutes on 2 cores (most of its modules are the webhooks'
# already). Later runs: a no-op. scripts/capa-manager.sh calls it on first use.
source "$(dirname "$0")/lib.sh"
ready() { [ -x "$CAPA_MANAGER_BIN" ] && [ -f "$(dirname "$CAPA_MANAGER_BIN")/awsmachines.yaml" ]; }
if ready; then echo "$CAPA_MANAGER_BIN"; exit 0; fi
# Tests run in parallel and each provisions on first use: one builds, the others wait for it.
mkdir -p "$SWEEPER_CACHE/capa-manager"
exec 9>"$SWEEPER_CACHE/capa-manager/.lock"
flock 9
if ready; then echo "$CAPA_MANAGER_BIN"; exit 0; fi
command -v go >/dev/null || { log "go is not installed: the machine's Go toolchain (1.26) builds CAPA's controller"; exit 1; }
cd "$REPO_ROOT/scripts/go/capa-manager"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
log "building CAPA $CAPA_MANAGER_VERSION's AWSCluster controller (several minutes on first use)"
dir="$(dirname "$CAPA_MANAGER_BIN")"
tmp="$dir.tmp.$$"
rm -rf "$tmp" && mkdir -p "$tmp"
start=$SECONDS
go build -trimpath -ldflags "-s -w" -o "$tmp/capa-manager" . >&2
# CAPA's AWSMachine CRD, from the module cache (never copied into the repository): CAPA's
# AWSCluster delete lists the cluster's AWSMachines first; the manager creates it when missing.
capa_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api-provider-aws/v2)"
install -m 0644 "$capa_dir/config/crd/bases/infrastructure.cluster.x-k8s.io_awsmachines.yaml" "$tmp/awsmachines.yaml"
rm -rf "$dir" && mv "$tmp" "$dir"
log "built in $((SECONDS - start))s, cached in $dir"
echo "$CAPA_MANAGER_BIN"

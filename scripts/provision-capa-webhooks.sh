#!/usr/bin/env bash
# Builds scripts/go/capa-webhooks (CAPA's and Cluster API's own admission webhooks, from their Go
# modules at the versions its go.mod pins) and caches it outside the clone with the two
# webhook manifests it registers (CAPA's and Cluster API's config/webhook/manifests.yaml, read from
# the module cache, never copied into the repository). Prints the cache directory.
# First run: about 5-8 minutes on 2 cores. Later runs: a no-op.
source "$(dirname "$0")/lib.sh"
if [ -x "$CAPA_WEBHOOKS_DIR/capa-webhooks" ] && [ -f "$CAPA_WEBHOOKS_DIR/capa-manifests.yaml" ]; then
  echo "$CAPA_WEBHOOKS_DIR"; exit 0
fi
command -v go >/dev/null || { log "go is not installed: the machine's Go toolchain (1.26) builds CAPA's webhooks"; exit 1; }
# One build at a time (a demo and a test run may start together); the second finds the first's.
mkdir -p "$(dirname "$CAPA_WEBHOOKS_DIR")"
exec 9>"$CAPA_WEBHOOKS_DIR.lock"
flock 9
if [ -x "$CAPA_WEBHOOKS_DIR/capa-webhooks" ] && [ -f "$CAPA_WEBHOOKS_DIR/capa-manifests.yaml" ]; then
  echo "$CAPA_WEBHOOKS_DIR"; exit 0
fi
cd "$REPO_ROOT/scripts/go/capa-webhooks"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
log "building CAPA $CAPA_VERSION's webhooks (several minutes on first use)"
tmp="$CAPA_WEBHOOKS_DIR.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
go build -trimpath -ldflags "-s -w" -o "$tmp/capa-webhooks" . >&2
go mod download sigs.k8s.io/cluster-api-provider-aws/v2 sigs.k8s.io/cluster-api >&2
capa_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api-provider-aws/v2)"
capi_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
install -m 0644 "$capa_dir/config/webhook/manifests.yaml" "$tmp/capa-manifests.yaml"
install -m 0644 "$capi_dir/config/webhook/manifests.yaml" "$tmp/capi-manifests.yaml"
rm -rf "$CAPA_WEBHOOKS_DIR" && mv "$tmp" "$CAPA_WEBHOOKS_DIR"
log "cached in $CAPA_WEBHOOKS_DIR"
echo "$CAPA_WEBHOOKS_DIR"

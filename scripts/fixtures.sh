#!/usr/bin/env bash
# Resolves the upstream conformance fixtures into the cache outside the clone and prints their
# folder: CAPA's and Cluster API's CRDs and CAPA's cluster templates, unmodified, from the Go
# modules that scripts/go/capa-webhooks/go.mod pins (and go.sum verifies): the same releases whose
# admission webhooks env-up runs, so the schemas and the webhooks are one release. KubeZoo
# publishes no module the Go proxy serves: its Tenant CRD and the objects its tenant controller
# makes are the project's own transcriptions (scripts/fixtures/kubezoo, each file's header names
# the KubeZoo files and commit). env-up, the demo, the tests (tests/support/conformance.rs) and
# the benchmarks read this folder; nothing is copied into the repository.
#
# Layout (what the readers expect): capa/<CRD files>, capa/templates/<templates>, capa/LICENSE,
# capi/cluster.x-k8s.io_clusters.yaml, capi/LICENSE, kubezoo/<project files>, SOURCES (module,
# version, go.sum hash, directory of each). First run: a module download (seconds, the webhooks'
# build shares it); later runs: a no-op.
source "$(dirname "$0")/lib.sh"
MODDIR="$REPO_ROOT/scripts/go/capa-webhooks"
CAPA_MOD=sigs.k8s.io/cluster-api-provider-aws/v2
CAPI_MOD=sigs.k8s.io/cluster-api
CAPI_VERSION="$(go_pin capa-webhooks "$CAPI_MOD")"
# The CRDs sweeper reads or writes, and the identities a cluster's session is built from. CAPA's
# other kinds (machines, ROSA, EKS configs) play no part; CAPA's manager installs its AWSMachine
# CRD itself (scripts/provision-capa-manager.sh).
CAPA_CRDS=(
  infrastructure.cluster.x-k8s.io_awsclusters.yaml
  infrastructure.cluster.x-k8s.io_awsmanagedclusters.yaml
  controlplane.cluster.x-k8s.io_awsmanagedcontrolplanes.yaml
  infrastructure.cluster.x-k8s.io_awsclustercontrolleridentities.yaml
  infrastructure.cluster.x-k8s.io_awsclusterroleidentities.yaml
  infrastructure.cluster.x-k8s.io_awsclusterstaticidentities.yaml
)
CAPA_TEMPLATES=(cluster-template.yaml cluster-template-eks.yaml)
CAPI_CRDS=(cluster.x-k8s.io_clusters.yaml)
key="$CAPA_VERSION-$CAPI_VERSION-$( (cd "$REPO_ROOT/scripts" && sha256sum fixtures.sh fixtures/kubezoo/* go/capa-webhooks/go.mod go/capa-webhooks/go.sum) | sha256sum | cut -c1-12)"
DIR="$SWEEPER_CACHE/fixtures/$key"
if [ -f "$DIR/SOURCES" ]; then echo "$DIR"; exit 0; fi
command -v go >/dev/null || { log "go is not installed: the machine's Go toolchain (1.26) fetches the upstream CRDs from their modules"; exit 1; }
mkdir -p "$SWEEPER_CACHE/fixtures"
exec 9>"$DIR.lock"
flock 9
if [ -f "$DIR/SOURCES" ]; then echo "$DIR"; exit 0; fi
log "fetching the upstream CRDs and templates from $CAPA_MOD@$CAPA_VERSION and $CAPI_MOD@$CAPI_VERSION"
json="$(cd "$MODDIR" && GOFLAGS=-mod=readonly go mod download -json "$CAPA_MOD" "$CAPI_MOD")"
# `go mod download -json` prints one JSON object per module: the directory, version and go.sum hash.
field() { # module field -> value
  python3 -c '
import json, sys
dec, text, i = json.JSONDecoder(), sys.stdin.read(), 0
while i < len(text):
    while i < len(text) and text[i].isspace(): i += 1
    if i == len(text): break
    obj, i = dec.raw_decode(text, i)
    if obj.get("Error"): sys.exit("go mod download: %s: %s" % (obj.get("Path"), obj["Error"]))
    if obj["Path"] == sys.argv[1]: print(obj[sys.argv[2]]); break
else: sys.exit("go mod download printed nothing for " + sys.argv[1])' "$1" "$2" <<<"$json"
}
capa_dir="$(field "$CAPA_MOD" Dir)"
capi_dir="$(field "$CAPI_MOD" Dir)"
tmp="$DIR.tmp.$$"
rm -rf "$tmp" && mkdir -p "$tmp/capa/templates" "$tmp/capi" "$tmp/kubezoo"
for f in "${CAPA_CRDS[@]}"; do install -m 0644 "$capa_dir/config/crd/bases/$f" "$tmp/capa/$f"; done
for f in "${CAPA_TEMPLATES[@]}"; do install -m 0644 "$capa_dir/templates/$f" "$tmp/capa/templates/$f"; done
install -m 0644 "$capa_dir/LICENSE" "$tmp/capa/LICENSE"
for f in "${CAPI_CRDS[@]}"; do install -m 0644 "$capi_dir/config/crd/bases/$f" "$tmp/capi/$f"; done
install -m 0644 "$capi_dir/LICENSE" "$tmp/capi/LICENSE"
install -m 0644 "$REPO_ROOT"/scripts/fixtures/kubezoo/*.yaml "$tmp/kubezoo/"
{
  for m in "$CAPA_MOD" "$CAPI_MOD"; do
    printf '%s %s %s %s\n' "$m" "$(field "$m" Version)" "$(field "$m" Sum)" "$(field "$m" Dir)"
  done
  printf 'kubezoo: the project'"'"'s own transcriptions, scripts/fixtures/kubezoo\n'
} > "$tmp/SOURCES"
rm -rf "$DIR" && mv "$tmp" "$DIR"
log "upstream fixtures in $DIR"
echo "$DIR"

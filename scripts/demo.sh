#!/usr/bin/env bash
# `make demo`: the embedded default environment (local kube-apiserver + LocalStack, provisioned on
# first use), then sweeper against it. Shows it connecting, discovering resources, becoming ready
# and serving /metrics, picking up a new CRD without a restart, and shutting down on SIGTERM.
# DEMO_HOLD=1 keeps sweeper running in the foreground until Ctrl-C.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

cargo build --locked --bin sweeper
"$REPO_ROOT/scripts/env-up.sh"
# shellcheck disable=SC1091
source "$SWEEPER_STATE/env"
BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/debug/sweeper"
KUBECTL="$K8S_BIN_DIR/kubectl"
PORT="${DEMO_PORT:-18080}"

log "applying sweeper's CRDs"
"$BIN" crds | "$KUBECTL" apply -f - >&2

if [ "${DEMO_HOLD:-0}" = 1 ]; then
  exec "$BIN" run --http-addr "127.0.0.1:$PORT" \
    --feature-gates CascadeGC=true,TenantGC=true,ExternalResourceGC=true
fi

"$BIN" run --http-addr "127.0.0.1:$PORT" --discovery-interval 3s \
  --feature-gates CascadeGC=true,TenantGC=true,ExternalResourceGC=true &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 60); do curl -fsS "127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break; sleep 0.5; done
printf '\n== /readyz: %s\n' "$(curl -fsS "127.0.0.1:$PORT/readyz")"
printf '== /metrics (sweeper_*):\n'; curl -fsS "127.0.0.1:$PORT/metrics" | grep '^sweeper_' || true

log "cascade: an owner with three dependents, queried through the graph, then deleted"
"$KUBECTL" create namespace sweeper-demo --dry-run=client -o yaml | "$KUBECTL" apply -f - >&2
"$KUBECTL" -n sweeper-demo delete configmap --all >/dev/null 2>&1 || true
"$KUBECTL" -n sweeper-demo create configmap owner >&2
OWNER_UID="$("$KUBECTL" -n sweeper-demo get configmap owner -o jsonpath='{.metadata.uid}')"
for i in 1 2 3; do
  cat <<CM | "$KUBECTL" apply -f - >&2
apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent-$i
  namespace: sweeper-demo
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: "$OWNER_UID"}]
CM
done
sleep 2
printf '== sweeper graph dependents v1/ConfigMap sweeper-demo owner:\n'
"$BIN" graph --server "http://127.0.0.1:$PORT" dependents v1/ConfigMap sweeper-demo owner
"$KUBECTL" -n sweeper-demo delete configmap owner >&2
for _ in $(seq 40); do
  [ -z "$("$KUBECTL" -n sweeper-demo get configmap -o name 2>/dev/null | grep dependent)" ] && break; sleep 0.25
done
printf '== configmaps left in sweeper-demo after deleting the owner: %s\n' "$("$KUBECTL" -n sweeper-demo get configmap -o name 2>/dev/null | grep -c dependent || true)"
curl -fsS "127.0.0.1:$PORT/metrics" | grep -E '^sweeper_(cascade_deleted|kube_api_calls)' || true

log "creating a new CRD; the next discovery refresh picks it up without a restart"
cat <<'CRD' | "$KUBECTL" apply -f - >&2
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.demo.sweeper.dev}
spec:
  group: demo.sweeper.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
CRD
sleep 8
printf '== after the new CRD:\n'; curl -fsS "127.0.0.1:$PORT/metrics" | grep '^sweeper_discovered_resources' || true
"$KUBECTL" delete crd widgets.demo.sweeper.dev >&2

log "sending SIGTERM: sweeper drains and exits"
kill -TERM "$pid"; wait "$pid"; trap - EXIT
log "demo done. The environment keeps running: 'make env-down' stops it."

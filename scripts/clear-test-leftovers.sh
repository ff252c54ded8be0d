#!/usr/bin/env bash
# Releases what killed test runs left held in the test API server: in every Terminating namespace
# labelled sweeper.dev/test=true (tests/support's TestScope), the cluster objects that still carry
# sweeper's finalizer. No sweeper serves them any more (their test is over), and the namespace
# controller retries such a namespace without end: three of them cost the API server about 26
# requests/s, counted in every later test and benchmark. A test that ends normally releases its
# own (TestScope's drop); this is for the runs that were killed before their drop. Only test
# namespaces, only sweeper's finalizer, and each patch carries the resourceVersion it read.
# Called by env-up.sh; safe to run any time.
source "$(dirname "$0")/lib.sh"
: "${KUBECONFIG_FILE:=$SWEEPER_STATE/kubeconfig}"
kubectl() { "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
FINALIZER=sweeper.dev/external-resource-gc
namespaces="$(kubectl get namespaces -l sweeper.dev/test=true \
  -o jsonpath='{range .items[?(@.status.phase=="Terminating")]}{.metadata.name}{"\n"}{end}')"
[ -n "$namespaces" ] || exit 0
for ns in $namespaces; do
  for kind in awsclusters.infrastructure.cluster.x-k8s.io awsmanagedcontrolplanes.controlplane.cluster.x-k8s.io; do
    # name, resourceVersion and the finalizers kept, for each object that holds ours.
    kubectl get "$kind" -n "$ns" -o json 2>/dev/null | python3 -c '
import json, sys
f = sys.argv[1]
for o in json.load(sys.stdin).get("items", []):
    m = o["metadata"]
    fs = m.get("finalizers") or []
    if f in fs:
        print(m["name"], json.dumps({"metadata": {"resourceVersion": m["resourceVersion"], "finalizers": [x for x in fs if x != f]}}))
' "$FINALIZER" | while read -r name patch; do
      # CAPA's webhook warns about the spec on every write (deprecations): said only on failure.
      if out="$(kubectl patch "$kind" -n "$ns" "$name" --type merge -p "$patch" 2>&1 >/dev/null)"; then
        echo "$ns/$name"
      else
        printf '%s\n' "$out" | grep -v '^Warning:' >&2 || true
      fi
    done
  done
done | while read -r what; do
  log "released $FINALIZER of $what (a killed test run's, its namespace Terminating)"
done

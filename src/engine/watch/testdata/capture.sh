#!/usr/bin/env bash
# Captures the protobuf bodies the decoder tests read (src/engine/watch/proto/tests.rs), from a
# real API server: the test environment's kube-apiserver 1.20 (scripts/env-up.sh). Run from the
# repository root with the environment's variables, e.g.
#   source .state/env && src/engine/watch/testdata/capture.sh
# It creates the namespace sweeper-fixture (deleted at the end), and compacts the environment's
# etcd (ETCD_CLIENT_PORT, 32379 by default) so that an old watch gets its 410: use it on a test
# environment only. Names and uids in the bodies change from one capture to the next; the tests
# read them from the bodies' neighbours (the list's objects), not from constants.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)"
: "${SWEEPER_TEST_ENV:?source the env file of scripts/env-up.sh first}"
pki="$SWEEPER_TEST_ENV/pki"
token="$(cat "$pki/admin.token")"
server="$(sed -n 's/^ *server: //p' "$KUBECONFIG" | head -1)"
etcd="http://127.0.0.1:${ETCD_CLIENT_PORT:-32379}"
kubectl() { "$SWEEPER_K8S_BIN/kubectl" "$@"; }
list_accept='application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json'
watch_accept='application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json'
get() { # accept, path, output file
  curl -sS --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" -H "Accept: $1" -o "$3" "$server$2"
}
ns=sweeper-fixture
kubectl delete namespace "$ns" --ignore-not-found --wait >/dev/null
kubectl create namespace "$ns" >/dev/null

# A list: an owner, a dependent with a blocking controller reference, an object being deleted
# (a finalizer holds it, so it has a deletionTimestamp).
kubectl -n "$ns" create configmap owner >/dev/null
owner_uid="$(kubectl -n "$ns" get configmap owner -o jsonpath='{.metadata.uid}')"
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  namespace: $ns
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: $owner_uid, controller: true, blockOwnerDeletion: true}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: held, namespace: $ns, finalizers: [sweeper.dev/fixture]}
YAML
kubectl -n "$ns" delete configmap held --wait=false >/dev/null
get "$list_accept" "/api/v1/namespaces/$ns/configmaps?resourceVersion=0" "$out/list.pb"
version="$(kubectl get --raw "/api/v1/namespaces/$ns/configmaps?resourceVersion=0" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')"

# A watch from the list's version: an ADDED, a MODIFIED, a DELETED, then the bookmark the watch
# cache sends a watcher with allowWatchBookmarks shortly before its timeout.
get "$watch_accept" "/api/v1/namespaces/$ns/configmaps?watch=1&resourceVersion=$version&allowWatchBookmarks=true&timeoutSeconds=4" "$out/watch.pb" &
sleep 1
kubectl -n "$ns" create configmap added >/dev/null
kubectl -n "$ns" label configmap added touched=yes >/dev/null
kubectl -n "$ns" delete configmap added >/dev/null
wait

# An ERROR event (410 Gone) in a protobuf watch: Events are watched from etcd (no watch cache),
# and an etcd compacted past the requested version answers "too old resource version".
rev="$(curl -sS -X POST "$etcd/v3/kv/range" -d '{"key":"AA=="}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')"
curl -sS -X POST "$etcd/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
get "$watch_accept" "/api/v1/events?watch=1&resourceVersion=1&timeoutSeconds=2" "$out/watch-gone.pb"

# A list error: the server answers a Status in JSON even to a protobuf Accept (the Status kind
# only matches the header's final application/json). Too large a version with NotOlderThan: the
# watch cache waits 3 s, then 504 with reason Timeout.
get "$list_accept" "/api/v1/namespaces/$ns/configmaps?resourceVersion=999999999&resourceVersionMatch=NotOlderThan" "$out/list-error.json"

kubectl -n "$ns" patch configmap held --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
kubectl delete namespace "$ns" --wait=false >/dev/null
ls -l "$out"

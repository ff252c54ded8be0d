#!/usr/bin/env bash
# Starts the test environment on loopback: etcd, kube-apiserver (token auth, RBAC; Kubernetes
# v$K8S_VERSION built from Go modules, or 1.20 with SWEEPER_KUBE=1.20), kube-controller-manager
# (namespace controller only: sweeper is the only garbage collector), CAPA's own admission webhooks
# (scripts/go/capa-webhooks) with the upstream CRDs applied as they are, and LocalStack.
# Provisions what is missing first. Idempotent: running it twice is fine.
# Writes $SWEEPER_STATE/env (source it) with KUBECONFIG and the AWS_* variables.
# SWEEPER_LOCALSTACK=0 leaves LocalStack out (neither provisioned nor started): for the Kubernetes-only
# benchmarks, so a second environment beside another one needs no LocalStack of its own.
source "$(dirname "$0")/lib.sh"
SWEEPER_LOCALSTACK="${SWEEPER_LOCALSTACK:-1}"

"$REPO_ROOT/scripts/provision-kubernetes.sh"
if [ "$SWEEPER_KUBE" = current ]; then CAPA_WEBHOOKS="$("$REPO_ROOT/scripts/provision-capa-webhooks.sh")"; fi
if [ "$SWEEPER_LOCALSTACK" != 0 ]; then "$REPO_ROOT/scripts/provision-localstack.sh"; fi

mkdir -p "$SWEEPER_STATE"/{logs,pki,run}
PKI="$SWEEPER_STATE/pki"

running() { local p="$SWEEPER_STATE/run/$1.pid"; [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null; }
start() { # name, command...
  local name="$1"; shift
  if running "$name"; then log "$name already running (pid $(cat "$SWEEPER_STATE/run/$name.pid"))"; return 0; fi
  log "starting $name (log: $SWEEPER_STATE/logs/$name.log)"
  # The servers outlive this script, so they must not keep its caller's descriptors: a lock held
  # by whoever ran env-up (`flock lockfile make test`) would otherwise stay held until env-down.
  ( for fd in $(ls "/proc/$BASHPID/fd"); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
    exec setsid "$@" >"$SWEEPER_STATE/logs/$name.log" 2>&1 < /dev/null ) &
  echo $! > "$SWEEPER_STATE/run/$name.pid"
}
wait_for() { # what, seconds, command...
  local what="$1" secs="$2"; shift 2
  for _ in $(seq "$((secs * 2))"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  log "$what did not become healthy within ${secs}s; see $SWEEPER_STATE/logs"; exit 1
}

# --- credentials: a CA, a serving cert for 127.0.0.1/localhost, a service-account key, tokens ---
if [ ! -f "$PKI/serving.crt" ]; then
  log "generating certificates and tokens"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sweeper-test-ca" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$PKI/serving.key" -out "$PKI/serving.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > "$PKI/serving.ext"
  openssl x509 -req -in "$PKI/serving.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$PKI/serving.ext" -out "$PKI/serving.crt" 2>/dev/null
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  admin_token="$(openssl rand -hex 24)"
  # admin: system:masters (tests, kcm). The sweeper service account's own RBAC is in deploy/.
  printf '%s,admin,admin-uid,"system:masters"\n' "$admin_token" > "$PKI/tokens.csv"
  echo "$admin_token" > "$PKI/admin.token"
fi
admin_token="$(cat "$PKI/admin.token")"
# kubeconfig FILE USER TOKEN [NAMESPACE]
kubeconfig() {
  cat > "$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: sweeper-test
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    token: $3
contexts:
- name: sweeper-test
  context: {cluster: sweeper-test, user: $2, namespace: ${4:-default}}
current-context: sweeper-test
KC
}
# service_account NAME KUBECONFIG: a static token for system:serviceaccount:sweeper-system:NAME
# (kept across runs) and a kubeconfig that uses it. The token file is read at start: a running
# apiserver must restart to learn a new token.
service_account() {
  local name="$1" file="$2" token
  if [ ! -f "$PKI/$name.token" ]; then
    openssl rand -hex 24 > "$PKI/$name.token"
  fi
  token="$(cat "$PKI/$name.token")"
  if ! grep -q "^$token," "$PKI/tokens.csv"; then
    printf '%s,system:serviceaccount:sweeper-system:%s,%s-sa-uid,"system:serviceaccounts,system:serviceaccounts:sweeper-system"\n' \
      "$token" "$name" "$name" >> "$PKI/tokens.csv"
    if running kube-apiserver; then
      log "restarting kube-apiserver for the new service-account token of $name"
      local pid
      pid="$(cat "$SWEEPER_STATE/run/kube-apiserver.pid")"; kill "$pid"
      for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    fi
  fi
  kubeconfig "$file" "$name" "$token" sweeper-system
}
# The identity `sweeper run` uses in tests: the shipped service account (deploy/manifests/full), so every
# integration test runs the collectors under the shipped RBAC, and the audit log below records
# what that identity really calls (tests/rbac.rs checks the role against it).
SA_USER="system:serviceaccount:sweeper-system:sweeper"
SA_KUBECONFIG_FILE="$SWEEPER_STATE/sweeper-sa.kubeconfig"
service_account sweeper "$SA_KUBECONFIG_FILE"
# The external-only install's rules (deploy/manifests/external-only), bound to a second service
# account: the external collector's conformance tests run as it, so its narrow role is checked the
# same way.
EXT_SA_USER="system:serviceaccount:sweeper-system:sweeper-external"
EXT_SA_KUBECONFIG_FILE="$SWEEPER_STATE/sweeper-external-sa.kubeconfig"
service_account sweeper-external "$EXT_SA_KUBECONFIG_FILE"
# Audit: metadata of every request of the service account, nothing else.
cat > "$SWEEPER_STATE/audit-policy.yaml" <<POLICY
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    users: ["$SA_USER", "$EXT_SA_USER"]
  - level: None
POLICY
KUBECONFIG_FILE="$SWEEPER_STATE/kubeconfig"
kubeconfig "$KUBECONFIG_FILE" admin "$admin_token"

# --- etcd ---
if [ "$SWEEPER_KUBE" = 1.20 ]; then ETCD_BIN=etcd; else ETCD_BIN="$K8S_BIN_DIR/etcd"; fi
start etcd "$ETCD_BIN" --name sweeper-test --data-dir "$SWEEPER_STATE/etcd-$SWEEPER_KUBE" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "sweeper-test=http://127.0.0.1:$ETCD_PEER_PORT" --quota-backend-bytes 4294967296
wait_for etcd 30 curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health"

# --- kube-apiserver ---
# Flags that differ between the two servers: 1.20 serves an insecure port unless told not to;
# the flag is gone since 1.24. kube-controller-manager's --port likewise.
if [ "$SWEEPER_KUBE" = 1.20 ]; then OLD_APISERVER_FLAGS=(--insecure-port 0); OLD_KCM_FLAGS=(--port 0); else OLD_APISERVER_FLAGS=(); OLD_KCM_FLAGS=(); fi
start kube-apiserver "$K8S_BIN_DIR/kube-apiserver" "${OLD_APISERVER_FLAGS[@]}" \
  --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
  --tls-cert-file "$PKI/serving.crt" --tls-private-key-file "$PKI/serving.key" --cert-dir "$PKI/generated" \
  --client-ca-file "$PKI/ca.crt" --token-auth-file "$PKI/tokens.csv" \
  --authorization-mode RBAC --anonymous-auth=false \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-account-issuer https://kubernetes.default.svc --api-audiences https://kubernetes.default.svc \
  --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=true \
  --disable-admission-plugins ServiceAccount \
  --max-requests-inflight 1000 --max-mutating-requests-inflight 500 \
  --enable-priority-and-fairness=false \
  --audit-policy-file "$SWEEPER_STATE/audit-policy.yaml" --audit-log-path "$SWEEPER_STATE/logs/audit.log" \
  --audit-log-format json --audit-log-maxsize 2000 --audit-log-maxbackup 1
wait_for kube-apiserver 90 curl -fsS --cacert "$PKI/ca.crt" -H "Authorization: Bearer $admin_token" \
  "https://127.0.0.1:$APISERVER_PORT/readyz"

# The shipped namespace, service account and RBAC, applied from the working tree every time (the
# tests run sweeper as that service account).
"$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" apply \
  -f "$REPO_ROOT/deploy/manifests/base/namespace.yaml" -f "$REPO_ROOT/deploy/manifests/base/serviceaccount.yaml" \
  -f "$REPO_ROOT/deploy/manifests/full/rbac.yaml" >/dev/null
# CAPA's namespace, where the external-only role reads static identities' Secrets.
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capa-system\n' |
  "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" apply -f - >/dev/null
# The external-only rules under the names sweeper-external… (the overlay names them sweeper…, as
# the full install does), bound to the service account sweeper-external; tests/rbac.rs reads them
# the same way. The Lease name (resourceNames) is not a `name:` field and stays.
printf 'apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sweeper-external\n  namespace: sweeper-system\n' |
  "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" apply -f - >/dev/null
sed -e 's/\(name: \)sweeper\b/\1sweeper-external/' "$REPO_ROOT/deploy/manifests/external-only/rbac.yaml" |
  "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" apply -f - >/dev/null

# --- kube-controller-manager: the namespace controller only ---
start kube-controller-manager "$K8S_BIN_DIR/kube-controller-manager" \
  --kubeconfig "$KUBECONFIG_FILE" --controllers namespace --leader-elect=false \
  --secure-port 0 "${OLD_KCM_FLAGS[@]}" --use-service-account-credentials=false \
  --concurrent-namespace-syncs 10 --kube-api-qps 100 --kube-api-burst 200

# --- the upstream CRDs and CAPA's admission (current server only) ---
# What CAPA's users run: CAPA's, Cluster API's and KubeZoo's CRDs exactly as published, CEL rules
# and defaults included (scripts/fixtures.sh resolves them from the pinned Go modules into the
# cache), and CAPA's own validating and defaulting webhooks for its cluster and identity kinds plus
# Cluster API's for Cluster (scripts/go/capa-webhooks). There is no stand-in: a test or a demo on
# sweeper's own, laxer CRDs proves nothing about the clusters our users run. The 1.20 fallback
# cannot take the CRDs unmodified: its tests install them adjusted, and it runs no webhook.
UPSTREAM=0
FIXTURES="$("$REPO_ROOT/scripts/fixtures.sh")"
if [ "$SWEEPER_KUBE" = current ]; then
  log "applying the upstream CRDs from $FIXTURES as they are"
  # Server-side: the largest CRDs are over the 256 KiB a client-side apply's annotation may hold.
  for f in "$FIXTURES"/capa/*.yaml "$FIXTURES"/capi/*.yaml "$FIXTURES"/kubezoo/tenants.tenant.kubezoo.io.yaml; do
    grep -q '^kind: CustomResourceDefinition' "$f" || continue
    "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" apply --server-side --force-conflicts \
      --field-manager sweeper-env -f "$f" >/dev/null
  done
  "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" wait --for condition=Established --timeout 60s \
    crd/awsclusters.infrastructure.cluster.x-k8s.io crd/awsmanagedcontrolplanes.controlplane.cluster.x-k8s.io \
    crd/clusters.cluster.x-k8s.io crd/awsclustercontrolleridentities.infrastructure.cluster.x-k8s.io \
    crd/tenants.tenant.kubezoo.io >/dev/null
  UPSTREAM=1
  # The webhook serves the API server's own cert (SANs 127.0.0.1, localhost), signed by the test CA.
  mkdir -p "$PKI/webhook"
  cp "$PKI/serving.crt" "$PKI/webhook/tls.crt" && cp "$PKI/serving.key" "$PKI/webhook/tls.key"
  # BootstrapFormatIgnition as a CAPA install with EXP_BOOTSTRAP_FORMAT_IGNITION=true runs it: without
  # it CAPA's AWSCluster webhook refuses every spec.s3Bucket, and the bucket cases (a cluster naming
  # another team's bucket) could not be written at all. The gate only widens what admission accepts.
  start capa-webhooks "$CAPA_WEBHOOKS/capa-webhooks" --kubeconfig "$KUBECONFIG_FILE" \
    --feature-gates BootstrapFormatIgnition=true \
    --host 127.0.0.1 --port "$CAPA_WEBHOOK_PORT" --cert-dir "$PKI/webhook" --ca-file "$PKI/ca.crt" \
    --capa-manifests "$CAPA_WEBHOOKS/capa-manifests.yaml" --capi-manifests "$CAPA_WEBHOOKS/capi-manifests.yaml"
  # Ready when the configurations point at it: it registers them only once it serves.
  webhooks_registered() {
    "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" get validatingwebhookconfiguration \
      capa-validating-webhook-configuration -o jsonpath='{.webhooks[0].clientConfig.url}' |
      grep -q ":$CAPA_WEBHOOK_PORT/" && running capa-webhooks
  }
  wait_for capa-webhooks 60 webhooks_registered
  # CAPA's defaulting webhook gives every AWSCluster without an identityRef the controller
  # identity `default`, and CAPA's manager (AutoControllerIdentityCreator, on by default) creates
  # that identity allowing every namespace. No CAPA manager runs all the time here: make it as CAPA would.
  printf 'apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: AWSClusterControllerIdentity\nmetadata:\n  name: default\nspec:\n  allowedNamespaces: {}\n' |
    "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" apply -f - >/dev/null
fi

# --- LocalStack ---
if [ "$SWEEPER_LOCALSTACK" = 0 ]; then
  log "SWEEPER_LOCALSTACK=0: LocalStack not started"
else
  start localstack env GATEWAY_LISTEN="127.0.0.1:$LOCALSTACK_PORT" \
    SERVICES=ec2,elb,elbv2,resourcegroupstaggingapi,sts,iam,logs,route53,sqs,events,secretsmanager,ssm,eks,s3 \
    LOCALSTACK_VOLUME_DIR="$SWEEPER_STATE/localstack" DNS_ADDRESS=0 SKIP_SSL_CERT_DOWNLOAD=1 \
    DISABLE_EVENTS=1 LOCALSTACK_CLI=0 \
    "$LOCALSTACK_VENV/bin/python" -m localstack.runtime.main
  ls_healthy() {
    curl -fsS "http://127.0.0.1:$LOCALSTACK_PORT/_localstack/health" | python3 -c '
import json, sys
s = json.load(sys.stdin)["services"]
sys.exit(0 if all(s.get(k) in ("available", "running") for k in ("ec2", "elb", "elbv2", "resourcegroupstaggingapi")) else 1)'
  }
  wait_for localstack 120 ls_healthy
fi

# What killed test runs left held keeps its namespace Terminating and the namespace controller
# busy (the script says why); released before anything measures or tests against the server.
KUBECONFIG_FILE="$KUBECONFIG_FILE" "$REPO_ROOT/scripts/clear-test-leftovers.sh"

cat > "$SWEEPER_STATE/env" <<ENV
export KUBECONFIG=$KUBECONFIG_FILE
export SWEEPER_TEST_ENV=$SWEEPER_STATE
export AWS_ENDPOINT_URL=http://127.0.0.1:$LOCALSTACK_PORT
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export SWEEPER_K8S_BIN=$K8S_BIN_DIR
export SWEEPER_SA_KUBECONFIG=$SA_KUBECONFIG_FILE
export SWEEPER_EXTERNAL_SA_KUBECONFIG=$EXT_SA_KUBECONFIG_FILE
export SWEEPER_AUDIT_LOG=$SWEEPER_STATE/logs/audit.log
export SWEEPER_KUBE=$SWEEPER_KUBE
export SWEEPER_KUBE_VERSION=$K8S_VERSION
export SWEEPER_UPSTREAM_CRDS=$UPSTREAM
export SWEEPER_CONFORMANCE_FIXTURES=$FIXTURES
ENV
log "environment up: source $SWEEPER_STATE/env"

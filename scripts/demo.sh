#!/usr/bin/env bash
# `make demo`: the embedded default environment (local kube-apiserver + LocalStack, provisioned on
# first use), sweeper deployed from the Helm chart's settings as two replicas with leader election,
# then the story (examples/demo): a workload cluster with AWS resources, a KubeZoo tenant and
# owner trees are set up, deleted at once, watched live, and reported on. On the default
# environment (CAPA's CRDs and webhooks), CAPA v2.13.0's own AWSCluster controller
# (scripts/capa-manager.sh) builds the workload cluster's network and runs beside sweeper with its
# ExternalResourceGC gate off, the hand-over's end state (docs/capa.md); the 1.20 fallback has no
# CAPA CRDs, and the demo builds a stand-in for CAPA's network itself.
#
# The replicas run as local processes, not pods, but with exactly the rendered Deployment's
# environment (plus the test credentials for LocalStack, a loopback HTTP port and text logs) and
# as the shipped `sweeper` service account, so only the shipped RBAC applies.
#
# DEMO_PORT (18080): first replica's HTTP port. DEMO_TIMEOUT (120): seconds the deletions may
# take. DEMO_FAILOVER (1): SIGTERM the leader 3 s into the deletions, as Kubernetes stops a pod;
# it releases the Lease and the standby takes over and finishes the job (0: no failover).
# DEMO_HOLD=1: keep the replicas running after the report until Ctrl-C.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
started=$SECONDS

# --workspace: the same packages as `make test`'s build (scripts/test.sh), so the same dependency
# features; with this crate alone cargo resolved a feature set of its own and rebuilt the AWS SDK
# crates once more (15 minutes or more on two cores).
cargo build --locked --workspace --bin sweeper --example demo
# The upstream CRDs (scripts/fixtures.sh fetches them from their pinned Go modules), CAPA's
# webhooks and CAPA's controller identity `default`, as the tests run on.
"$REPO_ROOT/scripts/env-up.sh"
# shellcheck disable=SC1091
source "$SWEEPER_STATE/env"
TARGET="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
BIN="$TARGET/debug/sweeper"
DEMO="$TARGET/debug/examples/demo"
KUBECTL="$SWEEPER_K8S_BIN/kubectl"
NS=sweeper-system
PORT="${DEMO_PORT:-18080}"
LOGS="$SWEEPER_STATE/logs"
mkdir -p "$LOGS"

say() { printf '%s\n' "$*"; }

if [ "${SWEEPER_UPSTREAM_CRDS:-0}" = 1 ]; then
  # env-up applied CAPA's, Cluster API's and KubeZoo's own CRDs, as they are, with CAPA's webhooks:
  # the demo runs on what a CAPA management cluster runs.
  log "using the upstream CRDs env-up applied (CAPA, Cluster API, KubeZoo) and CAPA's webhooks"
else
  # Only the 1.20 fallback (SWEEPER_KUBE=1.20): it cannot take the upstream CRDs as they are.
  log "the 1.20 fallback: applying sweeper's CRDs (Tenant, AWSCluster, AWSManagedControlPlane, Cluster)"
  "$BIN" crds | "$KUBECTL" apply -f - >/dev/null
fi

# All three collectors: the chart's default is the external one alone (a CAPA management
# cluster's), but the test environment's kube-controller-manager runs no garbage collector and the
# demo has a KubeZoo tenant, which is where the cascade and tenant collectors belong.
# http.insecure: the replicas run on this machine, on loopback, and the demo reads their /status
# with curl; in a cluster the port is HTTPS with a token (docs/operations.md, "HTTP endpoints").
log "rendering the Helm chart (deploy/helm/sweeper) with all three collectors, aws.endpointUrl and aws.region set, http.insecure"
helm="$("$REPO_ROOT/scripts/provision-helm.sh")"
rendered="$SWEEPER_STATE/demo-chart.yaml"
"$helm" template sweeper deploy/helm/sweeper --namespace "$NS" \
  --set featureGates.CascadeGC=true --set featureGates.TenantGC=true --set http.insecure=true \
  --set aws.endpointUrl="$AWS_ENDPOINT_URL" --set aws.region="$AWS_REGION" >"$rendered"

# The Deployment's container, as `demo chart-env` reads it from the render.
deployment="$("$DEMO" chart-env <"$rendered")"
replicas=1 args=() chart_env=() identity_var="" chart_http_addr="" chart_log_format=""
while read -r what rest; do
  case "$what" in
    replicas) replicas="$rest" ;;
    arg) args+=("$rest") ;;
    env)
      case "${rest%%=*}" in
        # Overridden per replica below: a loopback port each, text logs in files.
        SWEEPER_HTTP_ADDR) chart_http_addr="${rest#*=}" ;;
        SWEEPER_LOG_FORMAT) chart_log_format="${rest#*=}" ;;
        *) chart_env+=("$rest") ;;
      esac ;;
    fieldref)
      name="${rest%% *}" path="${rest#* }"
      case "$path" in
        metadata.namespace) chart_env+=("$name=$NS") ;;
        metadata.name) identity_var="$name" ;;
        *) echo "demo: the chart reads $path from the downward API; the demo cannot fill it in" >&2; exit 1 ;;
      esac ;;
  esac
done <<<"$deployment"
[ -n "$identity_var" ] || { echo "demo: the chart sets no identity from metadata.name" >&2; exit 1; }
setting() { local kv; for kv in "${chart_env[@]}"; do [ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return 0; }; done; return 0; }
LEASE="$(setting SWEEPER_LEADER_ELECT_LEASE_NAME)"

# What a pod gets besides the chart's env: its service account's identity. Credentials for
# LocalStack come from the environment (the chart's aws.credentialsSecret is empty by default).
base_env=(
  "PATH=$PATH" "HOME=$HOME"
  "KUBECONFIG=$SWEEPER_SA_KUBECONFIG"
  "AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY"
)

log "cleaning up what an earlier demo left"
"$KUBECTL" -n "$NS" delete lease "$LEASE" --ignore-not-found >/dev/null
"$DEMO" clean

for i in $(seq 0 $((replicas - 1))); do
  if curl -fsS -o /dev/null "http://127.0.0.1:$((PORT + i))/healthz" 2>/dev/null; then
    echo "demo: port $((PORT + i)) is already serving something; set DEMO_PORT" >&2
    exit 1
  fi
done

# CAPA's controller for the demo's namespace (examples/demo/workload.rs: sweeper-demo), started
# fresh so its gate is the one asked for here.
capa_args=()
if [ "${SWEEPER_UPSTREAM_CRDS:-0}" = 1 ]; then
  "$REPO_ROOT/scripts/capa-manager.sh" stop sweeper-demo
  "$REPO_ROOT/scripts/capa-manager.sh" start sweeper-demo --gc-gate off
  capa_args=(--capa-log "$LOGS/capa-manager-sweeper-demo.log")
fi

pids=()
stop_replicas() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  [ ${#capa_args[@]} -eq 0 ] || "$REPO_ROOT/scripts/capa-manager.sh" stop sweeper-demo
}
trap stop_replicas EXIT

role_of() { # url -> leader | standby | starting | ... (empty when not answering)
  curl -fsS "$1/status" 2>/dev/null | grep -o '"role":"[a-z]*"' | cut -d'"' -f4 || true
}

# Replica 0 first, and until it leads, so the story reads the same every time.
replica_args=()
for i in $(seq 0 $((replicas - 1))); do
  name="demo-replica-$i" url="http://127.0.0.1:$((PORT + i))"
  env -i "${base_env[@]}" "${chart_env[@]}" \
    "$identity_var=$name" SWEEPER_HTTP_ADDR="127.0.0.1:$((PORT + i))" SWEEPER_LOG_FORMAT=text NO_COLOR=1 \
    "$BIN" "${args[@]}" >"$LOGS/demo-sweeper-$i.log" 2>&1 &
  pids+=("$!")
  replica_args+=(--replica "$name=$url=$!")
  want=standby; [ "$i" = 0 ] && want=leader
  role=""
  for _ in $(seq 120); do
    role="$(role_of "$url")"
    [ "$role" = "$want" ] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.5
  done
  if [ "$role" != "$want" ]; then
    holder="$("$KUBECTL" -n "$NS" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)"
    echo "demo: $name is '${role:-not answering}', expected $want (Lease $NS/$LEASE held by '${holder:-nobody}'; is someone else running replicas?). Log: $LOGS/demo-sweeper-$i.log" >&2
    tail -n 20 "$LOGS/demo-sweeper-$i.log" >&2 || true
    exit 1
  fi
done

say ""
say "== sweeper deployed from the Helm chart's settings (deploy/helm/sweeper, rendered to $rendered)"
say "   $replicas replicas (replicaCount), 'sweeper ${args[*]}', as service account $NS/sweeper (shipped RBAC)"
say "   feature gates    $(setting SWEEPER_FEATURE_GATES)"
say "   leader election  Lease $(setting SWEEPER_LEADER_ELECT_NAMESPACE)/$LEASE, duration $(setting SWEEPER_LEADER_ELECT_LEASE_DURATION), renew $(setting SWEEPER_LEADER_ELECT_RENEW_DEADLINE), retry $(setting SWEEPER_LEADER_ELECT_RETRY_PERIOD)"
say "   kube API         qps $(setting SWEEPER_KUBE_API_QPS), burst $(setting SWEEPER_KUBE_API_BURST); cascade workers $(setting SWEEPER_CASCADE_WORKERS), tenant deletes $(setting SWEEPER_TENANT_DELETE_CONCURRENCY)"
say "   AWS              $(setting AWS_ENDPOINT_URL) ($(setting AWS_REGION))"
say "   overridden       SWEEPER_HTTP_ADDR $chart_http_addr -> 127.0.0.1:$PORT+N, SWEEPER_LOG_FORMAT $chart_log_format -> text ($LOGS/demo-sweeper-N.log)"
say "   identity         $identity_var (the pod name in the chart) = demo-replica-N"
for i in $(seq 0 $((replicas - 1))); do
  say "   demo-replica-$i  http://127.0.0.1:$((PORT + i))  pid ${pids[$i]}  $(role_of "http://127.0.0.1:$((PORT + i))")"
done

failover=()
[ "${DEMO_FAILOVER:-1}" = 1 ] && failover=(--failover)
status=0
"$DEMO" run "${replica_args[@]}" --timeout "${DEMO_TIMEOUT:-120}" "${failover[@]}" "${capa_args[@]}" || status=$?

# The leaks from before: demo-old (its resources left by a cluster deleted before sweeper was
# installed) is what `sweeper scan` is for; demo-wl-b stands for another management cluster's
# cluster in the same account, so it is marked not ours on sweeper's namespace.
say ""
say "== the leaks from before: '$BIN scan' (deletes nothing), demo-wl-b marked not ours on namespace $NS"
"$KUBECTL" annotate namespace "$NS" sweeper.dev/scan-not-ours=demo-wl-b --overwrite >/dev/null
"$BIN" scan || status=1
say ""
say "== '$BIN teardown --cluster-name demo-old --region $AWS_REGION': the plan with proofs, a dry run (no --yes)"
"$BIN" teardown --cluster-name demo-old --region "$AWS_REGION" || status=1

if [ "${DEMO_HOLD:-0}" = 1 ]; then
  say "replicas keep running (DEMO_HOLD=1): '$BIN status --server http://127.0.0.1:$PORT'; Ctrl-C stops them"
  wait || true
fi
log "stopping the replicas (SIGTERM: the leader releases the Lease) and CAPA's controller"
stop_replicas
trap - EXIT
say "make demo took $((SECONDS - started))s. The environment keeps running: 'make env-down' stops it."
exit "$status"
